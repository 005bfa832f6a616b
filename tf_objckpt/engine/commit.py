"""Commits saves: undoes failed ones and removes what interrupted ones left.

A save of prefix P writes its files under temporary names and renames them
into place: `P.data-*.tempstate<n>` and `P.index.tempstate<n>` (or, for a
sharded save, shards in the directory `P_temp` that `MergeV2Checkpoints`
moves), the index last, and the `checkpoint` state file after that. A save
that is killed leaves some of these behind; one that fails leaves them too,
or a complete checkpoint the state file never lists.

`saving(P)` wraps a whole save, state file included: a save transaction
(`api.save_transaction`) enters it once, around its write, commit and
record steps.

- When the save fails, for any reason, every file of P that it created is
  removed and the error is re-raised. Files of P that existed before stay,
  and so does the state file (it is replaced atomically, or not at all).
  The save is kept, and not undone, once `Save.keep()` is called (its
  record step calls it when the state file lists the checkpoint).
- Before it writes, it removes the stale leftovers of interrupted saves of
  P and, given `base`, of every other `<base>-<n>`: temporary files,
  `_temp` directories, and data files of a prefix without an index (the
  index is written last) that the caller does not list in `keep`. A
  checkpoint with an index is never removed.

A leftover is stale when no save of tf_objckpt is still writing it:

- On local paths, every save holds a shared `flock` on its directory while
  it writes, and leftovers are removed only under an exclusive one, taken
  without waiting. So nothing is removed while a save runs in that
  directory, in this process or another; the next save that finds the
  directory idle cleans up. The lock is on the directory itself, so it adds
  no file.
- Elsewhere (`gs://`, `s3://`, `ram://`, ... or a local file system without
  `flock`), leftovers are stale when this process is not saving that prefix
  and their newest file is more than `REMOTE_STALE_AFTER_SECONDS` old by its
  modification time. File systems that report no modification time (as
  `ram://`, which lives in this process) make them stale at once.

Saves by TensorFlow's own classes take no lock: do not let them write the
same prefixes while tf_objckpt saves there.

A save that fails with TensorFlow's error keeps its type; its message
starts with the checkpoint and, when the file system shows one, the reason
(`Cannot save checkpoint '<prefix>': directory '<dir>' is not writable.`),
then TensorFlow's own.

Durable saves (`durable=True`) fsync the checkpoint's files and its
directory before the save commits, through `os`: TensorFlow's file layer
cannot fsync, so they work on local paths only.
"""

import collections
import contextlib
import copy
import os
import re
import threading
import time

try:
  import fcntl  # pylint: disable=g-import-not-at-top
except ImportError:  # Not on Unix: no locks, the time rule applies.
  fcntl = None

from tensorflow.python.eager import context
from tensorflow.python.framework import errors
from tensorflow.python.framework import ops
from tensorflow.python.lib.io import file_io
from tensorflow.python.platform import tf_logging as logging

# Shards of a save are written to `<prefix>_temp/part-...` before the merge.
TEMP_DIR_SUFFIX = "_temp"
# Leftovers on file systems without locks are removed once this old.
REMOTE_STALE_AFTER_SECONDS = 3600.

_SHARD = r"-\d{5}-of-\d{5}"
_DATA = rf"\.data{_SHARD}"
_TEMPSTATE = r"\.tempstate\d+"
# What follows a prefix in the names of an unfinished save's files: SaveV2's
# and SaveSlices' temporary files (V1's for the bare prefix, hence ""),
# the shards' directory, and the shards S3 saves write beside the prefix.
_PARTIAL = (rf"(?:\.index|{_DATA}|{_SHARD}|){_TEMPSTATE}"
            rf"|{TEMP_DIR_SUFFIX}"
            rf"|\.part{_SHARD}\.(?:index|data{_SHARD})(?:{_TEMPSTATE})?")
# ... and of a finished one: V2's index and data files, V1's files.
_FINAL = rf"\.index|{_DATA}|{_SHARD}|"
# The temporary copy of a file written atomically by TensorFlow's file layer
# (a meta graph), which stays behind when the write fails.
_TEMPORARY_COPY = r"\.tmp[0-9a-f]{32}"

_lock = threading.Lock()  # Guards `_held` and `_saving`.
# (thread, directory) -> the `_DirectoryLock` that thread holds there.
_held = {}
# How many saves of each prefix this process runs: never stale.
_saving = collections.Counter()


