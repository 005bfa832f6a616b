"""TensorFlow's and tf_keras's own checkpointing, through ours when patched.

Unchanged TensorFlow and tf_keras code (`MonitoredTrainingSession`,
`Model.save_weights`/`load_weights`, `ModelCheckpoint`, `BackupAndRestore`,
`PreemptionCheckpointHandler` in a script run by `python -m tf_objckpt
run`) saves and restores with `patch_tensorflow()` on. Each test shows that
our code did the work (our classes, our transfer log's "Saved checkpoint"
lines) and that TensorFlow, unpatched, reads what was written.

Covers: tf_objckpt.tools.patching, tf_objckpt.api.load_status,
tf_objckpt.checkpoint_management, tf_objckpt.saver,
tf_objckpt.api.checkpoint_manager, tf_objckpt.v1.name_based_saver.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import testlib as tl
import tf_objckpt
from tf_objckpt.api import load_status


def _saved_paths(messages):
  """The checkpoints our transfer log says were saved."""
  prefix = "Saved checkpoint "
  return [
      m[len(prefix):].split(": ")[0] for m in messages if m.startswith(prefix)
  ]


def _assert_weights_equal(expected, actual):
  for expected_value, actual_value in zip(expected.get_weights(),
                                          actual.get_weights(),
                                          strict=True):
    np.testing.assert_array_equal(expected_value, actual_value)


# ----------------------------------------------------------------------------
# MonitoredTrainingSession: Scaffold's Saver and CheckpointSaverHook.
# ----------------------------------------------------------------------------


def _train_monitored(directory, steps):
  """Trains `steps` steps, saving every 2; returns (first step, saver)."""
  with tf.Graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    weight = tf.compat.v1.get_variable("weight", initializer=0.)
    train_op = tf.group(weight.assign_add(1.), global_step.assign_add(1))
    scaffold = tf.compat.v1.train.Scaffold()
    with tf.compat.v1.train.MonitoredTrainingSession(
        checkpoint_dir=directory,
        scaffold=scaffold,
        save_checkpoint_steps=2,
        save_summaries_steps=None,
        save_summaries_secs=None,
        log_step_count_steps=None) as session:
      first_step = session.run(global_step)
      for _ in range(steps):
        session.run(train_op)
    return first_step, scaffold.saver


def test_monitored_training_session_saves_and_resumes_through_ours(
    tmp_path, patched):
  del patched
  directory = str(tmp_path)
  with tl.captured_logs(level="INFO") as messages:
    first_step, saver = _train_monitored(directory, 5)
  assert first_step == 0
  assert type(saver) is tl.IMPLS["ours"].Saver
  prefix = os.path.join(directory, "model.ckpt")
  assert _saved_paths(messages) == [
      f"{prefix}-0", f"{prefix}-2", f"{prefix}-4", f"{prefix}-5"
  ]
  # Restarted on the same directory, it resumes where it stopped.
  first_step, _ = _train_monitored(directory, 3)
  assert first_step == 5
  assert tf.train.latest_checkpoint(directory) == f"{prefix}-8"
  tf_objckpt.unpatch_tensorflow()
  # TensorFlow's own session and Saver resume from our checkpoints.
  first_step, saver = _train_monitored(directory, 1)
  assert first_step == 8
  assert type(saver) is tl.IMPLS["tf"].Saver
  reader = tf.train.load_checkpoint(f"{prefix}-9")
  assert reader.get_tensor("weight") == 9.


# ----------------------------------------------------------------------------
# tf_keras: save_weights and load_weights, ModelCheckpoint, BackupAndRestore.
# ----------------------------------------------------------------------------


def test_tf_keras_save_weights_and_load_weights_go_through_ours(
    tmp_path, patched):
  del patched
  model = tl.make_model("tf_keras", "functional")  # Built after the patch.
  assert type(model._checkpoint) is tf_objckpt.Checkpoint  # pylint: disable=protected-access
  prefix = str(tmp_path / "weights")
  with tl.captured_logs(level="INFO") as messages:
    model.save_weights(prefix)
  assert _saved_paths(messages) == [prefix]
  assert tf.train.latest_checkpoint(str(tmp_path)) == prefix
  restored = tl.make_model("tf_keras", "functional")
  status = restored.load_weights(prefix)
  assert isinstance(status, load_status.CheckpointLoadStatus)
  status.assert_consumed()
  _assert_weights_equal(model, restored)
  tf_objckpt.unpatch_tensorflow()
  reference = tl.make_model("tf_keras", "functional")
  assert type(reference._checkpoint) is tl.IMPLS["tf"].Checkpoint  # pylint: disable=protected-access
  reference.load_weights(prefix).assert_consumed()
  _assert_weights_equal(model, reference)


def test_tf_keras_models_built_before_the_patch_keep_tensorflows_checkpoint(
    tmp_path):
  model = tl.make_model("tf_keras", "functional")
  with tl.tensorflow_patched(), tl.captured_logs(level="INFO") as messages:
    model.save_weights(str(tmp_path / "weights"))
  assert type(model._checkpoint) is tl.IMPLS["tf"].Checkpoint  # pylint: disable=protected-access
  assert not _saved_paths(messages)


_GRAPH_MODE_LOAD = """
import sys
import numpy as np
import tensorflow as tf
import tf_objckpt

