"""tf_keras' LossScaleOptimizer, checkpointed by TensorFlow and by us.

tf_keras wraps the optimizer it scales in a `DelegatingTrackableMixin`,
which forwards `_serialize_to_tensors` to the inner optimizer. TensorFlow
asks the inner optimizer whether it saves through `_serialize_to_tensors`
(it does not: its state is in its dependencies); these tests check that we
write the same checkpoint as TensorFlow for such a wrapper, and that each
restores the other's, before and after the variables exist.

Covers: tf_objckpt.saveable_object_util, tf_objckpt.graph_view,
tf_objckpt.objects.graph_walk, tf_objckpt.objects.graph_serialization.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import testlib as tl

_OPTIMIZERS = {
    "legacy_adam":
        lambda: tf_keras.mixed_precision.LossScaleOptimizer(
            tf_keras.optimizers.legacy.Adam(0.01)),
    "adam":
        lambda: tf_keras.mixed_precision.LossScaleOptimizer(
            tf_keras.optimizers.Adam(0.01)),
    "legacy_sgd_fixed_scale":
        lambda: (tf_keras.mixed_precision.LossScaleOptimizer(
            tf_keras.optimizers.legacy.SGD(0.01, momentum=0.5),
            dynamic=False,
            initial_scale=8.0)),
}


def _train_step(variable, optimizer):
  with tf.GradientTape() as tape:
    loss = optimizer.get_scaled_loss(tf.reduce_sum(variable * variable))
  grads = optimizer.get_unscaled_gradients(tape.gradient(loss, [variable]))
  optimizer.apply_gradients(zip(grads, [variable]))


@pytest.mark.parametrize("name", sorted(_OPTIMIZERS))
def test_write_gives_tensorflows_checkpoint(tmp_path, name):
  variable = tf.Variable([1.0, 2.0])
  optimizer = _OPTIMIZERS[name]()
  _train_step(variable, optimizer)
  paths = tl.write_both(tmp_path, v=variable, opt=optimizer)
  tl.assert_same_checkpoint(paths["tf"], paths["ours"])
  if optimizer.dynamic:
    assert any("loss_scale" in key for key in tl.signature(paths["ours"]))


@pytest.mark.parametrize("name", sorted(_OPTIMIZERS))
def test_mixed_precision_model_cross_restore(tmp_path, name):
  x = np.random.RandomState(0).rand(8, 4).astype(np.float32)
  y = np.random.RandomState(1).rand(8, 2).astype(np.float32)
  policy = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy("mixed_float16")
  try:

    def compiled(built):
      layers = [
          tf_keras.layers.Dense(3),
          tf_keras.layers.Dense(2, dtype="float32")
      ]
      if built:
        layers.insert(0, tf_keras.layers.InputLayer((4,)))
      model = tf_keras.Sequential(layers)
      model.compile(_OPTIMIZERS[name](), "mse")
      return model

    model = compiled(True)
    model.fit(x, y, epochs=2, batch_size=4, verbose=0)
    paths = tl.write_both(tmp_path, model=model, opt=model.optimizer)
    tl.assert_same_checkpoint(paths["tf"], paths["ours"])
    expected = tl.values(paths["tf"])
    for writer in tl.IMPLS:
      for built in (True, False):
        fresh = compiled(built)
        status = tl.IMPLS[tl.other(writer)].Checkpoint(
            model=fresh, opt=fresh.optimizer).read(paths[writer])
        if not built:
          fresh.build((None, 4))
        if name.startswith("legacy"):
          fresh.optimizer._create_all_weights(  # pylint: disable=protected-access
              fresh.trainable_variables)
        else:
          fresh.optimizer.build(fresh.trainable_variables)
        status.assert_consumed()
        after = tl.snapshot(tmp_path, model=fresh, opt=fresh.optimizer)
        tl.assert_values_equal(expected, after)
  finally:
    tf_keras.mixed_precision.set_global_policy(policy)
