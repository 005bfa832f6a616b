"""One save transaction: plan, write shards, commit, record state.

Every save of tf_objckpt is one transaction of four steps, run in this order
by the API layer: `Checkpoint.save` and `write`, `CheckpointV1.save` and
`write`, `CheckpointManager.save`, asynchronous saves, `TrackableSaver.save`,
and the v1 `Saver.save` (the Python around its `SaverDef`'s save op, which
stays TensorFlow's). The caller plans (step 1); a `SaveTransaction` runs
steps 2 to 4, calling the engine for their file operations.

1. **Plan** (API layer: the caller). Everything the save will do is decided
   before anything is written, as a `SavePlan`: the prefix, numbered here
   once (`numbered`) from the save counter, the manager's number or the
   global step; the prefix it is numbered from and the names the state
   file lists (see step 2's cleanup); the state file it updates; other
   files it writes (the v1 `Saver`'s meta graph); and, from the options,
   whether it is durable (refused at once off local paths:
   `commit.check_durable`) and their write callbacks. Graph building,
   `CheckpointV1.save` builds its counter's and save's ops here at its
   first save (`TrackableSaver.build_save_ops`). An asynchronous save
   reads its values here (`async_checkpoint.Snapshot`), so that later
   assignments stay out of it, and runs steps 2 to 4 in the background.
2. **Write shards** (engine: `commit.saving`, `multi_device_saver`,
   `engine.writes`). `commit.saving` opens the save, once: it makes and
   locks the directory and removes what interrupted saves of the plan's
   prefixes left. Then the writer writes: `TrackableSaver.write_shards`
   gathers the objects' saveables and object graph (graph building: runs
   its cached op, in one `session.run`), and the engine writes one shard
   per task under temporary names and merges them, the index last; the v1
   `Saver` runs its `SaverDef`'s save tensor, then writes its meta graph;
   another checkpoint object under our manager (TensorFlow's) writes with
   its own `write`, which runs the write callbacks itself. A save traced
   into a `tf.function` ends here: its path is a tensor, and it writes when
   the function runs.
3. **Commit** (engine: `commit.Save.sync`). A durable save flushes the
   checkpoint's files and directory to disk; then the options' write
   callbacks run, with the path, as TensorFlow runs them.
4. **Record state** (engine: `engine.state_file`, through the plan's
   recorder). The `checkpoint` state file lists the checkpoint:
   `Checkpoint.save` as the latest (`record_latest`), a manager with the
   ones it keeps, after which it deletes older ones; the v1 `Saver`
   likewise. Writes record nothing. A recorder calls `Save.keep()` once
   the state file lists the checkpoint: what fails later (a manager
   deleting old checkpoints) no longer undoes the save.

TensorFlow's asynchronous `Checkpoint` says that its files are final only
through the write callbacks, from its own thread: under our manager, its
save is started (`SaveTransaction.start`) and runs steps 3 and 4 from its
last write callback (`SaveTransaction.finish`), as TensorFlow's manager
records from there.

When a step fails, the error propagates and the save is undone by
`commit.saving`: every file it created is removed (files of the prefix that
existed before stay), and the state file is as it was, since it is replaced
atomically or not at all. A TensorFlow error keeps its type; its message is
led by the checkpoint and, when the file system shows one, the reason
(`save_errors.explaining_failures`).

The saves of `Checkpoint`, `CheckpointV1` and managers into one directory
run one at a time in a process (`one_save_at_a_time`), from plan to record,
except the steps asynchronous saves run in the background; saves into
different directories do not wait for each other.
"""

import contextlib
import dataclasses
import inspect
import os
import threading
import typing

from tensorflow.python.eager import context
from tensorflow.python.framework import tensor_util
from tensorflow.python.util import compat

from tf_objckpt.engine import commit
from tf_objckpt.engine import local_paths
from tf_objckpt.engine import state_file
from tf_objckpt.engine import transfer_log

# Guards `_DIRECTORY_LOCKS`.
_REGISTRY_LOCK = threading.Lock()
# Directory -> [the lock its saves hold, how many saves hold or wait for it]
# (see `one_save_at_a_time`); an entry goes with its last save.
_DIRECTORY_LOCKS: "dict[typing.Optional[str], list]" = {}


def _directory_key(save_path):
  """The directory of `save_path`, as saves into it are serialized by.

  None for a prefix known only when ops run (a tensor inside a
  `tf.function`): such saves are serialized with each other.
  """
  path = local_paths.as_path(save_path)
  if path is None:
    return None
  directory = os.path.dirname(path) or "."
  if local_paths.local_path(directory) is not None:
    return os.path.abspath(local_paths.local_path(directory))
  return directory


@contextlib.contextmanager
def one_save_at_a_time(save_path):
  """Runs the save of `save_path` alone among this process's saves into its
  directory.

  A save numbers its checkpoint, writes it and updates the directory's
  state file; run together from two threads, saves into one directory
  could share a number or record each other's paths. Serialized, each
  returns a distinct, complete checkpoint whose number is its own count.
  Saves into other directories run at the same time. A save started from
  inside another (by a write callback) into the same directory runs on.
  """
  key = _directory_key(save_path)
  with _REGISTRY_LOCK:
    entry = _DIRECTORY_LOCKS.setdefault(key, [threading.RLock(), 0])
    entry[1] += 1
  try:
    with entry[0]:
      yield
  finally:
    with _REGISTRY_LOCK:
      entry[1] -= 1
      if not entry[1]:
        del _DIRECTORY_LOCKS[key]


