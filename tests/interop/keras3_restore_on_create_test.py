"""Keras 3 models restored before they are built (restore-on-create).

The TensorFlow 2 pattern: make the model and optimizer, `restore()`, then
let the first call build the weights and `optimizer.build()` the slots.
Keras 3 builds a layer without `build()` (a subclassed model, a custom
block) by tracing it in a scratch graph, where TensorFlow's restore fails
silently: no value reaches the weights. Ours restores them (a departure in
API.md). Each test compares, value for value, a model restored this way
with the same checkpoint restored into a model built first, then their
predictions and one more training step; and runs TensorFlow's Checkpoint
side by side to show its behaviour is unchanged.

Covers: tf_objckpt.restore, tf_objckpt.restoring.restore_coordinator,
tf_objckpt.engine.read_plan, tf_objckpt.restoring.keras3_slot_binding.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import testlib as tl

_X = np.random.RandomState(1).rand(6, 5).astype(np.float32)
_Y = np.random.RandomState(2).rand(6, 2).astype(np.float32)


class ScaleAndOffset(keras.layers.Layer):
  """A custom layer creating its two weights in `build()`."""

  def build(self, input_shape):
    self.scale = self.add_weight(shape=(input_shape[-1],),
                                 initializer="ones",
                                 name="scale")
    self.offset = self.add_weight(shape=(), initializer="zeros", name="offset")

  def call(self, inputs):
    return inputs * self.scale + self.offset


class Block(keras.layers.Layer):
  """A nested layer: a shared Dense applied twice, then a custom layer."""

  def __init__(self):
    super().__init__()
    self.shared = keras.layers.Dense(5, activation="tanh")
    self.scale = ScaleAndOffset()

  def call(self, inputs):
    return self.scale(self.shared(self.shared(inputs)))


class Subclassed(keras.Model):

  def __init__(self):
    super().__init__()
    self.block = Block()
    self.head = keras.layers.Dense(2)

  def call(self, inputs):
    return self.head(self.block(inputs))


class Transformer(keras.Model):
  """A transformer block: attention, layer norms, a feed-forward network."""

  def __init__(self):
    super().__init__()
    self.attention = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    self.norm1 = keras.layers.LayerNormalization()
    self.norm2 = keras.layers.LayerNormalization()
    self.ffn_in = keras.layers.Dense(8, activation="relu")
    self.ffn_out = keras.layers.Dense(5)
    self.head = keras.layers.Dense(2)

  def call(self, inputs):
    sequence = tf.reshape(inputs, (-1, 1, 5))
    hidden = self.norm1(sequence + self.attention(sequence, sequence))
    hidden = self.norm2(hidden + self.ffn_out(self.ffn_in(hidden)))
    return self.head(tf.reshape(hidden, (-1, 5)))


def _sequential():
  return keras.Sequential([
      keras.layers.Dense(4, activation="relu"),
      ScaleAndOffset(),
      keras.layers.Dense(2)
  ])


def _functional():
  inputs = keras.Input((5,))
  hidden = keras.layers.Dense(4, activation="relu")(inputs)
  return keras.Model(inputs, keras.layers.Dense(2)(ScaleAndOffset()(hidden)))


MODELS = {
    "subclassed": Subclassed,
    "transformer": Transformer,
    "sequential": _sequential,
    "functional": _functional,
}

OPTIMIZERS = {
    "adam":
        lambda: keras.optimizers.Adam(0.01),
    "adamw":
        lambda: keras.optimizers.AdamW(0.01, weight_decay=0.1),
    "sgd_momentum":
        lambda: keras.optimizers.SGD(0.01, momentum=0.9),
    "adam_ema":
        lambda: keras.optimizers.Adam(0.01, use_ema=True),
    "loss_scale":
        lambda: keras.mixed_precision.LossScaleOptimizer(
            keras.optimizers.Adam(0.01)),
}


def _train(model, optimizer, steps):
  for _ in range(steps):
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean(tf.square(model(_X) - _Y))
    variables = model.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))


def _model_and_optimizer_arrays(model, optimizer):
  return ([w.numpy() for w in model.weights],
          [v.numpy() for v in optimizer.variables])


def _assert_same_values(expected, actual):
  for group_expected, group_actual in zip(expected, actual):
    assert len(group_expected) == len(group_actual)
    for value_expected, value_actual in zip(group_expected, group_actual):
      np.testing.assert_array_equal(value_expected, value_actual)


def _trained_checkpoint(tmp_path, model_name, optimizer_name):
  """Trains a model; returns its values and TensorFlow's checkpoint."""
  model, optimizer = MODELS[model_name](), OPTIMIZERS[optimizer_name]()
  _train(model, optimizer, steps=2)
  paths = tl.write_both(tmp_path, model=model, optimizer=optimizer)
  tl.assert_same_checkpoint(paths["tf"], paths["ours"])
  return _model_and_optimizer_arrays(model, optimizer), paths["tf"]


