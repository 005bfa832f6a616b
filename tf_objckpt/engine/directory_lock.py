"""Locks on a checkpoint directory: saves share one, cleanup takes it alone.

On local paths, every save holds a shared `flock` on its directory while it
writes, and leftovers of interrupted saves are removed only under an
exclusive one, taken without waiting. So nothing is removed while a save
runs in that directory, in this process or another; the next save that
finds the directory idle cleans up. The lock is on the directory itself,
so it adds no file. A thread that holds a directory's lock reuses it.

Elsewhere (`gs://`, `s3://`, `ram://`, ... or a local file system without
`flock`) there is no lock: `leftovers` decides by time what is stale.
Saves by TensorFlow's own classes take no lock: do not let them write the
same prefixes while tf_objckpt saves there.
"""

import contextlib
import enum
import os
import threading

try:
  import fcntl  # pylint: disable=g-import-not-at-top
except ImportError:  # Not on Unix: no locks, the time rule applies.
  fcntl = None  # type: ignore[assignment]

from tf_objckpt.engine import local_paths

_lock = threading.Lock()  # Guards `_held`.
# (thread, directory) -> the `DirectoryLock` that thread holds there.
_held: "dict[tuple[int, str], DirectoryLock]" = {}


class LockMode(enum.Enum):
  """What a `DirectoryLock` holds."""
  EXCLUSIVE = "exclusive"  # The directory's flock, alone.
  SHARED = "shared"  # The flock, shared with saves.
  UNLOCKED = "unlocked"  # No lock to take: the time rule decides staleness.
  MISSING = "missing"  # The directory cannot be opened: nothing to clean.
  BUSY = "busy"  # Exclusive wanted without waiting; others hold it.


class DirectoryLock:
  """This thread's `flock` on a local directory, or a stand-in for none.

  `mode` is a `LockMode`.
  """

  def __init__(self, directory):
    self.mode = LockMode.UNLOCKED
    self._fd = None
    local = local_paths.local_path(directory or ".")
    if local is None or fcntl is None:
      return
    try:
      self._fd = os.open(local or ".", os.O_RDONLY)
    except OSError:
      self.mode = LockMode.MISSING

  def lock(self, exclusive, wait):
    """Takes the lock; returns False if it is busy and `wait` is False."""
    if self._fd is None:
      return True
    flags = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    try:
      fcntl.flock(self._fd, flags if wait else flags | fcntl.LOCK_NB)
    except BlockingIOError:
      return False
    except OSError:  # No flock on this file system: the time rule applies.
      self.close()
      self.mode = LockMode.UNLOCKED
      return True
    self.mode = LockMode.EXCLUSIVE if exclusive else LockMode.SHARED
    return True

  def close(self):
    if self._fd is not None:
      os.close(self._fd)
      self._fd = None


@contextlib.contextmanager
def holding(directory, exclusive, wait):
  """Holds `directory`'s lock in this thread, or reuses the one it holds.

  Without `exclusive`, tries the exclusive lock first (without waiting) and
  settles for a shared one.

  Yields:
    The `DirectoryLock`, and whether this call took it (False if reused).
  """
  key = (threading.get_ident(), os.path.abspath(directory or "."))
  with _lock:
    held = _held.get(key)
  if held is not None:
    yield held, False
    return
  held = DirectoryLock(directory)
  try:
    if not held.lock(exclusive=True, wait=wait and exclusive):
      if exclusive:
        held.mode = LockMode.BUSY
      else:
        held.lock(exclusive=False, wait=True)
    with _lock:
      _held[key] = held
    try:
      yield held, True
    finally:
      with _lock:
        del _held[key]
  finally:
    held.close()


@contextlib.contextmanager
def exclusively(directory):
  """Holds `directory`'s exclusive lock (local paths), waiting for it.

  Saves of this process and others in the directory finish first, and none
  starts until the block ends; saves inside the block share the lock.
  """
  directory = local_paths.as_path(directory)
  if directory is None:
    yield
    return
  with holding(directory, exclusive=True, wait=True):
    yield
