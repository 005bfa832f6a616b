"""Mismatches found on restore-on-create: TF's error types, helpful messages.

A checkpointed value that does not fit the variable created for it raises
the error type TensorFlow raises, and our message names the checkpoint
path, the checkpoint key and the object path, whatever creates the
variable: `tf_objckpt.add_variable`, a tf_keras `add_weight`, or a Keras 3
`add_weight`.

Covers: tf_objckpt.restore, tf_objckpt.restoring.restore_coordinator,
tf_objckpt.engine.read_plan, tf_objckpt.checkpoint,
tf_objckpt.api.object_checkpoints, tf_objckpt.restoring.checkpoint_position.
"""

import os

import keras
import pytest
import tensorflow as tf
import tf_keras

import testlib as tl
import tf_objckpt


@pytest.fixture(name="saved")
def _saved(tmp_path):
  source = tf.Module()
  source.sub = tf.Module()
  source.sub.i = tf.Variable(3, dtype=tf.int64)
  source.sub.v = tf.Variable([1.0, 2.0])
  return tl.write("tf", tmp_path / "ckpt", m=source)


def _assert_same_type_and_named(errors, expected_type, path, name):
  tl.assert_same_error_type(errors, expected_type)
  tl.assert_names_the_value(errors["ours"], path, f"m/sub/{name}")


@pytest.mark.parametrize("owner", sorted(tl.OWNERS))
def test_add_variable_dtype_mismatch_names_the_value(saved, owner):

  def restore(cls):
    sub = tl.OWNERS[owner]()
    target = tf_objckpt.AutoTrackable()
    target.sub = sub
    cls(m=target).read(saved)
    tf_objckpt.add_variable(sub, "i", shape=(), dtype=tf.int32, initializer=0)

  errors = tl.errors_by_impl(restore)
  _assert_same_type_and_named(errors, ValueError, saved, "i")


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
        self.i = self.add_weight(name="i",
                                 shape=(),
                                 dtype="int32",
                                 initializer="zeros")

  errors = tl.errors_by_impl(_restore_then_build(saved, Layer))
  tl.assert_same_error_type(errors, ValueError)
  assert str(errors["ours"]) == str(errors["tf"])


def test_keras3_add_weight_shape_mismatch_names_the_value(saved):

  class Layer(keras.layers.Layer):

    def build(self, input_shape):
      self.v = self.add_weight(name="v", shape=(3,))

  errors = tl.errors_by_impl(_restore_then_build(saved, Layer))
  _assert_same_type_and_named(errors, ValueError, saved, "v")


@pytest.mark.parametrize("impl", tl.IMPLS)
def test_add_variable_shape_mismatch_creates_nothing(saved, impl):
  target = tf_objckpt.AutoTrackable()
  target.sub = tf_objckpt.AutoTrackable()
  tl.IMPLS[impl].Checkpoint(m=target).read(saved)
  with pytest.raises(ValueError):
    tf_objckpt.add_variable(target.sub, "v", shape=(3,))
  # The value is still waiting: a fitting variable gets it.
  v = tf_objckpt.add_variable(target.sub, "v", shape=(2,))
  assert v.numpy().tolist() == [1.0, 2.0]


@pytest.mark.parametrize("dtype", [tf.int32, tf.float32, tf.string],
                         ids=["int32", "float", "str"])
def test_immediate_dtype_mismatch_is_invalid_argument(saved, dtype):
  value = {tf.int32: 0, tf.float32: 0.0, tf.string: "x"}[dtype]

  def restore(cls):
    target = tf.Module()
    target.sub = tf.Module()
    target.sub.i = tf.Variable(value, dtype=dtype)
    cls(m=target).read(saved)

  errors = tl.errors_by_impl(restore)
  _assert_same_type_and_named(errors, tf.errors.InvalidArgumentError, saved,
                              "i")


def test_write_to_a_path_under_a_file_is_an_op_error(tmp_path):
  blocker = tmp_path / "file"
  blocker.write_text("x")
  errors = tl.errors_by_impl(
      lambda cls: cls(v=tf.Variable(1.0)).write(os.fspath(blocker / "ckpt")))
  tl.assert_same_error_type(errors, tf.errors.OpError)


@pytest.mark.parametrize("change,expected_type",
                         [("shape", ValueError),
                          ("dtype", tf.errors.InvalidArgumentError)])
def test_attribute_variable_mismatch_assigns_nothing(saved, change,
                                                     expected_type):
  """A variable set as an attribute after the restore, its value not fitting.

  Such a variable is restored by itself, as soon as it is tracked: the
  value must still be checked before it is assigned (an assign would take
  any shape), with TensorFlow's error type, and the variable keeps its
  own value.
  """
  variables = {}

  def restore(cls):
    target = tf.Module()
    target.sub = tf.Module()
    cls(m=target).read(saved).expect_partial()
    variable = (tf.Variable([5.0, 6.0, 7.0])
                if change == "shape" else tf.Variable(5, dtype=tf.int32))
    variables[cls] = variable
    target.sub.v = variable  # Saved as float32 [1.0, 2.0].

  errors = tl.errors_by_impl(restore)
  _assert_same_type_and_named(errors, expected_type, saved, "v")
  for variable in variables.values():
    assert variable.numpy().tolist() == ([5.0, 6.0, 7.0]
                                         if change == "shape" else 5)