tf.compat.v1.disable_eager_execution()
tf_objckpt.patch_tensorflow()
import tf_keras
from tf_keras.src import backend

def make():
  return tf_keras.Sequential([tf_keras.layers.Dense(3),
                              tf_keras.layers.Dense(1)])

model = make()
model.build((None, 4))
session = backend.get_session()
model.save_weights(sys.argv[1])
restored = make()  # Not built: the restore waits, then streams when built.
status = restored.load_weights(sys.argv[1])
restored.build((None, 4))
for expected, actual in zip(session.run(model.weights),
                            session.run(restored.weights), strict=True):
  np.testing.assert_array_equal(expected, actual)
print(type(status).__module__)
"""


def test_tf_keras_load_weights_streams_deferred_restores_in_graph_mode(
    tmp_path):
  result = tl.run_python(_GRAPH_MODE_LOAD, tmp_path / "weights")
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.split() == ["tf_objckpt.api.load_status"]


class _Interrupt(tf_keras.callbacks.Callback):
  """Stops `fit` with an error as epoch `epoch` begins; keeps the weights."""

  def __init__(self, epoch):
    super().__init__()
    self._epoch = epoch
    self.weights = None

  def on_epoch_begin(self, epoch, logs=None):
    if epoch == self._epoch:
      self.weights = self.model.get_weights()
      raise RuntimeError("interrupted")


class _FirstEpoch(tf_keras.callbacks.Callback):
  """Records the first epoch `fit` runs and the weights it starts from."""

  def __init__(self):
    super().__init__()
    self.epoch = self.weights = None

  def on_epoch_begin(self, epoch, logs=None):
    if self.epoch is None:
      self.epoch, self.weights = epoch, self.model.get_weights()


def _compiled_model():
  model = tl.make_model("tf_keras", "functional")
  model.compile(optimizer="adam", loss="mse")
  return model


@pytest.mark.parametrize("resumed_by", ["ours", "tf"])
def test_model_checkpoint_and_backup_and_restore_in_fit(tmp_path, resumed_by):
  x, y = tl.training_data()
  weights = str(tmp_path / "weights" / "epoch{epoch}")
  backup = str(tmp_path / "backup")
  interrupt = _Interrupt(epoch=2)
  tf_objckpt.patch_tensorflow()
  try:
    with tl.captured_logs(level="INFO") as messages:
      with pytest.raises(RuntimeError, match="interrupted"):
        _compiled_model().fit(
            x,
            y,
            epochs=4,
            verbose=0,
            callbacks=[
                tf_keras.callbacks.ModelCheckpoint(weights,
                                                   save_weights_only=True),
                tf_keras.callbacks.BackupAndRestore(backup), interrupt
            ])
  finally:
    if resumed_by == "tf":
      tf_objckpt.unpatch_tensorflow()
  try:
    saved = _saved_paths(messages)
    assert weights.format(epoch=1) in saved
    assert weights.format(epoch=2) in saved
    assert os.path.join(backup, "chief", "ckpt-2") in saved
    # Fit again: BackupAndRestore restores the backup, at epoch 2.
    first_epoch = _FirstEpoch()
    _compiled_model().fit(
        x,
        y,
        epochs=4,
        verbose=0,
        callbacks=[tf_keras.callbacks.BackupAndRestore(backup), first_epoch])
  finally:
    tf_objckpt.unpatch_tensorflow()
  assert first_epoch.epoch == 2
  for expected, actual in zip(interrupt.weights,
                              first_epoch.weights,
                              strict=True):
    np.testing.assert_array_equal(expected, actual)
  reference = _compiled_model()  # TensorFlow's classes read the weights.
  reference.load_weights(weights.format(epoch=2)).expect_partial()
  for expected, actual in zip(interrupt.weights,
                              reference.get_weights(),
                              strict=True):
    np.testing.assert_array_equal(expected, actual)


# ----------------------------------------------------------------------------
# PreemptionCheckpointHandler, in an unchanged script run patched.
# ----------------------------------------------------------------------------

_PREEMPTIBLE_TRAINING = """
\"\"\"Trains under a PreemptionCheckpointHandler; knows nothing of tf_objckpt.\"\"\"
import sys
import time

