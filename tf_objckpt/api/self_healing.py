"""Self-healing restores: the newest intact checkpoint, past damaged ones.

A job restarting from a checkpoint that a torn copy, a failing disk or bit
rot damaged would fail on every restart. `restore_newest_intact` tries the
candidates newest first, each with a restore that reads every value before
it assigns anything (`CheckpointValues.every_value_read_first`), so a
damaged one leaves the objects untouched. When a restore fails, `damage`
runs `verify` on that checkpoint: if it finds damage (a missing or damaged
`.index`, a missing, short or corrupt data file, a damaged object graph)
the checkpoint is skipped with a warning in `verify`'s words; any other
failure (a shape or dtype mismatch, which older checkpoints would repeat)
is raised at once.
"""

import os

from tensorflow.python.eager import context
from tensorflow.python.framework import errors
from tensorflow.python.lib.io import file_io
from tensorflow.python.platform import tf_logging as logging

from tf_objckpt.engine import bundle_index
from tf_objckpt.engine import state_file
from tf_objckpt.inspection import checkpoint_listing
from tf_objckpt.inspection import verify_checkpoint

# Problems a warning or a line of `verify --all` names; the rest are counted.
_PROBLEMS_SHOWN = 3


def damage(save_path):
  """What `verify` finds damaged in checkpoint `save_path`; empty if intact.

  Returns:
    One line per problem, as `tf-objckpt verify` prints them. A checkpoint
    without its `.index` file (V2), or that cannot be opened, is damaged.
  """
  with context.eager_mode():  # `verify` reads eagerly, graph building too.
    return _damage(save_path)


def _damage(save_path):
  index_file = bundle_index.index_file_name(save_path)
  if not (file_io.file_exists(index_file) or file_io.file_exists(save_path)):
    return [
        str(verify_checkpoint.Problem(index_file, "", "index file is missing"))
    ]
  try:
    listing = checkpoint_listing.open_listing(save_path, strict=False)
  except errors.OpError as e:
    return [
        str(
            verify_checkpoint.Problem(
                index_file, "", f"cannot be read: {type(e).__name__}: "
                f"{verify_checkpoint.op_error_text(e)}"))
    ]
  return [str(problem) for problem in verify_checkpoint.verify(listing).errors]


def file_damage(save_path):
  """`verify`'s lines of the data files of `save_path` missing or too short.

  Found from the index alone, without reading values: empty when the
  files are all there, or when the index cannot be read (`damage` says).
  """
  try:
    listing = checkpoint_listing.open_listing(save_path, strict=False)
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
