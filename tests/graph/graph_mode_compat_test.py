"""Graph-mode checkpoints of tf_objckpt.CheckpointV1 against TensorFlow's.

Each test builds the same model twice, in its own `tf.Graph` and
`tf.compat.v1.Session`: once tracked by TensorFlow's AutoTrackable and saved
by `tf.compat.v1.train.Checkpoint`, once tracked by ours and saved by
`tf_objckpt.CheckpointV1` (see `testlib.GraphModel`).

Covers: tf_objckpt.checkpoint, tf_objckpt.util, tf_objckpt.api.trackable_saver,
tf_objckpt.graph_view, tf_objckpt.api.object_checkpoints,
tf_objckpt.objects.graph_walk, tf_objckpt.objects.graph_serialization,
tf_objckpt.inspection.object_metadata.
"""

import os
import types

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2
from tensorflow.python.ops import template as template_lib

import testlib as tl
import tf_objckpt
from tf_objckpt import util


def _train_and_save(model, directory):
  """Trains a `GraphModel` a few steps and saves it; returns the path."""
  model.initialize()
  model.train()
  return model.save(os.path.join(directory, model.impl, "ckpt"))


@pytest.mark.parametrize("optimizer", sorted(tl.GRAPH_OPTIMIZERS))
@pytest.mark.parametrize("kind", tl.VARIABLE_KINDS)
def test_keys_and_object_graph_equal_tensorflows(tmp_path, kind, optimizer):
  paths, weights = {}, {}
  for impl in tl.IMPLS:
    with tl.GraphModel(impl, kind, optimizer) as model:
      paths[impl] = _train_and_save(model, tmp_path)
      weights[impl] = model.run(model.root.w)
  # Same seeds and steps: the values are equal too.
  tl.assert_same_checkpoint(paths["tf"], paths["ours"])
  # The checkpoint holds the session's values under the expected keys.
  reader = tf.train.load_checkpoint(paths["ours"])
  np.testing.assert_array_equal(
      reader.get_tensor("model/w/.ATTRIBUTES/VARIABLE_VALUE"), weights["ours"])
  assert reader.get_tensor("save_counter/.ATTRIBUTES/VARIABLE_VALUE") == 1


@pytest.mark.parametrize("optimizer", sorted(tl.GRAPH_OPTIMIZERS))
@pytest.mark.parametrize("kind", tl.VARIABLE_KINDS)
@pytest.mark.parametrize("optimizer_first", [True, False],
                         ids=["optimizer_first", "restore_first"])
@pytest.mark.parametrize("writer,reader", [("ours", "tf"), ("tf", "ours")])
def test_each_restores_the_others_checkpoints(tmp_path, writer, reader,
                                              optimizer_first, kind, optimizer):
  """Slot and non-slot optimizer variables are restored in either order."""
  with tl.GraphModel(writer, kind, optimizer) as saved:
    path = _train_and_save(saved, tmp_path)
    expected = saved.labelled_values()
  with tl.GraphModel(reader,
                     kind,
                     optimizer,
                     create_optimizer=optimizer_first,
                     seed=2) as model:
    status = model.checkpoint.restore(path)
    if not optimizer_first:
      model.create_slots()  # Slot variables are created after restore().
    status.assert_consumed().run_restore_ops(model.session)
    tl.assert_values_equal(expected, model.labelled_values())


def _eager_model(kind):
  """The resource-variable model, eagerly, with tf_objckpt objects."""
  root = tf_objckpt.AutoTrackable()
  root.w = tf.compat.v1.get_variable(
      "w", [3, 2], initializer=tf.compat.v1.random_uniform_initializer(seed=3))
  root.b = tf.compat.v1.get_variable("b", [2],
                                     initializer=tf.zeros_initializer())
  optimizer = tl.GRAPH_OPTIMIZERS[kind]()
  x = tf.constant([[1., 2., 3.]])
  train = lambda: optimizer.minimize(  # pylint: disable=g-long-lambda
      lambda: tf.reduce_sum(tf.square(tf.matmul(x, root.w) + root.b)),
      var_list=[root.w, root.b])
  return root, optimizer, train


def _eager_values(root, optimizer):
  return {
      label: variable.numpy()
      for label, variable in tl.labelled({
          "w": root.w,
          "b": root.b
      }, optimizer).items()
  }