import tensorflow as tf

directory, total_steps = sys.argv[1], int(sys.argv[2])
step = tf.Variable(0, dtype=tf.int64)
weight = tf.Variable(0.)
manager = tf.train.CheckpointManager(
    tf.train.Checkpoint(step=step, weight=weight), directory, max_to_keep=1)
handler = tf.distribute.experimental.PreemptionCheckpointHandler(
    tf.distribute.cluster_resolver.TFConfigClusterResolver(), manager)
print(type(manager).__module__, int(step.numpy()), flush=True)


@tf.function
def train_step():
  step.assign_add(1)
  weight.assign_add(1.)


while step.numpy() < total_steps:
  handler.run(train_step)
  print(f"step {step.numpy()}", flush=True)
  time.sleep(0.02)
"""
_RESTART_CODE = 42  # What the handler exits with after its save.


def _run_patched(script, *args):
  return tl.start_python(["-m", "tf_objckpt", "run", script, *args])


def test_preemption_handler_saves_through_ours_and_the_rerun_resumes(tmp_path):
  script = tmp_path / "train.py"
  script.write_text(_PREEMPTIBLE_TRAINING)
  directory = str(tmp_path / "checkpoints")
  process = _run_patched(script, directory, 1000)
  try:
    assert process.stdout.readline().split() == [
        "tf_objckpt.checkpoint_management", "0"
    ]
    code, stderr = tl.terminate_after_line(process, "step 3")
  finally:
    tl.kill_group(process)
  assert code == _RESTART_CODE, stderr[-5000:]
  saved = tf.train.latest_checkpoint(directory)
  reader = tf.train.load_checkpoint(saved)  # TensorFlow reads it.
  saved_step = reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE")
  assert saved_step >= 4  # Saved at the step after the signal.
  assert reader.get_tensor("weight/.ATTRIBUTES/VARIABLE_VALUE") == saved_step
  process = _run_patched(script, directory, saved_step + 2)
  code, stdout, stderr = tl.finish(process, timeout=120)
  assert code == 0, stderr[-5000:]
  lines = stdout.splitlines()
  assert lines[0].split() == [
      "tf_objckpt.checkpoint_management",
      str(saved_step)
  ]
  assert lines[-1] == f"step {saved_step + 2}"
