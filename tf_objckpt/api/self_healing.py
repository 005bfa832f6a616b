"""Self-healing restores: the newest intact checkpoint, past damaged ones.

A job restarting from a checkpoint that a torn copy, a failing disk or bit
rot damaged would fail on every restart. `restore_newest_intact` tries the
candidates newest first, each with a restore that reads every value before
it assigns anything, so a damaged one leaves the objects untouched. When a
restore fails, `damage` runs `verify` on that checkpoint: if it finds
damage (a missing or damaged `.index`, a missing, short or corrupt data
file, a damaged object graph) the checkpoint is skipped with a warning in
`verify`'s words; any other failure (a shape or dtype mismatch, which older
checkpoints would repeat) is raised at once.
"""

import contextlib
import os

from tensorflow.python.eager import context
from tensorflow.python.framework import errors
from tensorflow.python.lib.io import file_io
from tensorflow.python.platform import tf_logging as logging

from tf_objckpt.engine import bundle_index
from tf_objckpt.engine import reads
from tf_objckpt.engine import resident_memory
from tf_objckpt.engine import state_file
from tf_objckpt.engine import tuning
from tf_objckpt.inspection import checkpoint_listing
from tf_objckpt.inspection import verify_checkpoint

# Problems a warning or a line of `verify --all` names; the rest are counted.
_PROBLEMS_SHOWN = 3


class CheckedValues(reads.CheckpointValues):
  """A restore's `CheckpointValues` that reads every value before any use.

  Within `checked()`, every value of the checkpoint is read (so its
  checksum checked) before the restore assigns any, values restored later
  on creation or by graph-mode restore ops included.
  """

  @contextlib.contextmanager
  def checked(self, keep_values=True):
    """A restore within this reads from a checkpoint whose values all read.

    The check comes first, a piece at a time, before the restore assigns
    anything or builds anything that would later (a slot variable's
    initial value, say): graph building too, although there the restore
    itself reads nothing, because building a restore already sets Python
    state. Eagerly (if `keep_values`) it keeps up to two restore pieces of
    values for the restore, which does not read those again, and the
    restore skips its own check.

    Args:
      keep_values: Whether the restore reads through this object, so that
        values kept serve it.

    Yields:
      Nothing; every value has been read when the body runs.
    """
    keep_bytes = 0
    if keep_values and context.executing_eagerly():
      keep_bytes = 2 * tuning.TUNING.restore_piece_bytes
    self._read_every_value(keep_bytes)
    yield
    self._drop_unawaited()

  def _read_every_value(self, keep_bytes):
    """Reads every value, keeping the first `keep_bytes` of them."""
    specs = [reads.Read(key, "", dtype) for key, dtype in self.dtypes.items()]
    sizes = [
        reads.byte_size(self.shapes[spec.name], spec.dtype) for spec in specs
    ]
    budget = resident_memory.PieceBudget(tuning.TUNING.restore_piece_bytes)
    with context.eager_mode():
      for run in reads.runs_of_bytes(sizes, tuning.TUNING.restore_piece_bytes):
        values = self._restore_v2(specs[run])
        keep_bytes -= sum(sizes[run])
        if keep_bytes >= 0:
          self._read_ahead.update(((spec.name, ""), value)
                                  for spec, value in zip(specs[run], values))
        else:
          del values
          budget.piece_freed()
    self.pieces_need_checking = False

  def _drop_unawaited(self):
    """Frees the values kept that no object waits for."""
    self._read_ahead = {
        key: value
        for key, value in self._read_ahead.items()
        if key[0] in self._awaited
    }


def damage(prefix):
  """What `verify` finds damaged in checkpoint `prefix`; empty if intact.

  Returns:
    One line per problem, as `tf-objckpt verify` prints them. A checkpoint
    without its `.index` file (V2), or that cannot be opened, is damaged.
  """
  with context.eager_mode():  # `verify` reads eagerly, graph building too.
    return _damage(prefix)


def _damage(prefix):
  index_file = bundle_index.index_file_name(prefix)
  if not (file_io.file_exists(index_file) or file_io.file_exists(prefix)):
    return [
        str(verify_checkpoint.Problem(index_file, "", "index file is missing"))
    ]
  try:
    listing = checkpoint_listing.open_listing(prefix, strict=False)
  except errors.OpError as e:
    return [
        str(
            verify_checkpoint.Problem(
                index_file, "", f"cannot be read: {type(e).__name__}: "
                f"{verify_checkpoint.op_error_text(e)}"))
    ]
  return [str(problem) for problem in verify_checkpoint.verify(listing).errors]


def file_damage(prefix):
  """`verify`'s lines of the data files of `prefix` missing or too short.

  Found from the index alone, without reading values: empty when the
  files are all there, or when the index cannot be read (`damage` says).
  """
  try:
    listing = checkpoint_listing.open_listing(prefix, strict=False)
  except errors.OpError:
    return []
  return [str(problem) for problem in verify_checkpoint.file_problems(listing)]


def all_checkpoints(directory):
  """Every checkpoint of `directory`, listed in its state file or not.

  Returns:
    The prefixes the state file lists, newest first, then the others the
    directory's files show (`state_file.directory_checkpoints`).
  """
  state = state_file.get_checkpoint_state(directory)
  listed = []
  if state is not None:
    listed = [
        state.model_checkpoint_path, *reversed(state.all_model_checkpoint_paths)
    ]
  listed = list(dict.fromkeys(os.path.normpath(path) for path in listed))
  return listed + state_file.unlisted_checkpoints(directory, listed)


def summary(problems):
  """The first few `problems` (from `damage`), joined in one line."""
  shown = "; ".join(problems[:_PROBLEMS_SHOWN])
  more = len(problems) - _PROBLEMS_SHOWN
  return shown + (f"; and {more} more" if more > 0 else "")


def restore_newest_intact(restore, candidates):
  """Restores the first intact checkpoint of `candidates`.

  Args:
    restore: Restores one path, assigning nothing if it raises.
    candidates: Checkpoint prefixes, newest first (an iterable, not empty).

  Returns:
    The restored prefix, and the damaged prefixes skipped before it.

  Raises:
    The newest candidate's error, if every candidate is damaged; at once,
    the error of a restore that fails for another reason than damage.
  """
  skipped, first_error = [], None
  for path in candidates:
    try:
      restore(path)
      return path, skipped
    # Any failure may be damage: `verify` decides, not the error's type
    # (TensorFlow raises NotFoundError for an absent key too).
    except Exception as failure:  # pylint: disable=broad-except
      problems = damage(path)
      if not problems:
        raise
      logging.warning("Skipped damaged checkpoint %s: %s", path,
                      summary(problems))
      skipped.append(path)
      first_error = first_error or failure
  raise first_error