class Save:
  """One save in progress: whether it is kept, and how to sync it."""

  def __init__(self, prefix=None, directory=None, name=None):
    self.prefix = prefix
    self.kept = False
    self.directory = directory
    self.name = name

  def keep(self):
    """Marks the save as listed: a later failure no longer undoes it."""
    self.kept = True

  def sync(self):
    """Flushes the checkpoint's files and directory to disk (fsync)."""
    if self.prefix is None:
      return
    local = _local_path(self.prefix)
    if local is None:
      raise _not_durable(self.prefix)
    finished = re.compile(rf"{re.escape(self.name)}(?:{_FINAL})")
    for entry in _entries(self.directory):
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


def check_durable(prefix):
  """Raises unless saves to `prefix` can be made durable (local paths).

  Raises:
    UnimplementedError: For paths of other file systems, and prefixes only
      known when ops run (tensors inside a `tf.function`).
  """
  path = _as_path(prefix)
  if path is None or _local_path(path) is None:
    raise _not_durable(prefix)


def _not_durable(path):
  return errors.UnimplementedError(
      None, None,
      f"Durable saves are unavailable for {path!r}: TensorFlow's file "
      "system layer cannot flush files to disk (fsync), so durable=True "
      "works on local paths only.")


def _local_path(path):
  """`path` as an `os` path if it is on a local file system, else None."""
  if path.startswith("file://"):
    return path[len("file://"):]
  if "://" in path:
    return None
  return path


def _as_path(prefix):
  """A prefix as a string, or None if it is only known when ops run."""
  if isinstance(prefix, os.PathLike):
    prefix = os.fspath(prefix)
  if isinstance(prefix, bytes):
    prefix = prefix.decode()
  if isinstance(prefix, str):
    if not context.executing_eagerly() and ops.inside_function():
      return None  # Written when the function runs, not now.
    return prefix
  if context.executing_eagerly() and hasattr(prefix, "numpy"):
    return _as_path(prefix.numpy())
  return None


# ----------------------------------------------------------------------------
# Directory locks.
# ----------------------------------------------------------------------------


class _DirectoryLock:
  """This thread's `flock` on a local directory, or a stand-in for none.

  `mode` is "exclusive" or "shared" for a real lock, "unlocked" where there
  is no lock to take (the time rule decides what is stale) and "missing"
  when the directory cannot be opened (there is nothing to clean).
  """

  def __init__(self, directory):
    self.mode = "unlocked"
    self._fd = None
    local = _local_path(directory or ".")
    if local is None or fcntl is None:
      return
    try:
      self._fd = os.open(local or ".", os.O_RDONLY)
    except OSError:
      self.mode = "missing"

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
      self.mode = "unlocked"
      return True
    self.mode = "exclusive" if exclusive else "shared"
    return True

  def close(self):
    if self._fd is not None:
      os.close(self._fd)
      self._fd = None


@contextlib.contextmanager
def _holding(directory, exclusive, wait):
  """Holds `directory`'s lock in this thread, or reuses the one it holds.

  Without `exclusive`, tries the exclusive lock first (without waiting) and
  settles for a shared one.
  """
  key = (threading.get_ident(), os.path.abspath(directory or "."))
  with _lock:
    held = _held.get(key)
  if held is not None:
    yield held, False
    return
  held = _DirectoryLock(directory)
  try:
    if not held.lock(exclusive=True, wait=wait and exclusive):
      if exclusive:
        held.mode = "busy"
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
  directory = _as_path(directory)
  if directory is None:
    yield
    return
  with _holding(directory, exclusive=True, wait=True):
    yield


# ----------------------------------------------------------------------------
# Finding and removing leftovers.
# ----------------------------------------------------------------------------


def _entries(directory):
  """The names in `directory` (none if it does not exist)."""
  try:
    return [entry.rstrip("/")
            for entry in file_io.list_directory(directory or ".")]
  except errors.NotFoundError:
    return []


def _scan(directory):
  """The names in `directory`, or None if it cannot be listed."""
  try:
    return _entries(directory)
  except errors.OpError as e:
    logging.warning("Could not list %s to find the files of failed or "
                    "interrupted checkpoint saves: %s", directory, e)
    return None


def _remove(path):
  """Removes a file or directory; a failure is logged, never raised."""
  try:
    if file_io.is_directory(path):
      file_io.delete_recursively(path)
    else:
      file_io.delete_file(path)
  except errors.NotFoundError:
    pass
  except errors.OpError as e:
    logging.warning("Could not remove %s, left by a failed or interrupted "
                    "checkpoint save: %s", path, e)


