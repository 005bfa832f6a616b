"""Graph-mode checkpoints of tf_objckpt.CheckpointV1 against TensorFlow's.

Each test builds the same model twice, in its own `tf.Graph` and
`tf.compat.v1.Session`: once tracked by TensorFlow's AutoTrackable and saved
by `tf.compat.v1.train.Checkpoint`, once tracked by ours and saved by
`tf_objckpt.CheckpointV1` (see `graph_mode_testlib.Model`).
"""

import os
import types

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2
from tensorflow.python.ops import template as template_lib

import compat_util
from graph_mode_testlib import labelled_variables
from graph_mode_testlib import Model
from graph_mode_testlib import OPTIMIZERS
from graph_mode_testlib import VARIABLE_KINDS
import tf_objckpt
from tf_objckpt import util


def _trained(impl, directory, kind="resource", optimizer="adam"):
  """Trains a model a few steps and saves it; returns (model, path)."""
  model = Model(impl, kind, optimizer)
  model.initialize()
  model.train()
  return model, model.save(os.path.join(directory, impl, "ckpt"))


def _assert_values_close(expected, actual):
  assert sorted(expected) == sorted(actual)
  for name in expected:
    np.testing.assert_allclose(actual[name], expected[name], rtol=1e-6,
                               err_msg=name)


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("kind", VARIABLE_KINDS)
def test_keys_and_object_graph_equal_tensorflows(tmp_path, kind, optimizer):
  theirs, their_path = _trained("tf", tmp_path, kind, optimizer)
  ours, our_path = _trained("ours", tmp_path, kind, optimizer)
  # Same seeds and steps: the values are equal too.
  compat_util.assert_same_checkpoint(their_path, our_path)
  # The checkpoint holds the session's values under the expected keys.
  reader = tf.train.load_checkpoint(our_path)
  np.testing.assert_array_equal(
      reader.get_tensor("model/w/.ATTRIBUTES/VARIABLE_VALUE"),
      ours.session.run(ours.root.w))
  assert reader.get_tensor("save_counter/.ATTRIBUTES/VARIABLE_VALUE") == 1
  theirs.close()
  ours.close()


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("kind", VARIABLE_KINDS)
@pytest.mark.parametrize("optimizer_first", [True, False],
                         ids=["optimizer_first", "restore_first"])
@pytest.mark.parametrize("writer,reader", [("ours", "tf"), ("tf", "ours")])
def test_each_restores_the_others_checkpoints(tmp_path, writer, reader,
                                              optimizer_first, kind,
                                              optimizer):
  """Slot and non-slot optimizer variables are restored in either order."""
  saved, path = _trained(writer, tmp_path, kind, optimizer)
  expected = saved.values()
  saved.close()
  model = Model(reader, kind, optimizer, create_optimizer=optimizer_first,
                seed=2)
  status = model.restore(path)
  if not optimizer_first:
    model.create_slots()  # Slot variables are created after restore().
  with model.graph.as_default():
    status.assert_consumed().run_restore_ops(model.session)
  _assert_values_close(expected, model.values())
  model.close()


def _eager_model(kind):
  """The resource-variable model, eagerly, with tf_objckpt objects."""
  root = tf_objckpt.AutoTrackable()
  root.w = tf.compat.v1.get_variable(
      "w", [3, 2], initializer=tf.compat.v1.random_uniform_initializer(seed=3))
  root.b = tf.compat.v1.get_variable("b", [2],
                                     initializer=tf.zeros_initializer())
  optimizer = OPTIMIZERS[kind]()
  x = tf.constant([[1., 2., 3.]])
  train = lambda: optimizer.minimize(  # pylint: disable=g-long-lambda
      lambda: tf.reduce_sum(tf.square(tf.matmul(x, root.w) + root.b)),
      var_list=[root.w, root.b])
  return root, optimizer, train


