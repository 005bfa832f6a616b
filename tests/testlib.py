"""Helpers for tests that do the same thing with TensorFlow and tf_objckpt.

A checkpoint is compared through what `tf.train.load_checkpoint` sees: its
keys with their shapes and dtypes, its parsed `TrackableObjectGraph`, and
its values.
"""

import contextlib
import logging as py_logging
import os

from absl import logging as absl_logging
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

import tf_objckpt

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"

# The two implementations under test, by the names tests use for them.
CHECKPOINT_CLASSES = {"tf": tf.train.Checkpoint, "ours": tf_objckpt.Checkpoint}
IMPLS = tuple(CHECKPOINT_CLASSES)


def other(impl):
  """The implementation that is not `impl`."""
  return "ours" if impl == "tf" else "tf"


def object_graph(path):
  """The parsed `TrackableObjectGraph` stored in the checkpoint at `path`."""
  reader = tf.train.load_checkpoint(path)
  proto = trackable_object_graph_pb2.TrackableObjectGraph()
  proto.ParseFromString(reader.get_tensor(OBJECT_GRAPH_KEY))
  return proto


def signature(path):
  """`{key: (shape, dtype name)}` for every key of the checkpoint."""
  reader = tf.train.load_checkpoint(path)
  shapes = reader.get_variable_to_shape_map()
  dtypes = reader.get_variable_to_dtype_map()
  assert set(shapes) == set(dtypes)
  return {key: (tuple(shapes[key]), dtypes[key].name) for key in shapes}


def values(path):
  """`{key: numpy value}` of every key but the object graph."""
  reader = tf.train.load_checkpoint(path)
  return {key: reader.get_tensor(key)
          for key in reader.get_variable_to_shape_map()
          if key != OBJECT_GRAPH_KEY}


def assert_values_equal(expected, actual):
  """Asserts two `{key: value}` dicts hold the same keys and values."""
  assert sorted(expected) == sorted(actual)
  for key in expected:
    np.testing.assert_array_equal(np.asarray(actual[key]),
                                  np.asarray(expected[key]), err_msg=key)
    assert np.asarray(actual[key]).dtype == np.asarray(expected[key]).dtype, key


def _dict_diff(expected, actual):
  """Describes how two dicts differ, for assertion messages."""
  lines = []
  for key in sorted(set(expected) | set(actual)):
    if expected.get(key, "<missing>") != actual.get(key, "<missing>"):
      lines.append(f"  {key}: expected {expected.get(key, '<missing>')}, "
                   f"got {actual.get(key, '<missing>')}")
  return "\n".join(lines)


def assert_same_checkpoint(tf_path, our_path, compare_values=True):
  """Asserts TensorFlow's and our checkpoint are the same checkpoint."""
  expected, actual = signature(tf_path), signature(our_path)
  assert actual == expected, "keys differ:\n" + _dict_diff(expected, actual)
  expected, actual = object_graph(tf_path), object_graph(our_path)
  assert actual == expected, (
      f"object graphs differ.\nTensorFlow's:\n{expected}\nOurs:\n{actual}")
  if compare_values:
    assert_values_equal(values(tf_path), values(our_path))


def write(impl, prefix, **objects):
  """Writes `objects` with `impl`'s `Checkpoint.write`; returns the path."""
  return CHECKPOINT_CLASSES[impl](**objects).write(os.fspath(prefix))


def write_both(tmp_path, **objects):
  """Writes the same objects with both; returns `{impl: path}`."""
  return {impl: write(impl, tmp_path / impl / "ckpt", **objects)
          for impl in IMPLS}


def snapshot(tmp_path, **objects):
  """The values of `objects` as TensorFlow checkpoints them."""
  path = write("tf", tmp_path / "snapshot" / f"s{len(os.listdir(tmp_path))}",
               **objects)
  return values(path)


def assert_values_differ(first, second):
  """Asserts no value (but save counters) is equal in both dicts.

  Used to check that fresh objects start different from the checkpoint, so
  an equal value after restoring proves a restore happened.
  """
  for key in first:
    if key not in second or "save_counter" in key:
      continue
    a, b = np.asarray(first[key]), np.asarray(second[key])
    if a.size == 0:
      continue
    assert a.shape != b.shape or not np.array_equal(a, b), key


def function_library_names(graph):
  """The sorted names of the functions in `graph`'s library."""
  return sorted(function.signature.name
                for function in graph.as_graph_def().library.function)


def variable_values(variables):
  """The numpy values of a list of variables."""
  return [np.asarray(v.numpy()) for v in variables]


def assert_variables_equal(expected, actual):
  """Asserts two lists of variables (or arrays) hold equal values."""
  assert len(expected) == len(actual)
  for a, b in zip(expected, actual):
    a = np.asarray(a.numpy() if hasattr(a, "numpy") else a)
    b = np.asarray(b.numpy() if hasattr(b, "numpy") else b)
    np.testing.assert_array_equal(b, a)