@pytest.mark.parametrize("optimizer", sorted(tl.GRAPH_OPTIMIZERS))
def test_eager_reads_graph_checkpoints(tmp_path, optimizer):
  with tl.GraphModel("ours", optimizer=optimizer) as model:
    path = _train_and_save(model, tmp_path)
    expected = model.labelled_values()
  root, eager_optimizer, train = _eager_model(optimizer)
  checkpoint = tf_objckpt.CheckpointV1(model=root, optimizer=eager_optimizer)
  status = checkpoint.restore(path)
  train()  # Creates the slots, restored on creation.
  status.assert_consumed()
  assert int(checkpoint.save_counter.numpy()) == 1
  # Undo the step's effect: restoring again assigns the values directly.
  checkpoint.restore(path).assert_consumed()
  tl.assert_values_equal(expected, _eager_values(root, eager_optimizer))


@pytest.mark.parametrize("optimizer", sorted(tl.GRAPH_OPTIMIZERS))
def test_graph_reads_eager_checkpoints(tmp_path, optimizer):
  root, eager_optimizer, train = _eager_model(optimizer)
  for _ in range(3):
    train()
  checkpoint = tf_objckpt.CheckpointV1(model=root, optimizer=eager_optimizer)
  path = checkpoint.save(os.path.join(tmp_path, "eager", "ckpt"))
  expected = _eager_values(root, eager_optimizer)
  their_path = tf.compat.v1.train.Checkpoint(
      model=root,
      optimizer=eager_optimizer).save(os.path.join(tmp_path, "tf", "ckpt"))
  assert tl.signature(path) == tl.signature(their_path)
  with tl.GraphModel("ours", optimizer=optimizer, seed=4) as model:
    model.checkpoint.restore(path).assert_consumed().run_restore_ops(
        model.session)
    tl.assert_values_equal(expected, model.labelled_values())


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

  def save(impl):
    with tl.GraphProgram(impl) as program:
      template = tf.compat.v1.make_template("outer", _template_function)
      template()
      template()  # Reuses the variables; tracks nothing new.
      program.initialize()
      checkpoint = program.lib.CheckpointV1(template=template)
      return checkpoint.save(os.path.join(tmp_path, impl, "ckpt"),
                             session=program.session), template

  their_path, their_template = save("tf")
  captured = []
  if with_ours:

    def capture_dependencies(template):
      captured.append(template.variable_scope.name)
      return util.capture_dependencies(template)

    monkeypatch.setattr(
        template_lib, "trackable_util",
        types.SimpleNamespace(capture_dependencies=capture_dependencies))
  our_path, our_template = save("ours")
  expected_scopes = ["outer", "outer/inner"] if with_ours else []
  assert sorted(set(captured)) == expected_scopes
  tl.assert_same_checkpoint(their_path, our_path, compare_values=False)
  assert ("template/dense.Sw/.ATTRIBUTES/VARIABLE_VALUE"
          in tl.signature(our_path))
  assert (sorted(our_template._trackable_children()) ==  # pylint: disable=protected-access
          sorted(their_template._trackable_children()))  # pylint: disable=protected-access


def test_frozen_saver_checkpoints_restore_in_tensorflow(tmp_path):
  with tl.GraphModel("ours") as model:
    path = _train_and_save(model, tmp_path)
    saver = tf_objckpt.frozen_saver(model.checkpoint)
    prefix = os.path.join(tmp_path, "ckpt")  # The directory must exist.
    save_op = saver.save(prefix)
    model.train()  # Values change; the frozen saver still saves them.
    expected = model.labelled_values()
    model.run(save_op)
    assert util.object_metadata(prefix) == util.object_metadata(path)
    with tl.GraphModel("tf", seed=5) as theirs:
      theirs.checkpoint.restore(prefix).assert_consumed().run_restore_ops(
          theirs.session)
      tl.assert_values_equal(expected, theirs.labelled_values())
    # Ours restores it too, through the frozen saver's restore ops.
    model.initialize()
    model.run(saver.restore_op(prefix))
    tl.assert_values_equal(expected, model.labelled_values())


def test_object_graph_proto_is_a_trackable_object_graph(tmp_path):
  with tl.GraphModel("ours") as model:
    path = _train_and_save(model, tmp_path)
  proto = util.object_metadata(path)
  assert isinstance(proto, trackable_object_graph_pb2.TrackableObjectGraph)
  slot_names = sorted(
      slot.slot_name for node in proto.nodes for slot in node.slot_variables)
  assert slot_names == ["m", "m", "v", "v"]