def _mtime(path):
  """The newest modification time (seconds) of a file or directory tree."""
  try:
    if not file_io.is_directory(path):
      return file_io.stat(path).mtime_nsec / 1e9
    return max((file_io.stat(os.path.join(root, name)).mtime_nsec / 1e9
                for root, _, names in file_io.walk(path) for name in names),
               default=0.)
  except errors.NotFoundError:
    return 0.
  except errors.OpError:
    return float("inf")  # Unknown: never stale.


def _being_saved(prefix):
  with _lock:
    return _saving[prefix] > 0


def _leftovers(entries, names, keep, state_file):
  """`{prefix name: [entries]}` of unfinished saves among `entries`.

  Args:
    entries: Names in a directory.
    names: A regular expression matching the prefix names to look at.
    keep: Prefix names whose data files stay even without an index.
    state_file: The name of the state file whose temporary files (written
      before it is replaced) count as leftovers, or None.
  """
  pattern = re.compile(rf"(?P<name>{names})(?:(?P<partial>{_PARTIAL})|"
                       rf"(?P<data>{_DATA})|(?P<index>\.index))")
  state_temp = state_file and re.compile(
      re.escape(state_file) + r"\.tmp[0-9a-f]{32}")
  partial, data, indexed = {}, {}, set()
  for entry in entries:
    if state_temp and state_temp.fullmatch(entry):
      partial[entry] = [entry]
      continue
    match = pattern.fullmatch(entry)
    if match is None:
      continue
    name = match.group("name")
    if match.group("partial"):
      partial.setdefault(name, []).append(entry)
    elif match.group("data"):
      data.setdefault(name, []).append(entry)
    else:
      indexed.add(name)
  for name, files in data.items():
    if name not in indexed and name not in keep:
      partial.setdefault(name, []).extend(files)
  return partial


def _remove_stale(directory, entries, names, keep, state_file, lock):
  """Removes stale leftovers among `entries`; returns the entries left."""
  if lock.mode in ("shared", "busy", "missing"):
    return entries  # A save may be running there, or nothing is there.
  removed = set()
  now = time.time()
  for name, files in _leftovers(entries, names, keep, state_file).items():
    paths = [os.path.join(directory, entry) for entry in files]
    if lock.mode == "unlocked" and (
        _being_saved(os.path.join(directory, name)) or
        max(map(_mtime, paths)) > now - REMOTE_STALE_AFTER_SECONDS):
      continue
    logging.info("Removing %s, left by an interrupted checkpoint save.",
                 ", ".join(paths))
    for path in paths:
      _remove(path)
    removed.update(files)
  return [entry for entry in entries if entry not in removed]


def _names(name, base, directory):
  """A regular expression for `name` and the prefixes numbered from `base`."""
  names = re.escape(name)
  if base is not None:
    base_directory, base_name = os.path.split(base)
    if base_directory == directory:
      names += "|" + re.escape(base_name) + r"-\d+"
  return names


def remove_stale(base, keep=(), state_file=None):
  """Removes stale leftovers of the saves of every `<base>-<n>`.

  Does nothing while a save runs in the directory (local paths).

  Args:
    base: The prefix the checkpoints are numbered from.
    keep: Names of prefixes listed by a state file: their data files stay.
    state_file: The name of the state file in the directory, whose
      temporary files are leftovers too; None for none.
  """
  base = _as_path(base)
  if base is None:
    return
  directory, name = os.path.split(base)
  with _holding(directory, exclusive=True, wait=False) as (lock, _):
    entries = _scan(directory)
    if entries is not None:
      _remove_stale(directory, entries, re.escape(name) + r"-\d+",
                    set(keep), state_file, lock)


