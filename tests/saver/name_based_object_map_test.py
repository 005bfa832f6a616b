"""Object maps over name-based (v1 `Saver`) checkpoints: a scope into an object.

`CheckpointOptions(object_map={"backbone": "bert/encoder/"})` restores the
variables below `backbone` from the checkpoint's scope `bert/encoder/`,
each by its name, or its name without its first scope (the new model's,
`new_encoder/dense/kernel`, or a Keras 3 model's path), eagerly, on
creation and in graph mode (`run_restore_ops`). The values are compared
with TensorFlow's `init_from_checkpoint` and its assignment map of the same
scopes. A mapped variable is matched in its scope only, even where its own
name is a key too; `assert_consumed` asks about the values of the mapped
scopes, and a missing new path fails naming it.

Covers: tf_objckpt.restoring.name_matching, tf_objckpt.restoring.name_based,
tf_objckpt.api.name_based_status, tf_objckpt.restoring.object_maps.
"""

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt

_STORED = {
    "bert/encoder/dense/kernel": np.full((2, 3), 1.0, np.float32),
    "bert/encoder/dense/bias": np.full((3,), 2.0, np.float32),
    "bert/pooler/w": np.full((3,), 3.0, np.float32),
    "dense/kernel": np.full((2, 3), 9.0, np.float32),
}
_MAP = {"backbone": "bert/encoder/"}


def _saved(tmp_path, writer="tf", stored=None):
  (tmp_path / writer).mkdir(exist_ok=True)
  return tl.write_with_saver(writer, tmp_path / writer / "model", stored or
                             _STORED)


def _backbone(scope="new_encoder"):
  backbone = tf.Module()
  with tf.name_scope(scope), tf.name_scope("dense"):
    backbone.kernel = tf.Variable(tf.zeros((2, 3)), name="kernel")
    backbone.bias = tf.Variable(tf.zeros((3,)), name="bias")
  return backbone


def _init_from_checkpoint_values(path):
  """What TensorFlow's `init_from_checkpoint` gives the same variables."""
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    with tf.compat.v1.variable_scope("new_encoder/dense"):
      kernel = tf.compat.v1.get_variable("kernel", (2, 3))
      bias = tf.compat.v1.get_variable("bias", (3,))
    tf.compat.v1.train.init_from_checkpoint(path,
                                            {"bert/encoder/": "new_encoder/"})
    session.run(tf.compat.v1.global_variables_initializer())
    return session.run([kernel, bias])


@pytest.mark.parametrize("writer", ["tf", "ours"])
def test_scope_into_object_eagerly(tmp_path, writer):
  path = _saved(tmp_path, writer)
  backbone = _backbone()
  status = tf_objckpt.Checkpoint(backbone=backbone).read(
      path, options=tf_objckpt.CheckpointOptions(object_map=_MAP))
  expected = _init_from_checkpoint_values(path)
  tl.assert_values_equal({
      "kernel": expected[0],
      "bias": expected[1]
  }, {
      "kernel": backbone.kernel.numpy(),
      "bias": backbone.bias.numpy()
  },
                         sides=tl.TENSORFLOWS_AND_OURS)
  # Its own name "dense/kernel" is a key too: the map's scope wins.
  assert backbone.kernel.numpy()[0, 0] == 1.0
  status.assert_consumed()


def test_unconsumed_value_in_the_scope_is_named(tmp_path):
  stored = dict(_STORED)
  stored["bert/encoder/dense_1/kernel"] = np.ones((3,), np.float32)
  path = _saved(tmp_path, stored=stored)
  status = tf_objckpt.Checkpoint(backbone=_backbone()).read(
      path, options=tf_objckpt.CheckpointOptions(object_map=_MAP))
  status.assert_existing_objects_matched()
  with pytest.raises(AssertionError, match="bert/encoder/dense_1/kernel"):
    status.assert_consumed()


def test_variable_missing_in_the_scope_is_named(tmp_path):
  path = _saved(tmp_path)
  backbone = _backbone()
  backbone.extra = tf.Variable(1.0, name="new_encoder/extra")
  status = tf_objckpt.Checkpoint(backbone=backbone).read(
      path, options=tf_objckpt.CheckpointOptions(object_map=_MAP))
  with pytest.raises(AssertionError, match="backbone/extra"):
    status.assert_existing_objects_matched()


def test_restore_on_create_and_missing_new_path(tmp_path):
  path = _saved(tmp_path)
  backbone = tf.Module()
  with pytest.raises(ValueError, match="'backbon' is not an object"):
    tf_objckpt.Checkpoint(backbone=backbone).read(
        path,
        options=tf_objckpt.CheckpointOptions(
            object_map={"backbon": "bert/encoder/"}))
  holder = tf_objckpt.AutoTrackable()
  holder.backbone = tf_objckpt.AutoTrackable()
  tf_objckpt.Checkpoint(root=holder).read(
      path, options=tf_objckpt.CheckpointOptions(object_map=_MAP))
  with tf.name_scope("new_encoder"), tf.name_scope("dense"):
    holder.backbone.kernel = tf.Variable(tf.zeros((2, 3)), name="kernel")
  assert holder.backbone.kernel.numpy()[0, 0] == 1.0


@pytest.mark.keras3
def test_keras3_backbone_by_its_path(tmp_path):
  path = _saved(tmp_path)
  keras = tl.keras_module("keras3")
  backbone = keras.Sequential(
      [keras.Input(
          (2,)), keras.layers.Dense(3, name="dense")],
      name="new_encoder")
  tf_objckpt.Checkpoint(backbone=backbone).read(
      path,
      options=tf_objckpt.CheckpointOptions(object_map=_MAP)).assert_consumed()
  np.testing.assert_array_equal(backbone.layers[0].kernel.numpy(),
                                _STORED["bert/encoder/dense/kernel"])


def test_graph_mode_restore_ops(tmp_path):
  # A graph's name-based restore needs every name, the save counter's too.
  path = _saved(tmp_path,
                stored=dict(_STORED, save_counter=np.array(1, np.int64)))
  with tl.GraphProgram("ours") as program:
    with tf.compat.v1.variable_scope("new_encoder/dense"):
      backbone = program.lib.AutoTrackable()
      backbone.kernel = tf.compat.v1.get_variable("kernel", (2, 3))
      backbone.bias = tf.compat.v1.get_variable("bias", (3,))
    status = program.lib.CheckpointV1(backbone=backbone).restore(
        path, options=tf_objckpt.CheckpointOptions(object_map=_MAP))
    status.run_restore_ops(program.session)
    values = program.run([backbone.kernel, backbone.bias])
  expected = _init_from_checkpoint_values(path)
  for ours, theirs in zip(values, expected):
    np.testing.assert_array_equal(ours, theirs)
