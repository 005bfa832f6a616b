"""Name-based (v1 `Saver`) checkpoints restored into Keras 3 models.

A tf.compat.v1 graph-mode model saved by `tf.compat.v1.train.Saver` keys its
values `dense/kernel`; the Keras 3 variable is `sequential/dense/kernel`.
TensorFlow's `Checkpoint.restore` matches neither; ours matches them with
`name_matching` (a departure in API.md) and reports what it matched.

Covers: tf_objckpt.restoring.name_based, tf_objckpt.restoring.name_matching,
tf_objckpt.restoring.restore_report.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt

_X = np.random.RandomState(3).rand(5, 3).astype(np.float32)


def _v1_checkpoint(tmp_path, hidden_units=8, names=("dense", "dense_1")):
  """Saves a v1 graph-mode two-layer network; returns (path, predictions)."""
  with tf.Graph().as_default():
    inputs = tf.compat.v1.placeholder(tf.float32, (None, 3))
    hidden = tf.nn.relu(tl.v1_dense(inputs, hidden_units, names[0]))
    outputs = tl.v1_dense(hidden, 2, names[1])
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      predictions = sess.run(outputs, {inputs: _X})
      path = tf.compat.v1.train.Saver().save(sess, str(tmp_path / "v1"))
  return path, predictions


def _sequential(names=("dense", "dense_1"), built=True):
  layers = [
      keras.layers.Dense(8, activation="relu", name=names[0]),
      keras.layers.Dense(2, name=names[1])
  ]
  if built:
    layers.insert(0, keras.Input((3,)))
  return keras.Sequential(layers, name="sequential")


def _functional():
  inputs = keras.Input((3,))
  hidden = keras.layers.Dense(8, activation="relu", name="dense")(inputs)
  return keras.Model(inputs,
                     keras.layers.Dense(2, name="dense_1")(hidden),
                     name="functional")


class Subclassed(keras.Model):

  def __init__(self):
    super().__init__(name="subclassed")
    self.first = keras.layers.Dense(8, activation="relu", name="dense")
    self.second = keras.layers.Dense(2, name="dense_1")

  def call(self, inputs):
    return self.second(self.first(inputs))


MODELS = {
    "sequential": _sequential,
    "sequential_unbuilt": lambda: _sequential(built=False),
    "functional": _functional,
    "subclassed_unbuilt": Subclassed,
}


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_v1_checkpoint_into_keras3_predicts_the_same(tmp_path, kind):
  path, expected = _v1_checkpoint(tmp_path)
  model = MODELS[kind]()
  status = tf_objckpt.Checkpoint(model=model).restore(path)
  np.testing.assert_allclose(model(_X), expected, rtol=1e-6, atol=1e-6)
  status.assert_consumed()
  report = status.report()
  assert sorted(value.key for value in report.restored) == [
      "dense/bias", "dense/kernel", "dense_1/bias", "dense_1/kernel"
  ]
  assert not report.unmatched and not report.objects_without_values
  # TensorFlow's Checkpoint, in the same process, matches nothing.
  tf_model = MODELS[kind]()
  tf_status = tf.train.Checkpoint(model=tf_model).restore(path)
  assert not np.allclose(tf_model(_X), expected)
  assert tl.outcome(tf_status.assert_consumed).name == "AssertionError"


def test_assignment_map_names_the_rest(tmp_path):
  path, expected = _v1_checkpoint(tmp_path, names=("encoder/hidden", "dense_1"))
  model = _sequential(names=("hidden", "dense_1"))
  options = tf_objckpt.CheckpointOptions(
      assignment_map={"encoder/": "sequential/"})
  status = tf_objckpt.Checkpoint(model=model).restore(path, options=options)
  np.testing.assert_allclose(model(_X), expected, rtol=1e-6, atol=1e-6)
  status.assert_consumed()
  keys = {value.key for value in status.report().restored}
  assert keys == {
      "encoder/hidden/kernel", "encoder/hidden/bias", "dense_1/kernel",
      "dense_1/bias"
  }


def test_report_names_what_did_not_match(tmp_path):
  path, _ = _v1_checkpoint(tmp_path)
  model = _sequential(names=("renamed", "dense_1"))
  status = tf_objckpt.Checkpoint(model=model).restore(path)
  report = status.report()
  assert sorted(value.key for value in report.restored) == [
      "dense_1/bias", "dense_1/kernel"
  ]
  assert sorted(value.key for value in report.unmatched) == [
      "dense/bias", "dense/kernel"
  ]
  assert any(
      text.endswith("_kernel (3, 8) float32")
      for text in report.objects_without_values), report
  with pytest.raises(AssertionError, match="renamed"):
    status.assert_consumed()


def test_shape_mismatch_is_an_error_and_restores_nothing(tmp_path):
  path, _ = _v1_checkpoint(tmp_path, hidden_units=4)
  model = _sequential()
  before = [w.numpy() for w in model.weights]
  with pytest.raises(ValueError) as raised:
    tf_objckpt.Checkpoint(model=model).restore(path)
  message = str(raised.value)
  assert "'dense/kernel'" in message and path in message
  assert "(3, 4)" in message and "(3, 8)" in message
  for old, new in zip(before, model.weights):
    np.testing.assert_array_equal(old, new.numpy())  # dense_1 too.


def test_shape_mismatch_raises_when_an_unbuilt_model_is_built(tmp_path):
  path, _ = _v1_checkpoint(tmp_path, hidden_units=4)
  model = Subclassed()
  tf_objckpt.Checkpoint(model=model).restore(path)
  with pytest.raises(ValueError, match="dense/kernel"):
    model(_X)
