"""Waiting for new checkpoints: TensorFlow's `checkpoints_iterator`, ours.

`wait_for_new_checkpoint` waits for one, `checkpoints_iterator` for each.

An evaluation job polls the directory a training job saves into.
TensorFlow's loop yields whatever the state file names once its `.index`
exists. Ours yields only intact checkpoints. A checkpoint the state file
names whose `.index` is not there yet is still being written (its files
have temporary names; TensorFlow's asynchronous manager names it first):
it is waited for, and if a newer one is named first, one WARNING says it
was skipped. Once its index is there, its save has finished (the data
files are renamed into place before the index), so one whose files are
missing, short or corrupt is damaged: `verify` decides
(`self_healing.damage`, which reads every value, as `restore_or_initialize`
decides; a missing or short data file is found from the index without
reading). A damaged checkpoint is skipped with one WARNING, in `verify`'s
words, naming the damage and the file, and the wait goes on. It is judged
again when its files change: a checkpoint saved again under the same
name, as by a job restarted from the one before, or whose copy into the
directory completes, is yielded once intact (a new save is warned about
again).

Timeouts, `timeout_fn` and `min_interval_secs` behave as in TensorFlow
2.21, whose iterator also asks `timeout_fn` after each checkpoint it
yields (2.15 and 2.16 ask only after a timeout).
"""

import hashlib
import time
import os
from typing import Callable, Iterator, Optional, Union

from tensorflow.python.framework import errors
from tensorflow.python.lib.io import file_io
from tensorflow.python.platform import tf_logging as logging

from tf_objckpt.api import self_healing
from tf_objckpt.engine import bundle_index
from tf_objckpt.engine import state_file


def _version(prefix):
  """What identifies one save of checkpoint `prefix`: a new save changes it.

  The index's bytes (which hold each value's checksum), and the size and
  modification time of each of its files.
  """
  index_file = bundle_index.index_file_name(prefix)
  stamps = []
  for path in [index_file, prefix
              ] + file_io.get_matching_files(prefix + ".data-*"):
    try:
      stat = file_io.stat(path)
    except errors.NotFoundError:
      continue
    stamps.append((path, stat.mtime_nsec, stat.length))
  content = b""
  if file_io.file_exists(index_file):
    content = file_io.read_file_to_string(index_file, binary_mode=True)
  return hashlib.sha256(content).digest(), tuple(sorted(stamps))


class _Watch:
  """Polls one directory; remembers what it judged and warned about."""

  def __init__(self, checkpoint_dir):
    self._directory = checkpoint_dir
    self._damaged = set()  # The `_version`s of damaged checkpoints.
    self._warned = set()  # (prefix, index digest) of the saves warned about.
    self._pending = None  # A checkpoint named before its index was there.

  def new_checkpoint(self, last_checkpoint) -> Optional[str]:
    """The state file's latest checkpoint, if new and intact."""
    state = state_file.get_checkpoint_state(self._directory)
    prefix = state.model_checkpoint_path if state else None
    self._warn_if_passed_over(prefix)
    if prefix is None or prefix == last_checkpoint:
      return None
    if not state_file.checkpoint_exists_internal(prefix):
      # Still being written (TensorFlow's asynchronous manager names a
      # checkpoint first): its files have temporary names.
      self._pending = prefix
      return None
    self._pending = None
    version = _version(prefix)
    if version in self._damaged:
      return None
    problems = self_healing.file_damage(prefix) or self_healing.damage(prefix)
    if not problems:
      return prefix
    self._damaged.add(version)
    if (prefix, version[0]) not in self._warned:
      self._warned.add((prefix, version[0]))
      logging.warning("Skipped damaged checkpoint %s: %s", prefix,
                      self_healing.summary(problems))
    return None

  def _warn_if_passed_over(self, latest):
    """Warns once about a checkpoint without an index the state file left."""
    if self._pending is not None and latest not in (None, self._pending):
      prefix, self._pending = self._pending, None
      logging.warning(
          "Skipped checkpoint %s: its index file %r was not there when a "
          "newer checkpoint was named.", prefix,
          bundle_index.index_file_name(prefix))

  def wait(self, last_checkpoint, seconds_to_sleep, timeout):
    """The next new checkpoint, polling every `seconds_to_sleep`, or None.

    None once waiting longer would pass `timeout` seconds (None: never).
    """
    logging.info("Waiting for new checkpoint at %s", self._directory)
    stop_time = time.time() + timeout if timeout is not None else None
    while True:
      save_path = self.new_checkpoint(last_checkpoint)
      if save_path is not None:
        logging.info("Found new checkpoint at %s", save_path)
        return save_path
      if stop_time is not None and time.time() + seconds_to_sleep > stop_time:
        return None
      time.sleep(seconds_to_sleep)


def wait_for_new_checkpoint(checkpoint_dir: Union[str, os.PathLike],
                            last_checkpoint: Optional[str] = None,
                            seconds_to_sleep: float = 1,
                            timeout: Optional[float] = None) -> Optional[str]:
  """Waits for a finished, intact checkpoint other than `last_checkpoint`.

  Args:
    checkpoint_dir: The directory checkpoints are saved in.
    last_checkpoint: The checkpoint used last, or None.
    seconds_to_sleep: Seconds between polls.
    timeout: Seconds to wait at most; None waits for ever.

  Returns:
    The new checkpoint's prefix, or None if the timeout was reached.
  """
  return _Watch(checkpoint_dir).wait(last_checkpoint, seconds_to_sleep, timeout)


def checkpoints_iterator(
    checkpoint_dir: Union[str, os.PathLike],
    min_interval_secs: float = 0,
    timeout: Optional[float] = None,
    timeout_fn: Optional[Callable[[], bool]] = None) -> Iterator[str]:
  """Yields each new finished, intact checkpoint of `checkpoint_dir`.

  Args:
    checkpoint_dir: The directory checkpoints are saved in.
    min_interval_secs: Seconds at least between two yields.
    timeout: Seconds to wait at most for each new checkpoint; None waits
      for ever.
    timeout_fn: Called after a timeout, and after each checkpoint yielded
      (as in TensorFlow 2.21): the iterator ends when it returns True.
      Without it, a timeout ends the iterator.

  Yields:
    Checkpoint prefixes, as they arrive.
  """
  watch = _Watch(checkpoint_dir)
  save_path = None
  while True:
    new_save_path = watch.wait(save_path, 1, timeout)
    if new_save_path is not None:
      start = time.time()
      save_path = new_save_path
      yield save_path
      time_to_next = start + min_interval_secs - time.time()
      if time_to_next > 0:
        time.sleep(time_to_next)
    elif timeout_fn is None:
      logging.info("Timed-out waiting for a checkpoint (without timeout_fn).")
      return
    if timeout_fn is not None and timeout_fn():
      logging.info("Done. No new checkpoints will be generated.")
      return