def numbered(save_path, number, digits=0):
  """`<save_path>-<number>`: the one place a checkpoint number is formatted.

  Args:
    save_path: The prefix the checkpoints are numbered from.
    number: An integer (Python's, NumPy's, or an eager tensor's).
    digits: Pads the number with zeros to this width (the v1 `Saver`'s
      `pad_step_number`); 0 for none.
  """
  return f"{save_path}-{number:0{digits}d}"


@dataclasses.dataclass(frozen=True)
class SavePlan:
  """What one save will do, decided before it writes (step 1).

  Attributes:
    save_path: The checkpoint path to write: a string, or a tensor (a save
      traced into a `tf.function`, or a path given as one).
    base: The path `save_path` is numbered from, if any: the leftovers of
      the saves numbered from it are removed too.
    keep: Names of the prefixes the state file lists: their data files stay.
    state_file: The name of the state file the save updates, or None.
    extra_files: Other files the save writes (a meta graph).
    make_directory: Create the prefix's directory (string prefixes).
    durable: Flush the files to disk before they are recorded.
    callbacks: The options' write callbacks, run once the files are final.
  """

  save_path: typing.Any
  base: typing.Optional[str] = None
  keep: typing.FrozenSet[str] = frozenset()
  state_file: typing.Optional[str] = None
  extra_files: typing.Tuple[str, ...] = ()
  make_directory: bool = False
  durable: bool = False
  callbacks: typing.Tuple[typing.Callable, ...] = ()


def planned(save_path, options=None, **fields):
  """A `SavePlan` of `save_path`, durable and with write callbacks as `options`.

  Args:
    save_path: The checkpoint prefix to write.
    options: Optional `tf.train.CheckpointOptions` (or ours).
    **fields: The plan's other fields.
  """
  return SavePlan(save_path=save_path,
                  durable=bool(getattr(options, "durable", False)),
                  callbacks=tuple(
                      getattr(options, "experimental_write_callbacks", None) or
                      ()),
                  **fields)


def path_string(output):
  """The path a write returned, as a string.

  A tensor's value is read (eagerly); a symbolic tensor (a save traced into
  a `tf.function`) is returned as it is, and None (nothing written) too.
  """
  if output is None or isinstance(output, str):
    return output
  if tensor_util.is_tf_type(output):
    if not context.executing_eagerly():
      return output
    output = output.numpy()
  return compat.as_str(output)


def record_latest(save_path, save, durable=False):
  """Step 4 of `Checkpoint.save`: the state file lists `save_path`, the latest.

  As TensorFlow does, the state file then lists only `save_path`, relative to
  its directory.
  """
  state_file.update_checkpoint_state_internal(
      save_dir=os.path.dirname(save_path),
      model_checkpoint_path=save_path,
      all_model_checkpoint_paths=[save_path],
      save_relative_paths=True,
      durable=durable)
  save.keep()


class SaveTransaction:
  """Steps 2 to 4 of one planned save, in order.

  `run(write)` runs them all. A writer that finishes in the background and
  says so through the write callbacks (TensorFlow's asynchronous
  `Checkpoint`) is started with `start(write)` and calls `finish(path)`.
  """

  def __init__(self, plan, record=None):
    """A save of `plan`.

    Args:
      plan: The `SavePlan` (step 1).
      record: Step 4, `record(path, save)` with the `commit.Save`; None
        for a save that records no state (a write).
    """
    self.plan = plan
    self._record = record
    self._save = None
    self._started = None

  def run(self, write):
    """Writes with `write(save_path)`, then commits and records.

    Returns:
      What `write` returned: the path (a string, bytes from a session, an
      eager tensor), a symbolic tensor, or None if nothing was written.
    """
    with self._opened():
      output = write(self.plan.save_path)
      path = path_string(output)
      if isinstance(path, str):
        self._finish(path)
      return output

  def start(self, write):
    """Starts a write that calls `finish(path)` once its files are final."""
    with self._opened():
      return write(self.plan.save_path)

  def finish(self, output):
    """Steps 3 and 4, once a started write returned `output` (its path)."""
    self._finish(path_string(output))

  @contextlib.contextmanager
  def _opened(self):
    """`commit.saving` of the plan: the save's one cleanup and undo."""
    plan = self.plan
    self._started = transfer_log.start()
    with commit.saving(plan.save_path,
                       base=plan.base,
                       keep=plan.keep,
                       extra_files=plan.extra_files,
                       state_file=plan.state_file,
                       make_directory=plan.make_directory) as self._save:
      yield

  def _finish(self, save_path):
    """Steps 3 and 4 of a save that wrote `save_path`."""
    transfer_log.saved(save_path, self._started)
    self._commit(save_path)
    if self._record is not None:
      self._record(save_path, self._save)

  def _commit(self, save_path):
    """Step 3: flushes a durable save, then runs the write callbacks."""
    if self.plan.durable:
      self._save.sync()
    for callback in self.plan.callbacks:
      _call_with_path(callback, save_path)


def _call_with_path(callback, save_path):
  """Calls a write callback, with the path if it takes one.

  Raises:
    AssertionError: If the callback takes more than one argument.
  """
  num_parameters = len(inspect.signature(callback).parameters)
  if num_parameters == 0:
    callback()
  elif num_parameters == 1:
    callback(save_path)
  else:
    raise AssertionError(
        "Checkpoint write callbacks must take 0 or 1 arguments (the "
        f"checkpoint path); {callback} takes {num_parameters}.")
