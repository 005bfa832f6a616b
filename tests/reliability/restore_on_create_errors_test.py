"""Mismatches found on restore-on-create: TF's error types, helpful messages.

A checkpointed value that does not fit the variable created for it raises
the error type TensorFlow raises, and our message names the checkpoint
path, the checkpoint key and the object path, whatever creates the
variable: `tf_objckpt.add_variable`, a tf_keras `add_weight`, or a Keras 3
`add_weight`.
"""

import os

import keras
import pytest
import tensorflow as tf
import tf_keras

import compat_util as cu
import tf_objckpt


@pytest.fixture(name="saved")
def _saved(tmp_path):
  source = tf.Module()
  source.sub = tf.Module()
  source.sub.i = tf.Variable(3, dtype=tf.int64)
  source.sub.v = tf.Variable([1.0, 2.0])
  return cu.write("tf", tmp_path / "ckpt", m=source)


def _errors(fn):
  errors = {}
  for impl, cls in cu.CHECKPOINT_CLASSES.items():
    try:
      fn(cls)
      errors[impl] = None
    except Exception as e:  # pylint: disable=broad-except
      errors[impl] = e
  return errors


def _assert_same_type_and_named(errors, path, name):
  assert errors["tf"] is not None and errors["ours"] is not None, errors
  assert type(errors["ours"]) is type(errors["tf"]), errors
  message = str(errors["ours"])
  assert path in message, message
  assert f"m/sub/{name}/.ATTRIBUTES/VARIABLE_VALUE" in message, message
  assert f"'m/sub/{name}'" in message, message


@pytest.mark.parametrize("owner", ["ours", "tf_module"])
def test_add_variable_dtype_mismatch_names_the_value(saved, owner):
  def restore(cls):
    sub = tf_objckpt.AutoTrackable() if owner == "ours" else tf.Module()
    target = tf_objckpt.AutoTrackable()
    target.sub = sub
    cls(m=target).read(saved)
    tf_objckpt.add_variable(sub, "i", shape=(), dtype=tf.int32,
                            initializer=0)

  errors = _errors(restore)
  assert isinstance(errors["tf"], ValueError)
  _assert_same_type_and_named(errors, saved, "i")


def _restore_then_build(path, layer_cls):
  """A restore of `path` into a `layer_cls` layer built afterwards."""

  def restore(checkpoint_cls):
    target = tf.Module()
    target.sub = layer_cls()
    checkpoint_cls(m=target).read(path)
    target.sub.build((None, 3))

  return restore


@pytest.mark.parametrize("change", ["shape", "dtype"])
def test_tf_keras_add_weight_mismatch_raises_tensorflows_error(saved, change):
  """tf_keras creates the variable through TensorFlow's own restore-on-create.

  TensorFlow's initializer hands our position neither the shape nor the
  dtype, so the mismatch surfaces from the variable's creation, with
  TensorFlow's error and message for both libraries.
  """

  class Layer(tf_keras.layers.Layer):

    def build(self, input_shape):
      if change == "shape":
        self.v = self.add_weight(name="v", shape=(3,))
      else:
        self.i = self.add_weight(name="i", shape=(), dtype="int32",
                                 initializer="zeros")

  errors = _errors(_restore_then_build(saved, Layer))
  assert isinstance(errors["tf"], ValueError), errors
  assert type(errors["ours"]) is type(errors["tf"]), errors
  assert str(errors["ours"]) == str(errors["tf"])


def test_keras3_add_weight_shape_mismatch_names_the_value(saved):

  class Layer(keras.layers.Layer):

    def build(self, input_shape):
      self.v = self.add_weight(name="v", shape=(3,))

  errors = _errors(_restore_then_build(saved, Layer))
  assert isinstance(errors["tf"], ValueError)
  _assert_same_type_and_named(errors, saved, "v")


@pytest.mark.parametrize("impl", cu.IMPLS)
def test_add_variable_shape_mismatch_creates_nothing(saved, impl):
  target = tf_objckpt.AutoTrackable()
  target.sub = tf_objckpt.AutoTrackable()
  cu.CHECKPOINT_CLASSES[impl](m=target).read(saved)
  with pytest.raises(ValueError):
    tf_objckpt.add_variable(target.sub, "v", shape=(3,))
  # The value is still waiting: a fitting variable gets it.
  v = tf_objckpt.add_variable(target.sub, "v", shape=(2,))
  assert v.numpy().tolist() == [1.0, 2.0]


@pytest.mark.parametrize(
    "dtype", [tf.int32, tf.float32, tf.string], ids=["int32", "float", "str"])
def test_immediate_dtype_mismatch_is_invalid_argument(saved, dtype):
  value = {tf.int32: 0, tf.float32: 0.0, tf.string: "x"}[dtype]

  def restore(cls):
    target = tf.Module()
    target.sub = tf.Module()
    target.sub.i = tf.Variable(value, dtype=dtype)
    cls(m=target).read(saved)

  errors = _errors(restore)
  assert isinstance(errors["tf"], tf.errors.InvalidArgumentError)
  _assert_same_type_and_named(errors, saved, "i")


def test_write_to_a_path_under_a_file_is_an_op_error(tmp_path):
  blocker = tmp_path / "file"
  blocker.write_text("x")
  errors = _errors(lambda cls: cls(v=tf.Variable(1.0)).write(
      os.fspath(blocker / "ckpt")))
  assert isinstance(errors["tf"], tf.errors.OpError)
  assert type(errors["ours"]) is type(errors["tf"])
