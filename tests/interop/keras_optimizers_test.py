"""Keras optimizers and layers beyond Adam and Dense, checkpointed both ways.

For each, TensorFlow and tf_objckpt write the same checkpoint, and a
restore before anything is built (restore-on-create) ends with the same
values, statuses and continued training as TensorFlow's.

Covers: tf_objckpt.restore, tf_objckpt.restoring.keras3_slots,
tf_objckpt.checkpoint, tf_objckpt.api.object_checkpoints,
tf_objckpt.restoring.restore_walk, tf_objckpt.restoring.node_binding,
tf_objckpt.restoring.keras3_slot_binding.
"""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import testlib as tl

_KERAS3_OPTIMIZERS = {
    "sgd_momentum":
        lambda: keras.optimizers.SGD(0.01, momentum=0.9, nesterov=True),
    "rmsprop_centered":
        lambda: keras.optimizers.RMSprop(0.01, momentum=0.5, centered=True),
    "adam_amsgrad_ema":
        lambda: keras.optimizers.Adam(0.01, amsgrad=True, use_ema=True),
    "adamw_schedule":
        lambda: keras.optimizers.AdamW(
            keras.optimizers.schedules.ExponentialDecay(0.01, 10, 0.9)),
    "loss_scale":
        lambda: keras.mixed_precision.LossScaleOptimizer(
            keras.optimizers.Adam(0.01)),
}


def _model(built=True):
  layers = [
      keras.layers.Dense(3),
      keras.layers.BatchNormalization(),
      keras.layers.Dense(2)
  ]
  if built:
    return keras.Sequential([keras.Input((4,))] + layers)
  return keras.Sequential(layers)


def _snapshot(model, optimizer):
  return ([np.asarray(w).tolist() for w in model.weights],
          [np.asarray(v).tolist() for v in optimizer.variables])


@pytest.mark.parametrize("name", sorted(_KERAS3_OPTIMIZERS))
def test_keras3_optimizer_restored_on_create(tmp_path, name):
  make = _KERAS3_OPTIMIZERS[name]
  model, optimizer = _model(), make()
  tl.train_step(model, optimizer)
  paths = tl.write_both(tmp_path, model=model, optimizer=optimizer)
  tl.assert_same_checkpoint(paths["tf"], paths["ours"])
  expected = _snapshot(model, optimizer)
  results = {}
  for impl, lib in tl.IMPLS.items():
    fresh, fresh_optimizer = _model(built=False), make()
    status = lib.Checkpoint(model=fresh, optimizer=fresh_optimizer).read(
        paths[tl.other(impl)])
    fresh.build((None, 4))
    fresh_optimizer.build(fresh.trainable_variables)
    status.assert_consumed()
    assert _snapshot(fresh, fresh_optimizer) == expected, impl
    tl.train_step(fresh, fresh_optimizer)
    results[impl] = _snapshot(fresh, fresh_optimizer)
  tl.assert_agree(results)


def test_keras3_restore_then_fit_continues_like_tensorflow(tmp_path):
  x, y = tl.training_data()

  def compiled(built):
    model = _model(built)
    model.compile(keras.optimizers.Adam(0.01), "mse")
    return model

  model = compiled(True)
  model.fit(x, y, epochs=1, batch_size=4, shuffle=False, verbose=0)
  path = tf.train.Checkpoint(model=model, optimizer=model.optimizer).save(
      os.fspath(tmp_path / "ckpt"))
  results = {}
  for impl, lib in tl.IMPLS.items():
    fresh = compiled(False)
    checkpoint = lib.Checkpoint(model=fresh, optimizer=fresh.optimizer)
    status = checkpoint.restore(path)
    fresh.fit(x, y, epochs=1, batch_size=4, shuffle=False, verbose=0)
    status.assert_existing_objects_matched()
    results[impl] = (int(fresh.optimizer.iterations.numpy()),
                     int(checkpoint.save_counter.numpy()),
                     [w.numpy().tolist() for w in fresh.weights],
                     tl.outcome(status.assert_consumed).name)
  assert results["ours"] == results["tf"]
  assert results["ours"][0] == 8


def _sequence_model(built=True):
  layers = [
      keras.layers.Embedding(10, 3),
      keras.layers.Bidirectional(keras.layers.LSTM(4)),
      keras.layers.Dense(2)
  ]
  if built:
    return keras.Sequential([keras.Input((5,), dtype="int32")] + layers)
  return keras.Sequential(layers)


@pytest.mark.parametrize("writer", tl.IMPLS)
def test_keras3_embedding_and_lstm(tmp_path, writer):
  model = _sequence_model()
  paths = tl.write_both(tmp_path, model=model)
  tl.assert_same_checkpoint(paths["tf"], paths["ours"])
  for lib in tl.IMPLS.values():
    fresh = _sequence_model(built=False)
    status = lib.Checkpoint(model=fresh).read(paths[writer])
    fresh.build((None, 5))
    status.assert_consumed()
    tl.assert_variables_equal(model.weights, fresh.weights)
