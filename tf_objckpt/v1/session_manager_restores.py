"""The v1 `Saver`'s restores of the checkpoint TensorFlow chose: they heal.

TensorFlow's `SessionManager` (behind `MonitoredTrainingSession`,
`Scaffold`'s savers and `Supervisor`) reads a directory's state file and
calls `saver.restore(sess, newest)`, then `saver.recover_last_checkpoints(
listed)`. With our `Saver` (patched in, or given to a `Scaffold`), a
restore so chosen falls back past damaged checkpoints as
`CheckpointManager.restore_or_initialize()` does (`self_healing`): the
state file's checkpoints newest first, then the directory's other
`<name>-<n>`, one WARNING per damaged one skipped; the restore that
succeeds assigns every variable of the saver, so nothing of a damaged one
stays. The damaged ones are then left out of the saver's kept list (their
files stay, until a save takes their name).

The choice is recognised by its caller: a restore of `save_path` made from
within `SessionManager._restore_checkpoint` (its code object, found on the
stack) that read `save_path` as the newest of the state file, and was not
given `checkpoint_filename_with_path`. Any other restore names its path: it
never falls back, and its damage error points at an intact checkpoint
(`named_restores`).
"""

import functools
import inspect
import os
import re
import weakref

from tensorflow.python.training import session_manager

from tf_objckpt.api import named_restores
from tf_objckpt.api import self_healing
from tf_objckpt.engine import state_file

# Frames between `Saver.restore` and `SessionManager._restore_checkpoint`:
# ours, then TensorFlow's `_restore_checkpoint_and_maybe_run_...`.
_FRAMES_SEARCHED = 4
# Damaged checkpoints each saver skipped, until its kept list is recovered.
_skipped: "weakref.WeakKeyDictionary[object, set]" = (
    weakref.WeakKeyDictionary())


def healing_when_chosen(restore):
  """Decorates `Saver.restore(self, sess, save_path)`; see the module."""

  @functools.wraps(restore)
  def restore_healing(saver, sess, save_path):
    state = _state_chosen_from(save_path)
    if state is None:
      with named_restores.pointing_to_intact(save_path):
        return restore(saver, sess, save_path)
    _, skipped = self_healing.restore_newest_intact(
        lambda candidate: restore(saver, sess, candidate), _candidates(state))
    _skipped[saver] = {state_file.comparable(path) for path in skipped}
    return None

  return restore_healing


def forgetting_skipped(recover_last_checkpoints):
  """Decorates `Saver.recover_last_checkpoints(self, checkpoint_paths)`.

  The checkpoints a healing restore skipped as damaged are left out.
  """

  @functools.wraps(recover_last_checkpoints)
  def recover_intact(saver, checkpoint_paths):
    skipped = _skipped.pop(saver, set())
    return recover_last_checkpoints(saver, [
        path for path in checkpoint_paths
        if state_file.comparable(path) not in skipped
    ])

  return recover_intact


def _state_chosen_from(save_path):
  """The `CheckpointState` TensorFlow chose `save_path` from, or None."""
  restore_checkpoint = session_manager.SessionManager._restore_checkpoint  # pylint: disable=protected-access
  frame = inspect.currentframe()
  for _ in range(2):  # Past this function and its caller.
    frame = frame.f_back if frame is not None else None
  for _ in range(_FRAMES_SEARCHED):
    if frame is None:
      return None
    if frame.f_code is restore_checkpoint.__code__:
      names = frame.f_locals
      state = names.get("ckpt")
      if (names.get("checkpoint_filename_with_path") or state is None or
          state.model_checkpoint_path != save_path):
        return None
      return state
    frame = frame.f_back
  return None


def _candidates(state):
  """The checkpoints to try, newest first: listed ones, then the others."""
  listed = list(
      dict.fromkeys([
          state.model_checkpoint_path,
          *reversed(state.all_model_checkpoint_paths)
      ]))
  yield from listed
  newest = state.model_checkpoint_path
  name = re.sub(r"-\d+$", "", os.path.basename(newest))
  yield from state_file.unlisted_checkpoints(os.path.dirname(newest), listed,
                                             name)