def _restore_then_build(impl, path, model_name, optimizer_name):
  """Restores into a new model, which the first call then builds."""
  model, optimizer = MODELS[model_name](), OPTIMIZERS[optimizer_name]()
  status = tl.IMPLS[impl].Checkpoint(model=model,
                                     optimizer=optimizer).read(path)
  model(_X)
  optimizer.build(model.trainable_variables)
  return model, optimizer, status


def _build_then_restore(path, model_name, optimizer_name):
  model, optimizer = MODELS[model_name](), OPTIMIZERS[optimizer_name]()
  model(_X)
  optimizer.build(model.trainable_variables)
  tl.IMPLS["ours"].Checkpoint(model=model,
                              optimizer=optimizer).read(path).assert_consumed()
  return model, optimizer


def _restored_by_tensorflow(path, model_name, optimizer_name, trained):
  """Which values TensorFlow's restore-then-build gives the model."""
  model, optimizer, status = _restore_then_build("tf", path, model_name,
                                                 optimizer_name)
  status.expect_partial()
  values = _model_and_optimizer_arrays(model, optimizer)
  return (len(values[0]), [
      len(got) == len(want) and all(a.shape == b.shape and np.array_equal(a, b)
                                    for a, b in zip(got, want))
      for got, want in zip(values, trained)
  ])


@pytest.mark.parametrize("model_name", sorted(MODELS))
@pytest.mark.parametrize("optimizer_name", ["adam", "adamw"])
def test_restore_then_build_equals_build_then_restore(tmp_path, model_name,
                                                      optimizer_name):
  trained, path = _trained_checkpoint(tmp_path, model_name, optimizer_name)
  tf_before = _restored_by_tensorflow(path, model_name, optimizer_name, trained)
  model, optimizer, status = _restore_then_build("ours", path, model_name,
                                                 optimizer_name)
  status.assert_consumed()
  status.assert_existing_objects_matched()
  _assert_same_values(trained, _model_and_optimizer_arrays(model, optimizer))
  eager_model, eager_optimizer = _build_then_restore(path, model_name,
                                                     optimizer_name)
  _assert_same_values(_model_and_optimizer_arrays(eager_model, eager_optimizer),
                      _model_and_optimizer_arrays(model, optimizer))
  np.testing.assert_array_equal(eager_model(_X), model(_X))
  _train(model, optimizer, steps=1)
  _train(eager_model, eager_optimizer, steps=1)
  _assert_same_values(_model_and_optimizer_arrays(eager_model, eager_optimizer),
                      _model_and_optimizer_arrays(model, optimizer))
  # TensorFlow's Checkpoint, in the same process, behaves as before ours.
  assert _restored_by_tensorflow(path, model_name, optimizer_name,
                                 trained) == tf_before
  if model_name in ("subclassed", "transformer"):
    assert tf_before[1] == [False, False]  # TensorFlow loses the values.


@pytest.mark.parametrize("optimizer_name", sorted(OPTIMIZERS))
def test_lazily_built_optimizer_state(tmp_path, optimizer_name):
  """Slots, EMA averages and loss scale state reach `optimizer.build()`."""
  trained, path = _trained_checkpoint(tmp_path, "subclassed", optimizer_name)
  model, optimizer, status = _restore_then_build("ours", path, "subclassed",
                                                 optimizer_name)
  status.assert_consumed()
  _assert_same_values(trained, _model_and_optimizer_arrays(model, optimizer))
  eager_model, eager_optimizer = _build_then_restore(path, "subclassed",
                                                     optimizer_name)
  _train(model, optimizer, steps=1)
  _train(eager_model, eager_optimizer, steps=1)
  _assert_same_values(_model_and_optimizer_arrays(eager_model, eager_optimizer),
                      _model_and_optimizer_arrays(model, optimizer))