class _Collect(py_logging.Handler):

  def __init__(self):
    super().__init__(level=py_logging.DEBUG)
    self.messages = []

  def emit(self, record):
    self.messages.append(record.getMessage())


@contextlib.contextmanager
def captured_logs():
  """Collects messages logged (any level) while the scope is open.

  Both absl's logger and TensorFlow's ("tensorflow", where TensorFlow's
  checkpointing logs) are captured.
  """
  handler = _Collect()
  loggers = [absl_logging.get_absl_logger(), tf.get_logger()]
  levels = [logger.level for logger in loggers]
  for logger in loggers:
    logger.setLevel(py_logging.DEBUG)
    logger.addHandler(handler)
  try:
    yield handler.messages
  finally:
    for logger, level in zip(loggers, levels):
      logger.removeHandler(handler)
      logger.setLevel(level)


def outcome(fn):
  """Runs `fn`; returns "ok" or the name of the exception type it raised."""
  try:
    fn()
  except Exception as e:  # pylint: disable=broad-except
    return type(e).__name__
  return "ok"


# Keras models and optimizers, for Keras 3 (`keras`) and Keras 2
# (`tf_keras`), whose new optimizers keep their state in plain variables and
# whose legacy optimizers keep it in slot variables.
FLAVORS = ("keras3", "tf_keras", "tf_keras_legacy")
MODEL_KINDS = ("sequential", "functional", "subclassed")


def keras_module(flavor):
  """`keras` for Keras 3, `tf_keras` for both Keras 2 flavors."""
  import keras  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  return keras if flavor == "keras3" else tf_keras


def make_optimizer(flavor):
  """A fresh Adam of `flavor`."""
  k = keras_module(flavor)
  if flavor == "tf_keras_legacy":
    return k.optimizers.legacy.Adam(learning_rate=0.01)
  return k.optimizers.Adam(learning_rate=0.01)


def create_optimizer_variables(flavor, optimizer, variables):
  """Creates every variable of `optimizer` for `variables`, untrained."""
  if flavor == "tf_keras_legacy":
    optimizer._create_all_weights(variables)  # pylint: disable=protected-access
  else:
    optimizer.build(variables)


def make_model(flavor, kind, built=True, explicit_build=True):
  """A small model with a BatchNormalization layer (non-trainable weights).

  Args:
    flavor: One of FLAVORS.
    kind: One of MODEL_KINDS.
    built: Whether the model has its weights on return. Functional models
      are always built.
    explicit_build: Whether a subclassed model builds its layers in
      `build()`. Without it, Keras 3 first builds them inside a symbolic,
      stateless scope, where no restore (TensorFlow's included) can work.
  """
  k = keras_module(flavor)
  layers = k.layers
  if kind == "sequential":
    stack = [layers.Dense(8, activation="relu"), layers.BatchNormalization(),
             layers.Dense(2)]
    if built:
      return k.Sequential([k.Input((4,))] + stack)
    return k.Sequential(stack)
  if kind == "functional":
    inputs = k.Input((4,))
    hidden = layers.Dense(8, activation="relu")(inputs)
    hidden = layers.BatchNormalization()(hidden)
    return k.Model(inputs, layers.Dense(2)(hidden))

  class Subclassed(k.Model):

    def __init__(self):
      super().__init__()
      self.first = layers.Dense(8, activation="relu")
      self.norm = layers.BatchNormalization()
      heads = [layers.Dense(1), layers.Dense(1, use_bias=False)]
      if flavor == "keras3":
        # Keras 3 does not checkpoint layers held in lists.
        self.head_a, self.head_b = heads
      else:
        self.heads = heads

    @property
    def head_layers(self):
      return (self.head_a, self.head_b) if flavor == "keras3" else self.heads

    def call(self, inputs, training=False):
      hidden = self.norm(self.first(inputs), training=training)
      return k.layers.concatenate([head(hidden) for head in self.head_layers])

  class SubclassedWithBuild(Subclassed):

    def build(self, input_shape):
      self.first.build(input_shape)
      self.norm.build((None, 8))
      for head in self.head_layers:
        head.build((None, 8))
      super().build(input_shape)

  model = SubclassedWithBuild() if explicit_build else Subclassed()
  if built:
    model(np.zeros((1, 4), np.float32))
  return model


def training_data():
  rng = np.random.RandomState(0)
  return rng.rand(16, 4).astype(np.float32), rng.rand(16, 2).astype(np.float32)


def train_step(model, optimizer):
  """One step of gradient descent on `training_data()`."""
  x, y = training_data()
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
  variables = model.trainable_variables
  optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))


def trained(flavor, kind):
  """A model and its optimizer after one training step."""
  model = make_model(flavor, kind)
  optimizer = make_optimizer(flavor)
  train_step(model, optimizer)
  return model, optimizer
