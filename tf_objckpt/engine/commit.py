"""Commits saves: undoes a failed one, flushes a durable one.

`saving(P)` wraps a whole save of prefix P, state file included: a save
transaction (`api.save_transaction`) enters it once, around its write,
commit and record steps.

- Before it writes, it removes the stale leftovers of interrupted saves of
  P and, given `base`, of every other `<base>-<n>` (`leftovers`), and then
  holds the directory's shared lock (`directory_lock`) until the save ends.
- When the save fails, for any reason, every file of P that it created
  (`temporary_names`) is removed and the error is re-raised, its message
  naming the checkpoint and the reason (`save_errors`). Files of P that
  existed before stay, and so does the state file (it is replaced
  atomically, or not at all). The save is kept, and not undone, once
  `Save.keep()` is called (its record step calls it when the state file
  lists the checkpoint).

Durable saves (`durable=True`) fsync the checkpoint's files and its
directory before the save commits, through `os`: TensorFlow's file layer
cannot fsync, so they work on local paths only.
"""

import contextlib
import os

from tensorflow.python.framework import errors
from tensorflow.python.lib.io import file_io

from tf_objckpt.engine import directory_lock
from tf_objckpt.engine import leftovers
from tf_objckpt.engine import local_paths
from tf_objckpt.engine import save_errors
from tf_objckpt.engine import temporary_names


class Save:
  """One save in progress: whether it is kept, and how to sync it."""

  def __init__(self, save_path=None, directory=None, name=None):
    self.save_path = save_path
    self.kept = False
    self.directory = directory
    self.name = name

  def keep(self):
    """Marks the save as listed: a later failure no longer undoes it."""
    self.kept = True

  def sync(self):
    """Flushes the checkpoint's files and directory to disk (fsync)."""
    if self.save_path is None:
      return
    local = local_paths.local_path(self.save_path)
    if local is None:
      raise _not_durable(self.save_path)
    finished = temporary_names.finished_files(self.name)
    for entry in leftovers.entries(self.directory):
      if finished.fullmatch(entry):
        fsync(os.path.join(os.path.dirname(local), entry))
    fsync(os.path.dirname(local) or ".")


def fsync(local_path):
  """Flushes a local file or directory to disk."""
  fd = os.open(local_path, os.O_RDONLY)
  try:
    os.fsync(fd)
  finally:
    os.close(fd)


def check_durable(save_path):
  """Raises unless saves to `save_path` can be made durable (local paths).

  Raises:
    UnimplementedError: For paths of other file systems, and prefixes only
      known when ops run (tensors inside a `tf.function`).
  """
  path = local_paths.as_path(save_path)
  if path is None or local_paths.local_path(path) is None:
    raise _not_durable(save_path)


def _not_durable(save_path):
  return errors.UnimplementedError(
      None, None,
      f"Durable saves are unavailable for {save_path!r}: TensorFlow's file "
      "system layer cannot flush files to disk (fsync), so durable=True "
      "works on local paths only.")


@contextlib.contextmanager
def saving(save_path,
           base=None,
           keep=(),
           extra_files=(),
           state_file=None,
           make_directory=False):
  """Runs a save of `save_path`: cleans up before, undoes it if it fails.

  Args:
    save_path: The checkpoint prefix being written. Tensors (whose value is
      known only when ops run) are not managed.
    base: The prefix `save_path` was numbered from (`<base>-<n>`), if any: the
      leftovers of other saves numbered from it are removed too.
    keep: Names of prefixes listed by a state file: their data files stay.
    extra_files: Other files the save writes (a meta graph), removed too if
      the save fails and created them.
    state_file: The name of the state file the save updates, whose
      temporary files are leftovers too; None for none.
    make_directory: Create the directory of a prefix given as a string
      first (the save would), so that it is locked from the start.

  Yields:
    The `Save`.
  """
  make_directory = make_directory and isinstance(save_path,
                                                 (str, bytes, os.PathLike))
  save_path = local_paths.as_path(save_path)
  if save_path is None:
    yield Save()
    return
  directory, name = os.path.split(save_path)
  save = Save(save_path, directory, name)
  with save_errors.explaining_failures(save_path, state_file):
    if make_directory and directory:
      file_io.recursive_create_dir(directory)
    with _undoing_failures(save, base, keep, extra_files, state_file):
      yield save


@contextlib.contextmanager
def _undoing_failures(save, base, keep, extra_files, state_file):
  """Cleans up before `save`; removes what it wrote if it fails."""
  directory, name = save.directory, save.name
  with directory_lock.holding(directory, exclusive=False,
                              wait=False) as (lock, acquired):
    listed = leftovers.scan(directory)
    before = None  # Unknown: a failure removes temporary files only.
    if listed is not None:
      listed = leftovers.remove_stale_among(
          directory, listed, temporary_names.numbered(name, base, directory),
          set(keep), state_file, lock)
      before = set(listed) | {
          path for path in extra_files if file_io.file_exists(path)
      }
    if acquired and lock.mode is directory_lock.LockMode.EXCLUSIVE:
      lock.lock(exclusive=False, wait=True)  # Let other saves run beside.
    with leftovers.saving_in_process(save.save_path):
      try:
        yield save
      except BaseException:
        if not save.kept:
          _undo(directory, name, before, extra_files)
        raise


def _undo(directory, name, before, extra_files):
  """Removes the files of a failed save of `name` that were not `before`.

  Temporary files go in any case (those of `extra_files` too); with
  `before` None (unknown), only they.
  """
  own = temporary_names.own_files(name)
  for entry in leftovers.scan(directory) or ():
    match = own.fullmatch(entry)
    if match and (match.group("partial") or
                  (before is not None and entry not in before)):
      leftovers.remove(os.path.join(directory, entry))
  for path in extra_files:
    if before is not None and path not in before:
      leftovers.remove(path)
    extra_directory, extra_name = os.path.split(path)
    temporary = temporary_names.temporary_copies(extra_name)
    for entry in leftovers.scan(extra_directory) or ():
      if temporary.fullmatch(entry):
        leftovers.remove(os.path.join(extra_directory, entry))