def test_restore_then_fit_builds_everything(tmp_path):
  """`fit()` builds model and optimizer; both start from the checkpoint."""
  trained, path = _trained_checkpoint(tmp_path, "subclassed", "adam")
  model, optimizer = Subclassed(), keras.optimizers.Adam(0.01)
  status = tl.IMPLS["ours"].Checkpoint(model=model,
                                       optimizer=optimizer).read(path)
  model.compile(optimizer, "mse")
  model.fit(_X, _Y, batch_size=6, epochs=1, shuffle=False, verbose=0)
  status.assert_consumed()
  eager_model, eager_optimizer = _build_then_restore(path, "subclassed", "adam")
  eager_model.compile(eager_optimizer, "mse")
  eager_model.fit(_X, _Y, batch_size=6, epochs=1, shuffle=False, verbose=0)
  _assert_same_values(_model_and_optimizer_arrays(eager_model, eager_optimizer),
                      _model_and_optimizer_arrays(model, optimizer))
  assert int(optimizer.iterations.numpy()) == 3
  del trained


class OneDense(keras.Model):

  def __init__(self, dtype="float32"):
    super().__init__()
    self.layer = keras.layers.Dense(2, dtype=dtype)

  def call(self, inputs):
    return self.layer(inputs)


_SAVED_BIAS = [1.5, -2.5]


def _mismatched_checkpoint(tmp_path):
  model = OneDense()
  model(np.zeros((1, 3), np.float32))  # The kernel is (3, 2).
  model.layer.bias.assign(_SAVED_BIAS)
  return tl.write("tf", tmp_path / "ckpt", model=model)


def test_shape_mismatch_raises_at_creation_naming_key_path_and_shapes(tmp_path):
  path = _mismatched_checkpoint(tmp_path)
  model = OneDense()
  tl.IMPLS["ours"].Checkpoint(model=model).read(path)
  with pytest.raises(ValueError) as raised:
    model(_X)  # Inputs of 5 features: the kernel is (5, 2).
  message = str(raised.value)
  assert "'model/layer/_kernel/.ATTRIBUTES/VARIABLE_VALUE'" in message
  assert "(object 'model/layer/_kernel')" in message
  assert "(3, 2)" in message and "(5, 2)" in message
  assert path in message


def _build_after_restoring_a_mismatch(impl, path):
  """What building does after `impl`'s restore of a kernel that misfits.

  Returns:
    The name of what the build raised ("ok" if nothing), the kernel's
    shape and the bias (None if they were not made).
  """
  model = OneDense()
  tl.IMPLS[impl].Checkpoint(model=model).read(path).expect_partial()
  built = tl.outcome(model, _X)  # Inputs of 5 features: the kernel is (5, 2).
  layer = model.layer
  if not layer.built:
    return built.name, None, None
  return built.name, tuple(layer.kernel.shape), layer.bias.numpy().tolist()


def test_tensorflow_swallows_the_same_mismatch(tmp_path):
  """TensorFlow builds a fresh kernel and no error; ours raises.

  TensorFlow restores the bias, which fits, and leaves the kernel that
  does not fit as initialized; ours raises the mismatch (`test_shape_
  mismatch_raises_at_creation_naming_key_path_and_shapes` checks its
  message), and the layer stays unbuilt.
  """
  path = _mismatched_checkpoint(tmp_path)
  built = tl.by_impl(_build_after_restoring_a_mismatch, path)
  assert built["tf"] == ("ok", (5, 2), _SAVED_BIAS)
  assert built["ours"] == ("ValueError", None, None)


def test_dtype_mismatch_raises_at_creation(tmp_path):
  source = OneDense("float64")
  source(_X)
  path = tl.write("tf", tmp_path / "ckpt", model=source)
  model = OneDense()
  tl.IMPLS["ours"].Checkpoint(model=model).read(path)
  with pytest.raises(tf.errors.InvalidArgumentError) as raised:
    model(_X)  # The dtype error type of an eager restore, as TensorFlow's.
  assert "float64" in str(raised.value) and "float32" in str(raised.value)
  assert "model/layer/_kernel" in str(raised.value)
