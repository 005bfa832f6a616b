"""`MonitoredTrainingSession` restarts from the newest intact checkpoint.

TensorFlow's `SessionManager`, behind `MonitoredTrainingSession` and
`Scaffold`, reads the state file and restores the newest checkpoint with
the session's `Saver`. A training run saves `model.ckpt-0` to `-3`; real
damage then hits the newest one, two, or all four, and the run restarts on
the directory. With our `Saver` (TensorFlow patched, or given to the
`Scaffold` unpatched) the restart resumes from the newest intact
checkpoint, one WARNING per damaged one skipped, and the damaged ones leave
the state file; with all damaged it raises the newest one's error.
TensorFlow's `Saver` stops on the damaged newest one, on every restart. A
checkpoint named by `checkpoint_filename_with_path` never falls back: its
error names the intact checkpoint the state file lists.

Covers: tf_objckpt.v1.session_manager_restores, tf_objckpt.saver,
tf_objckpt.tools.patching, tf_objckpt.v1.name_based_saver.
"""

import contextlib
import logging
import os

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl

_SIZE = 64
_SKIPPED = "Skipped damaged checkpoint"
_WORDS = {
    "truncated": "data file is truncated",
    "flipped": "weight: cannot be read: DataLossError",
    "no_index": "index file is missing"
}


def _scaffold(saver_of):
  if saver_of == "ours":  # Unpatched, our Saver given to the Scaffold.
    return tf.compat.v1.train.Scaffold(
        saver=tl.IMPLS["ours"].Saver(sharded=True, max_to_keep=5))
  return tf.compat.v1.train.Scaffold()


def _train(directory, steps, saver_of, size=_SIZE, **session_args):
  """Trains `steps` steps, saving each.

  Returns:
    The step and weight it began with, and the names of the checkpoints
    the state file lists at the end.
  """
  with tf.Graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    weight = tf.compat.v1.get_variable("weight",
                                       initializer=np.zeros([size], np.float32))
    train_op = tf.group(weight.assign_add(tf.ones([size])),
                        global_step.assign_add(1))
    with tf.compat.v1.train.MonitoredTrainingSession(
        checkpoint_dir=session_args.pop("checkpoint_dir", directory),
        scaffold=_scaffold(saver_of),
        save_checkpoint_steps=1,
        save_summaries_steps=None,
        save_summaries_secs=None,
        log_step_count_steps=None,
        **session_args) as session:
      began = session.run([global_step, weight])
      for _ in range(steps):
        session.run(train_op)
  state = tf.train.get_checkpoint_state(directory)
  return began, [
      os.path.basename(path) for path in state.all_model_checkpoint_paths
  ]


@pytest.fixture(name="trained")
def _trained(tmp_path):
  """`model.ckpt-0` .. `-3`, saved by TensorFlow's own session and Saver."""
  directory = str(tmp_path / "train")
  _, listed = _train(directory, 3, "tf")
  assert listed == [f"model.ckpt-{step}" for step in range(4)]
  return directory


def _damage_newest(directory, count, how):
  for step in range(3, 3 - count, -1):
    tl.damage(os.path.join(directory, f"model.ckpt-{step}"), how, "weight")


def _restart(directory, saver_of, **train_args):
  """Restarts on `directory`.

  Returns:
    (step, weight, listed) as `_train` returns them, or the error raised;
    and the skip warnings logged.
  """
  patched = (tl.tensorflow_patched()
             if saver_of == "patched" else contextlib.nullcontext())
  with patched, tl.captured_logs(logging.WARNING) as messages:
    try:
      (step, weight), listed = _train(directory, 0, saver_of, **train_args)
      result = (step, weight, listed)
    except (tf.errors.OpError, ValueError) as e:
      result = e
  return result, [m for m in messages if m.startswith(_SKIPPED)]


@pytest.mark.parametrize("how", sorted(_WORDS))
@pytest.mark.parametrize("count", [1, 2])
@pytest.mark.parametrize("saver_of", ["patched", "ours"])
def test_restart_resumes_from_the_newest_intact_checkpoint(
    trained, how, count, saver_of):
  _damage_newest(trained, count, how)
  (step, weight, listed), warnings = _restart(trained, saver_of)
  newest_intact = 3 - count
  assert step == newest_intact
  np.testing.assert_array_equal(weight, newest_intact)
  assert len(warnings) == count, warnings
  for warning, damaged in zip(warnings, (3, 2)):
    path = os.path.join(trained, f"model.ckpt-{damaged}")
    assert warning.startswith(f"{_SKIPPED} {path}: error: "), warning
    assert _WORDS[how] in warning, warning
  # The restarted session saved at its step; the damaged ones are gone
  # from the state file, and their files stay, but for data files without
  # an index, which the save removed as leftovers.
  assert listed == [f"model.ckpt-{step}" for step in range(newest_intact + 1)]
  assert os.path.exists(
      os.path.join(trained,
                   "model.ckpt-3.data-00000-of-00001")) == (how != "no_index")


def test_tensorflows_saver_stops_on_the_damaged_newest(trained):
  _damage_newest(trained, 1, "flipped")
  for _ in range(2):  # On every restart.
    result, warnings = _restart(trained, "tf")
    assert isinstance(result, tf.errors.DataLossError), result
    assert not warnings


@pytest.mark.parametrize("saver_of", ["patched", "ours"])
def test_all_damaged_raises_the_newest_error(trained, saver_of):
  for step in range(4):
    tl.damage(os.path.join(trained, f"model.ckpt-{step}"), "truncated")
  result, warnings = _restart(trained, saver_of)
  assert isinstance(result, tf.errors.DataLossError), result
  assert "model.ckpt-3" in str(result)
  assert len(warnings) == 4


@pytest.mark.parametrize("saver_of", ["patched", "ours"])
def test_a_shape_mismatch_is_raised_at_once(trained, saver_of):
  """Not damage: older checkpoints would fail the same way."""
  result, warnings = _restart(trained, saver_of, size=_SIZE + 1)
  assert isinstance(result,
                    (tf.errors.InvalidArgumentError, ValueError)), (result)
  assert "model.ckpt-3" in str(result)
  assert not warnings


def _restore_named(path, saver_of):
  """A `MonitoredSession` whose `ChiefSessionCreator` restores `path`."""
  with tf.Graph().as_default():
    tf.compat.v1.train.get_or_create_global_step()
    tf.compat.v1.get_variable("weight",
                              initializer=np.zeros([_SIZE], np.float32))
    creator = tf.compat.v1.train.ChiefSessionCreator(
        scaffold=_scaffold(saver_of), checkpoint_filename_with_path=path)
    with tf.compat.v1.train.MonitoredSession(session_creator=creator):
      pass


@pytest.mark.parametrize("saver_of", ["patched", "ours"])
def test_a_named_checkpoint_never_falls_back(trained, saver_of):
  _damage_newest(trained, 1, "truncated")
  named = os.path.join(trained, "model.ckpt-3")
  patched = (tl.tensorflow_patched()
             if saver_of == "patched" else contextlib.nullcontext())
  with patched, tl.captured_logs(logging.WARNING) as messages:
    error = tl.outcome(_restore_named, named, saver_of).error
  assert isinstance(error, tf.errors.DataLossError), error
  assert not [m for m in messages if m.startswith(_SKIPPED)]
  older = os.path.join(trained, "model.ckpt-2")
  assert (f"The state file of {trained!r} lists an older intact checkpoint, "
          f"{older!r}: CheckpointManager.restore_or_initialize() would have "
          "restored it") in str(error)
