"""Finds and removes what failed or interrupted saves left behind.

Before a save writes, the stale leftovers of earlier saves of its prefix
and, given a base, of every other `<base>-<n>` are removed: temporary files
and `_temp` directories (`temporary_names`), temporary copies of the state
file, and data files of a prefix without an index (the index is written
last) that the caller does not list in `keep`. A checkpoint with an index
is never removed.

A leftover is stale when no save of tf_objckpt is still writing it:

- On local paths, when this process holds the directory's exclusive lock
  (`directory_lock`), taken without waiting: no save runs there.
- Elsewhere (`gs://`, `s3://`, `ram://`, ... or a local file system without
  `flock`), when this process is not saving that prefix and its newest
  file is more than `REMOTE_STALE_AFTER_SECONDS` old by its modification
  time. File systems that report no modification time (as `ram://`, which
  lives in this process) make leftovers stale at once.
"""

import collections
import contextlib
import os
import re
import threading
import time

from tensorflow.python.framework import errors
from tensorflow.python.lib.io import file_io
from tensorflow.python.platform import tf_logging as logging

from tf_objckpt.engine import directory_lock
from tf_objckpt.engine import local_paths
from tf_objckpt.engine import temporary_names

# Leftovers on file systems without locks are removed once this old.
REMOTE_STALE_AFTER_SECONDS = 3600.

_lock = threading.Lock()  # Guards `_saving`.
# How many saves of each prefix this process runs: never stale.
_saving: "collections.Counter[str]" = collections.Counter()


@contextlib.contextmanager
def saving_in_process(save_path):
  """Marks `save_path` as being saved by this process: never stale meanwhile."""
  with _lock:
    _saving[save_path] += 1
  try:
    yield
  finally:
    with _lock:
      _saving[save_path] -= 1
      if not _saving[save_path]:
        del _saving[save_path]


def _being_saved(save_path):
  with _lock:
    return _saving[save_path] > 0


def entries(directory):
  """The names in `directory` (none if it does not exist)."""
  try:
    return [
        entry.rstrip("/") for entry in file_io.list_directory(directory or ".")
    ]
  except errors.NotFoundError:
    return []


def scan(directory):
  """The names in `directory`, or None if it cannot be listed."""
  try:
    return entries(directory)
  except errors.OpError as e:
    logging.warning(
        "Could not list %s to find the files of failed or "
        "interrupted checkpoint saves: %s", directory, e)
    return None


def remove(file_path):
  """Removes a file or directory; a failure is logged, never raised."""
  try:
    if file_io.is_directory(file_path):
      file_io.delete_recursively(file_path)
    else:
      file_io.delete_file(file_path)
  except errors.NotFoundError:
    pass
  except errors.OpError as e:
    logging.warning(
        "Could not remove %s, left by a failed or interrupted "
        "checkpoint save: %s", file_path, e)


def _mtime(file_path):
  """The newest modification time (seconds) of a file or directory tree."""
  try:
    if not file_io.is_directory(file_path):
      return file_io.stat(file_path).mtime_nsec / 1e9
    return max((file_io.stat(os.path.join(root, name)).mtime_nsec / 1e9
                for root, _, names in file_io.walk(file_path)
                for name in names),
               default=0.)
  except errors.NotFoundError:
    return 0.
  except errors.OpError:
    return float("inf")  # Unknown: never stale.


def remove_stale_among(directory, listed, names, keep, state_file, lock):
  """Removes stale leftovers among the entries `listed` in `directory`.

  Args:
    directory: The directory.
    listed: Its entries.
    names: A regular expression matching the prefix names to look at.
    keep: Prefix names whose data files stay even without an index.
    state_file: The name of the state file, whose temporary copies are
      leftovers too; None for none.
    lock: The `DirectoryLock` this thread holds on `directory`.

  Returns:
    The entries left.
  """
  if lock.mode in (directory_lock.LockMode.SHARED, directory_lock.LockMode.BUSY,
                   directory_lock.LockMode.MISSING):
    return listed  # A save may be running there, or nothing is there.
  removed = set()
  now = time.time()
  for name, files in temporary_names.leftovers(listed, names, keep,
                                               state_file).items():
    paths = [os.path.join(directory, entry) for entry in files]
    if lock.mode is directory_lock.LockMode.UNLOCKED and (
        _being_saved(os.path.join(directory, name)) or
        max(map(_mtime, paths)) > now - REMOTE_STALE_AFTER_SECONDS):
      continue
    logging.info("Removing %s, left by an interrupted checkpoint save.",
                 ", ".join(paths))
    for path in paths:
      remove(path)
    removed.update(files)
  return [entry for entry in listed if entry not in removed]


def remove_stale(base, keep=(), state_file=None):
  """Removes stale leftovers of the saves of every `<base>-<n>`.

  Does nothing while a save runs in the directory (local paths).

  Args:
    base: The prefix the checkpoints are numbered from.
    keep: Names of prefixes listed by a state file: their data files stay.
    state_file: The name of the state file in the directory, whose
      temporary files are leftovers too; None for none.
  """
  base = local_paths.as_path(base)
  if base is None:
    return
  directory, name = os.path.split(base)
  with directory_lock.holding(directory, exclusive=True,
                              wait=False) as (lock, _):
    listed = scan(directory)
    if listed is not None:
      remove_stale_among(directory, listed,
                         re.escape(name) + r"-\d+", set(keep), state_file, lock)
