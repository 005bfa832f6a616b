"""`BackupAndRestore` resumes `fit` from the newest intact backup.

Keras 2's `BackupAndRestore` (tf_keras, and `tf.keras` where it is Keras 2)
backs `fit` up with a `tf.train.CheckpointManager(max_to_keep=1)` and, when
`fit` starts again, restores it with `restore_or_initialize()`. Patched,
that manager is ours: a damaged backup is skipped with a WARNING, and `fit`
resumes from an older backup still on disk (one a kill left before its
deletion, here put back by hand), from its epoch and weights. With only
damaged backups it raises, as TensorFlow's manager does on every restart.

Covers: tf_objckpt.api.self_healing, tf_objckpt.checkpoint_management,
tf_objckpt.tools.patching, tf_objckpt.api.checkpoint_manager.
"""

import contextlib
import logging
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl

# tf_keras, and Keras 2 as tf.keras where TensorFlow ships it (2.15).
_KERAS = ("tf_keras",) + (() if tl.KERAS_3 else ("tf.keras",))
_SKIPPED = "Skipped damaged checkpoint"


def _keras(name):
  if name == "tf.keras":
    return tf.keras
  return tl.keras_module("tf_keras")


class _Epochs:
  """Callbacks recording the weights each epoch begins with; one may stop
  `fit` as an epoch begins."""

  def __init__(self, keras, stop_at=None, on_epoch_begin=None):
    self.weights = {}
    recorded = self.weights

    class Callback(keras.callbacks.Callback):

      def on_epoch_begin(self, epoch, logs=None):
        recorded[epoch] = self.model.get_weights()
        if on_epoch_begin:
          on_epoch_begin(epoch)
        if epoch == stop_at:
          raise RuntimeError("interrupted")

    self.callback = Callback()


def _fit(keras, backup, epochs):
  model = keras.Sequential(
      [keras.layers.Dense(3, input_shape=(4,)),
       keras.layers.Dense(1)])
  model.compile(optimizer="adam", loss="mse")
  x = np.linspace(0, 1, 32, dtype=np.float32).reshape(8, 4)
  model.fit(
      x,
      x[:, :1],
      epochs=4,
      verbose=0,
      callbacks=[keras.callbacks.BackupAndRestore(backup), epochs.callback])


def _interrupted_fit(keras, backup, aside):
  """Fit stopped as epoch 2 begins; the backup of epoch 0 copied `aside`.

  Returns:
    The epochs' recorded weights.
  """
  chief = os.path.join(backup, "chief")

  def keep_first_backup(epoch):
    if epoch == 1:  # ckpt-1 (after epoch 0) is there until ckpt-2 is.
      shutil.copytree(chief, aside)

  epochs = _Epochs(keras, stop_at=2, on_epoch_begin=keep_first_backup)
  with pytest.raises(RuntimeError, match="interrupted"):
    _fit(keras, backup, epochs)
  assert sorted(os.listdir(chief)) == [
      "checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index"
  ]
  return epochs.weights


def _put_back(aside, chief):
  """Puts ckpt-1's files back, unlisted, as a kill before their deletion
  would have left them."""
  for name in os.listdir(aside):
    if name.startswith("ckpt-1."):
      shutil.copy(os.path.join(aside, name), chief)


@pytest.mark.parametrize("keras_name", _KERAS)
def test_fit_resumes_from_the_newest_intact_backup(tmp_path, keras_name):
  keras = _keras(keras_name)
  backup, aside = str(tmp_path / "backup"), str(tmp_path / "aside")
  chief = os.path.join(backup, "chief")
  with tl.tensorflow_patched():
    interrupted = _interrupted_fit(keras, backup, aside)
    _put_back(aside, chief)
    tl.damage(os.path.join(chief, "ckpt-2"), "truncated")
    resumed = _Epochs(keras)
    with tl.captured_logs(logging.WARNING) as messages:
      _fit(keras, backup, resumed)
  warnings = [m for m in messages if m.startswith(_SKIPPED)]
  assert len(warnings) == 1, messages
  assert warnings[0].startswith(
      f"{_SKIPPED} {os.path.join(chief, 'ckpt-2')}: error: ")
  assert "data file is truncated" in warnings[0]
  # Resumed at epoch 1, from the weights it began with the first time.
  assert min(resumed.weights) == 1
  for expected, actual in zip(interrupted[1], resumed.weights[1], strict=True):
    np.testing.assert_array_equal(expected, actual)


@pytest.mark.parametrize("patched", [True, False], ids=["ours", "tensorflow"])
@pytest.mark.parametrize("keras_name", _KERAS)
def test_only_damaged_backups_stop_fit(tmp_path, keras_name, patched):
  keras = _keras(keras_name)
  backup, aside = str(tmp_path / "backup"), str(tmp_path / "aside")
  chief = os.path.join(backup, "chief")
  with tl.tensorflow_patched():
    _interrupted_fit(keras, backup, aside)
  tl.damage(os.path.join(chief, "ckpt-2"), "truncated")
  for _ in range(2):  # On every restart.
    with (tl.tensorflow_patched() if patched else contextlib.nullcontext()):
      error = tl.outcome(_fit, keras, backup, _Epochs(keras)).error
    assert isinstance(error, (tf.errors.OpError, IndexError)), error
    if patched:
      assert isinstance(error, tf.errors.DataLossError)
      assert os.path.join(chief, "ckpt-2") in str(error)