def _eager_values(root, optimizer):
  return {label: variable.numpy() for label, variable in labelled_variables(
      {"w": root.w, "b": root.b}, optimizer).items()}


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_eager_reads_graph_checkpoints(tmp_path, optimizer):
  model, path = _trained("ours", tmp_path, optimizer=optimizer)
  expected = model.values()
  model.close()
  root, eager_optimizer, train = _eager_model(optimizer)
  checkpoint = tf_objckpt.CheckpointV1(model=root, optimizer=eager_optimizer)
  status = checkpoint.restore(path)
  train()  # Creates the slots, restored on creation.
  status.assert_consumed()
  assert int(checkpoint.save_counter.numpy()) == 1
  # Undo the step's effect: restoring again assigns the values directly.
  checkpoint.restore(path).assert_consumed()
  _assert_values_close(expected, _eager_values(root, eager_optimizer))


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_graph_reads_eager_checkpoints(tmp_path, optimizer):
  root, eager_optimizer, train = _eager_model(optimizer)
  for _ in range(3):
    train()
  checkpoint = tf_objckpt.CheckpointV1(model=root, optimizer=eager_optimizer)
  path = checkpoint.save(os.path.join(tmp_path, "eager", "ckpt"))
  expected = _eager_values(root, eager_optimizer)
  their_path = tf.compat.v1.train.Checkpoint(
      model=root, optimizer=eager_optimizer).save(
          os.path.join(tmp_path, "tf", "ckpt"))
  assert compat_util.signature(path) == compat_util.signature(their_path)
  model = Model("ours", optimizer=optimizer, seed=4)
  with model.graph.as_default():
    model.restore(path).assert_consumed().run_restore_ops(model.session)
  _assert_values_close(expected, model.values())
  model.close()


def _template_function():
  """Variables in nested scopes plus a nested template."""
  inner = tf.compat.v1.make_template(
      "inner", lambda: tf.compat.v1.get_variable("k", [2]))
  with tf.compat.v1.variable_scope("dense"):
    w = tf.compat.v1.get_variable("w", [2, 2])
  v = tf.compat.v1.get_variable("v", [2], use_resource=False)
  return w + v + inner()


@pytest.mark.parametrize("with_ours", [False, True],
                         ids=["tensorflows_capture", "our_capture"])
def test_template_variables_are_tracked_with_tensorflows_names(
    tmp_path, monkeypatch, with_ours):
  """Templates capturing through our capture_dependencies save as TF's do."""

  def save(checkpoint_cls, directory):
    graph = tf.Graph()
    with graph.as_default(), tf.compat.v1.Session() as session:
      template = tf.compat.v1.make_template("outer", _template_function)
      template()
      template()  # Reuses the variables; tracks nothing new.
      session.run(tf.compat.v1.global_variables_initializer())
      checkpoint = checkpoint_cls(template=template)
      return checkpoint.save(os.path.join(tmp_path, directory, "ckpt"),
                             session=session), template

  their_path, their_template = save(tf.compat.v1.train.Checkpoint, "tf")
  captured = []
  if with_ours:

    def capture_dependencies(template):
      captured.append(template.variable_scope.name)
      return util.capture_dependencies(template)

    monkeypatch.setattr(template_lib, "trackable_util", types.SimpleNamespace(
        capture_dependencies=capture_dependencies))
  our_path, our_template = save(tf_objckpt.CheckpointV1, "ours")
  expected_scopes = ["outer", "outer/inner"] if with_ours else []
  assert sorted(set(captured)) == expected_scopes
  compat_util.assert_same_checkpoint(their_path, our_path,
                                     compare_values=False)
  assert ("template/dense.Sw/.ATTRIBUTES/VARIABLE_VALUE" in
          compat_util.signature(our_path))
  assert (sorted(our_template._trackable_children()) ==  # pylint: disable=protected-access
          sorted(their_template._trackable_children()))  # pylint: disable=protected-access


def test_frozen_saver_checkpoints_restore_in_tensorflow(tmp_path):
  model, path = _trained("ours", tmp_path)
  with model.graph.as_default():
    saver = tf_objckpt.frozen_saver(model.checkpoint)
    prefix = os.path.join(tmp_path, "ckpt")  # The directory must exist.
    save_op = saver.save(prefix)
    model.train()  # Values change; the frozen saver still saves them.
    expected = model.values()
    model.session.run(save_op)
  assert util.object_metadata(prefix) == util.object_metadata(path)
  theirs = Model("tf", seed=5)
  with theirs.graph.as_default():
    theirs.restore(prefix).assert_consumed().run_restore_ops(theirs.session)
  _assert_values_close(expected, theirs.values())
  # Ours restores it too, through the frozen saver's restore ops.
  with model.graph.as_default():
    model.session.run(tf.compat.v1.global_variables_initializer())
    model.session.run(saver.restore_op(prefix))
  _assert_values_close(expected, model.values())
  model.close()
  theirs.close()


def test_object_graph_proto_is_a_trackable_object_graph(tmp_path):
  model, path = _trained("ours", tmp_path)
  proto = util.object_metadata(path)
  assert isinstance(proto, trackable_object_graph_pb2.TrackableObjectGraph)
  slot_names = sorted(slot.slot_name for node in proto.nodes
                      for slot in node.slot_variables)
  assert slot_names == ["m", "m", "v", "v"]
  model.close()