@contextlib.contextmanager
def saving(prefix, base=None, keep=(), extra_files=(), state_file=None,
           make_directory=False):
  """Runs a save of `prefix`: cleans up before, undoes it if it fails.

  Args:
    prefix: The checkpoint prefix being written. Tensors (whose value is
      known only when ops run) are not managed.
    base: The prefix `prefix` was numbered from (`<base>-<n>`), if any: the
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
  make_directory = make_directory and isinstance(prefix,
                                                (str, bytes, os.PathLike))
  prefix = _as_path(prefix)
  if prefix is None:
    yield Save()
    return
  directory, name = os.path.split(prefix)
  save = Save(prefix, directory, name)
  with explaining_failures(prefix, state_file):
    if make_directory and directory:
      file_io.recursive_create_dir(directory)
    with _undoing_failures(save, base, keep, extra_files, state_file):
      yield save


@contextlib.contextmanager
def _undoing_failures(save, base, keep, extra_files, state_file):
  """Cleans up before `save`; removes what it wrote if it fails."""
  directory, name = save.directory, save.name
  with _holding(directory, exclusive=False, wait=False) as (lock, acquired):
    entries = _scan(directory)
    before = None  # Unknown: a failure removes temporary files only.
    if entries is not None:
      entries = _remove_stale(directory, entries,
                              _names(name, base, directory), set(keep),
                              state_file, lock)
      before = set(entries) | {path for path in extra_files
                               if file_io.file_exists(path)}
    if acquired and lock.mode == "exclusive":
      lock.lock(exclusive=False, wait=True)  # Let other saves run beside.
    with _lock:
      _saving[save.prefix] += 1
    try:
      yield save
    except BaseException:
      if not save.kept:
        _undo(directory, name, before, extra_files)
      raise
    finally:
      with _lock:
        _saving[save.prefix] -= 1
        if not _saving[save.prefix]:
          del _saving[save.prefix]


def _undo(directory, name, before, extra_files):
  """Removes the files of a failed save of `name` that were not `before`.

  Temporary files go in any case (those of `extra_files` too); with
  `before` None (unknown), only they.
  """
  own = re.compile(rf"{re.escape(name)}(?:(?P<partial>{_PARTIAL})|{_FINAL})")
  for entry in _scan(directory) or ():
    match = own.fullmatch(entry)
    if match and (match.group("partial") or
                  (before is not None and entry not in before)):
      _remove(os.path.join(directory, entry))
  for path in extra_files:
    if before is not None and path not in before:
      _remove(path)
    extra_directory, extra_name = os.path.split(path)
    temporary = re.compile(rf"{re.escape(extra_name)}{_TEMPORARY_COPY}")
    for entry in _scan(extra_directory) or ():
      if temporary.fullmatch(entry):
        _remove(os.path.join(extra_directory, entry))


# ----------------------------------------------------------------------------
# Explaining failed saves.
# ----------------------------------------------------------------------------

# Reasons an error's message gives (the C library's texts), in user terms.
_REASONS_BY_TEXT = (
    ("No space left on device", "no space is left on the device holding {}"),
    ("File too large", "a file in {} would outgrow this process's file size "
     "limit"),
)


@contextlib.contextmanager
def explaining_failures(prefix, state_file=None):
  """Leads the message of a TensorFlow error raised inside by the reason.

  The error keeps its type; its message becomes `Cannot save checkpoint
  '<prefix>': <reason>.` (the reason when one is found) and TensorFlow's.

  Args:
    prefix: The checkpoint being written.
    state_file: The name of the state file the save updates, if any.

  Yields:
    Nothing.
  """
  try:
    yield
  except errors.OpError as error:
    explained = _explained(error, prefix, state_file)
    if explained is error:
      raise
    raise explained.with_traceback(error.__traceback__) from None


def _explained(error, prefix, state_file):
  """A copy of `error` whose message names the checkpoint and the reason."""
  lead = f"Cannot save checkpoint {prefix!r}"
  if error.message.startswith(lead):
    return error  # Explained by an enclosing save already.
  reason = _reason(error, prefix, state_file)
  explained = copy.copy(error)
  explained._message = (  # pylint: disable=protected-access
      f"{lead}: {reason}.\n{error.message}" if reason else
      f"{lead}.\n{error.message}")
  return explained


def _reason(error, prefix, state_file):
  """Why a save of `prefix` failed, as the file system shows it, or None."""
  directory = os.path.dirname(prefix) or "."
  local = _local_path(directory)
  if local is not None:
    existing = _deepest_existing(local)
    if existing == os.path.abspath(local):
      existing = directory  # As the caller wrote it.
    if not os.path.isdir(existing):
      return f"{existing!r} is a file, not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
      return f"directory {existing!r} is not writable"
  if not _is_directory(directory):
    return f"directory {directory!r} does not exist"
  for text, reason in _REASONS_BY_TEXT:
    if text in error.message:
      return reason.format(f"directory {directory!r}")
  for path in (prefix + ".index",
               state_file and os.path.join(directory, state_file)):
    if path and _is_directory(path):
      return f"{path!r} is a directory, where the save writes a file"
  return None


def _deepest_existing(local):
  """`local` as an absolute path, or its deepest parent that exists."""
  path = os.path.abspath(local)
  while not os.path.lexists(path):
    path = os.path.dirname(path)
  return path


def _is_directory(path):
  try:
    return file_io.is_directory(path)
  except errors.OpError:
    return False
