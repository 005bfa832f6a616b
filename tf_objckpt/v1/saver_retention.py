"""Which checkpoints the v1 `Saver` keeps, and its record of them.

A mixin of `Saver`, as TensorFlow's does it: the `max_to_keep` most recent
checkpoints are kept (plus one every `keep_checkpoint_every_n_hours`), the
oldest of the others is deleted with its meta graph at each save, and the
kept ones are recorded in the directory's state file. After a restart,
`recover_last_checkpoints` takes the list back. The method names with
capitals are TensorFlow's, which its tests call.
"""

import math
import time

from tensorflow.python.framework import errors
from tensorflow.python.platform import tf_logging as logging

from tf_objckpt.engine import state_file
from tf_objckpt.v1 import session_manager_restores


class SaverRetention:
  """The kept checkpoints of a v1 `Saver`, a mixin of it.

  The saver holds the state: `saver_def` (`max_to_keep`,
  `keep_checkpoint_every_n_hours`), `_last_checkpoints` (kept, as
  `(prefix, timestamp)` oldest first), `_checkpoints_to_be_deleted`,
  `_next_checkpoint_time` and `_save_relative_paths`.
  """

  def _CheckpointFilename(self, p):
    """The checkpoint prefix of a `(prefix, timestamp)` pair."""
    return p[0]

  def _RecordLastCheckpoint(self, latest_save_path):
    """Appends a checkpoint to the kept list, queueing the oldest excess."""
    keep = self.saver_def.max_to_keep
    if not keep:
      return
    # Updated in place: a list given to `set_last_checkpoints_with_time`
    # stays this saver's list, as in TensorFlow.
    kept = self._last_checkpoints
    kept[:] = [
        p for p in kept if self._CheckpointFilename(p) != latest_save_path
    ]
    kept.append((latest_save_path, time.time()))
    if len(kept) > keep:
      self._checkpoints_to_be_deleted.append(kept.pop(0))

  def _MaybeDeleteOldCheckpoints(self, meta_graph_suffix="meta"):
    """Deletes the oldest queued checkpoint unless it is an hourly keeper.

    A checkpoint newer than the next keep time survives (and moves the keep
    time on by `keep_checkpoint_every_n_hours`); others are removed with
    their meta graph.
    """
    if not self._checkpoints_to_be_deleted:
      return
    path, timestamp = self._checkpoints_to_be_deleted.pop(0)
    if timestamp > self._next_checkpoint_time:
      hours = self.saver_def.keep_checkpoint_every_n_hours
      self._next_checkpoint_time += 3600 * hours
      return
    try:
      state_file.remove_checkpoint_files(path, self.saver_def.version,
                                         meta_graph_suffix)
    except Exception as e:  # pylint: disable=broad-except  # Best effort.
      logging.warning("Ignoring: %s", e)

  @property
  def last_checkpoints(self):
    """The checkpoints this saver still keeps, oldest first."""
    return [self._CheckpointFilename(p) for p in self._last_checkpoints]

  def set_last_checkpoints(self, last_checkpoints):
    """Deprecated: sets the kept checkpoints (never deleted by age).

    Raises:
      AssertionError: if `last_checkpoints` is not a list.
    """
    _require_list(last_checkpoints, "set_last_checkpoints")
    # An infinite timestamp makes them hourly keepers: never deleted.
    self._last_checkpoints = [(path, math.inf) for path in last_checkpoints]

  def set_last_checkpoints_with_time(self, last_checkpoints_with_time):
    """Sets the kept checkpoints as `(prefix, timestamp)` pairs.

    Raises:
      AssertionError: if the argument is not a list.
    """
    stamped = last_checkpoints_with_time
    _require_list(stamped, "set_last_checkpoints_with_time")
    # Kept, not copied: later saves update the caller's list (as TF does).
    self._last_checkpoints = stamped

  @session_manager_restores.forgetting_skipped
  def recover_last_checkpoints(self, checkpoint_paths):
    """Restores the kept-checkpoint list after a restart.

    Paths whose files still exist are kept, timestamped by their mtime.
    """
    kept = []
    for path in checkpoint_paths:
      try:
        mtimes = state_file.checkpoint_mtimes([path])
      except errors.NotFoundError:
        continue  # Deleted meanwhile by someone else.
      if mtimes:
        kept.append((path, mtimes[0]))
    self.set_last_checkpoints_with_time(kept)

  def _record_and_delete(self, saved, save, save_dir, latest_filename,
                         meta_graph_suffix):
    """Step 4 of a save: records `saved`, then deletes the oldest one."""
    self._record_state(saved, save_dir, latest_filename)
    save.keep()
    self._MaybeDeleteOldCheckpoints(meta_graph_suffix)

  def _record_state(self, saved, save_dir, latest_filename):
    """Lists `saved` as the latest checkpoint, in memory and in the file.

    If the state file cannot be written, the kept list is left as it was.
    """
    kept = list(self._last_checkpoints)
    queued = list(self._checkpoints_to_be_deleted)
    self._RecordLastCheckpoint(saved)
    try:
      state_file.update_checkpoint_state_internal(
          save_dir=save_dir,
          model_checkpoint_path=saved,
          all_model_checkpoint_paths=self.last_checkpoints,
          latest_filename=latest_filename,
          save_relative_paths=self._save_relative_paths)
    except BaseException:
      self._last_checkpoints[:] = kept
      self._checkpoints_to_be_deleted[:] = queued
      raise


def _require_list(value, method):
  """Raises AssertionError, as TensorFlow's Saver does, unless `value` is a list."""
  if not isinstance(value, list):
    raise AssertionError(
        f"Saver.{method} takes a list of checkpoint paths, not {value!r}.")
