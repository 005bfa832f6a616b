"""`tf_objckpt.restore.restore_nodes` against TensorFlow's.

Chosen nodes of a checkpoint, by node id, restore into given objects: each
node's own values, not its dependencies, through `_serialize_to_tensors`,
legacy saveables and plain variables, from checkpoints either library
wrote; the errors TensorFlow raises for bad arguments and for nodes whose
values do not match their objects' are raised with its type and words.
Ours checks every pair before assigning anything (TensorFlow assigns the
nodes before the one that fails), accepts slot variables' nodes (TensorFlow
finds only nodes reachable through dependencies), names damaged files, and
returns restore ops when graph building (TensorFlow's builds ops it does
not return). Its partial restore warns of nothing at garbage collection.

Covers: tf_objckpt.restoring.node_restores, tf_objckpt.restore,
tf_objckpt.foundation.checkpoint_keys.
"""

import gc

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.checkpoint import restore as tf_restore
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.training.saving import saveable_object as tf_saveable

import testlib as tl
from tf_objckpt import restore

_RESTORE_NODES = {"tf": tf_restore.restore_nodes, "ours": restore.restore_nodes}


class Serializes(tf_base.Trackable):
  """Saves its variables through `_serialize_to_tensors`."""

  def __init__(self, names=("a",), value=5.0):
    self.values = {name: tf.Variable(value) for name in names}

  def _serialize_to_tensors(self):
    return dict(self.values)

  def _restore_from_tensors(self, restored_tensors):
    return tf.group([
        self.values[name].assign(tensor)
        for name, tensor in restored_tensors.items()
    ])


class _Saveable(tf_saveable.SaveableObject):

  def __init__(self, variable, name):
    self._variable = variable
    super().__init__(None, [tf_saveable.SaveSpec(variable, "", name)], name)

  def restore(self, restored_tensors, restored_shapes):
    del restored_shapes
    return self._variable.assign(restored_tensors[0])


class LegacySaveables(tf_base.Trackable):
  """Saves through the legacy `_gather_saveables_for_checkpoint`."""

  def __init__(self, names=("a",), value=5.0):
    self.values = {name: tf.Variable(value) for name in names}

  def _gather_saveables_for_checkpoint(self):
    return {
        attribute: lambda name, variable=variable: _Saveable(variable, name)
        for attribute, variable in self.values.items()
    }


def _tree(kind, value):
  """A root of `kind` with a leaf of the same kind and a plain variable."""
  root = kind(value=value)
  root._track_trackable(kind(value=value + 1), "leaf")  # pylint: disable=protected-access
  root._track_trackable(tf.Variable([value, value]), "v")  # pylint: disable=protected-access
  return root


def _node_ids(path):
  """`{object path: node id}` of the checkpoint's object graph ("" the root)."""
  ids = {"": 0}
  paths = {0: ""}
  for node_id, node in enumerate(tl.object_graph(path).nodes):
    for child in node.children:
      if child.node_id not in paths:
        paths[child.node_id] = f"{paths[node_id]}/{child.local_name}".lstrip(
            "/")
        ids[paths[child.node_id]] = child.node_id
  return ids


def _values(root):
  return [
      v.numpy().tolist() for v in list(root.values.values()) +
      list(root._trackable_children()["leaf"].values.values()) +  # pylint: disable=protected-access
      [root._trackable_children()["v"]]  # pylint: disable=protected-access
  ]


@pytest.mark.parametrize("kind", [Serializes, LegacySaveables])
@pytest.mark.parametrize("writer", tl.IMPLS)
@pytest.mark.parametrize("chosen", [("",), ("leaf",), ("", "leaf")])
def test_chosen_nodes_restore_as_in_tensorflow(tmp_path, kind, writer, chosen):
  path = tl.IMPLS[writer].Checkpoint(root=_tree(kind, 5.0)).write(
      str(tmp_path / "ckpt"))
  ids = _node_ids(path)
  results = {}
  for impl, restore_nodes in _RESTORE_NODES.items():
    fresh = _tree(kind, 1.0)
    objects = {
        "": fresh,
        "leaf": fresh._trackable_children()["leaf"],  # pylint: disable=protected-access
        "v": fresh._trackable_children()["v"]
    }  # pylint: disable=protected-access
    outcome = tl.outcome(restore_nodes, path,
                         {ids[name]: objects[name] for name in chosen})
    results[impl] = (outcome.name, _values(fresh))
  tl.assert_agree(results)
  assert results["ours"][1] != _values(_tree(kind, 1.0))


@pytest.mark.parametrize("writer", tl.IMPLS)
def test_plain_variables_restore_where_tensorflows_fails(tmp_path, writer):
  """TensorFlow's restore_nodes cannot restore a variable's own node."""
  path = tl.IMPLS[writer].Checkpoint(root=_tree(Serializes, 5.0)).write(
      str(tmp_path / "ckpt"))
  node_id = _node_ids(path)["v"]
  outcomes = {}
  for impl, restore_nodes in _RESTORE_NODES.items():
    variable = tf.Variable([1.0, 1.0])
    outcomes[impl] = (tl.outcome(restore_nodes, path, {
        node_id: variable
    }).name, variable.numpy().tolist())
  assert outcomes == {
      "tf": ("ValueError", [1.0, 1.0]),
      "ours": ("ok", [5.0, 5.0])
  }


def _errors(path, make_nodes):
  """`{impl: (error type, message)}` of each library's restore_nodes."""
  errors = {}
  for impl, restore_nodes in _RESTORE_NODES.items():
    outcome = tl.outcome(restore_nodes, path, make_nodes())
    errors[impl] = (outcome.name, str(outcome.error))
  return errors


# (nodes to restore given the checkpoint's node ids, TensorFlow's words).
_BAD_ARGUMENTS = {
    "a_list": (lambda ids: [0, 1],
               "Expecting a dictionary of node_id to Trackable for "
               "nodes_to_restore."),
    "no_such_node": (lambda ids: {
        7: Serializes()
    }, "The expected node_id: 7 to Trackable <"),
    "not_a_trackable": (lambda ids: {
        0: None
    }, "Expecting a valid Trackable to node_id: 0 but got "
                        "trackable: None."),
    "values_on_one_side": (lambda ids: {
        ids["module"]: Serializes()
    }, "expects checkpointed values but checkpoint does "
                           "not contain serialized tensors for node_id: "),
    "not_as_many": (lambda ids: {
        0: Serializes(names=("a", "b"))
    }, "Size for serialized_tensors for Trackable: 2 did not "
                    "match size for serialized_tensors for checkpoint: 1."),
    "legacy_not_as_many": (lambda ids: {
        0: LegacySaveables(names=("a", "b"))
    }, "Size for saveable_objects for Trackable: 2 did "
                           "not match the size for serialized_tensors for "
                           "checkpoint: 1."),
}


@pytest.mark.parametrize("case", _BAD_ARGUMENTS)
def test_bad_arguments_raise_tensorflows_errors(tmp_path, case):
  root = Serializes()
  root._track_trackable(tf.Module(), "module")  # pylint: disable=protected-access
  path = tf.train.Checkpoint(root=root).write(str(tmp_path / "ckpt"))
  make_nodes, phrase = _BAD_ARGUMENTS[case]
  ids = _node_ids(path)
  errors = _errors(path, lambda: make_nodes(ids))
  assert {name for name, _ in errors.values()} == {"ValueError"}
  for impl, (_, message) in errors.items():
    assert phrase in message, impl
  if case not in ("a_list",):
    assert repr(path) in errors["ours"][1]  # Ours names the checkpoint.


def test_a_bad_pair_assigns_nothing(tmp_path):
  """TensorFlow restores the first node before failing on the second."""
  path = tf.train.Checkpoint(root=_tree(Serializes, 5.0)).write(
      str(tmp_path / "ckpt"))
  ids = _node_ids(path)
  values = {}
  for impl, restore_nodes in _RESTORE_NODES.items():
    good, bad = Serializes(value=1.0), Serializes(names=("a", "b"), value=1.0)
    outcome = tl.outcome(restore_nodes, path, {0: good, ids["leaf"]: bad})
    assert outcome.name == "ValueError", impl
    values[impl] = good.values["a"].numpy()
  assert values == {"tf": 5.0, "ours": 1.0}


def test_a_value_that_does_not_fit_assigns_nothing(tmp_path):
  path = tf.train.Checkpoint(root=_tree(Serializes, 5.0)).write(
      str(tmp_path / "ckpt"))
  ids = _node_ids(path)
  good, wrong_shape = Serializes(value=1.0), tf.Variable([0.0, 0.0, 0.0])
  outcome = tl.outcome(restore.restore_nodes, path, {
      0: good,
      ids["v"]: wrong_shape
  })
  assert outcome.name == "ValueError"
  assert "v/.ATTRIBUTES/VARIABLE_VALUE" in str(outcome.error)
  assert good.values["a"].numpy() == 1.0


def test_slot_variable_nodes_are_nodes(tmp_path):
  variable = tf.Variable([1.0, 2.0])
  optimizer = tf.compat.v1.train.AdamOptimizer(0.1)
  optimizer.apply_gradients([(tf.constant([1.0, 1.0]), variable)])
  path = tf.train.Checkpoint(v=variable,
                             optimizer=optimizer).write(str(tmp_path / "c"))
  proto_nodes = tl.object_graph(path).nodes
  slot_id = next(slot.slot_variable_node_id
                 for node in proto_nodes
                 for slot in node.slot_variables)
  target = tf.Variable([0.0, 0.0])
  outcome = tl.outcome(tf_restore.restore_nodes, path, {slot_id: target})
  assert outcome.name == "ValueError"  # TensorFlow: "does not exist".
  restore.restore_nodes(path, {slot_id: target})
  np.testing.assert_array_equal(target.numpy(),
                                optimizer.get_slot(variable, "m").numpy())


def test_damaged_data_file_names_it(tmp_path):
  path = tf.train.Checkpoint(root=_tree(Serializes, 5.0)).write(
      str(tmp_path / "ckpt"))
  tl.damage(path, "truncated")
  outcome = tl.outcome(restore.restore_nodes, path, {0: Serializes()})
  assert outcome.name == "DataLossError"
  assert ".data-00000-of-00001" in str(outcome.error)


def test_no_warning_of_unrestored_values_at_garbage_collection(tmp_path):
  path = tf.train.Checkpoint(root=_tree(Serializes, 5.0)).write(
      str(tmp_path / "ckpt"))
  with tl.captured_logs() as logs:
    restore.restore_nodes(path, {0: Serializes()})
    gc.collect()
  assert not [line for line in logs if "unrestored values" in line]


def test_graph_mode_returns_the_restore_ops(tmp_path):
  path = tf.train.Checkpoint(root=_tree(Serializes, 5.0)).write(
      str(tmp_path / "ckpt"))
  with tl.GraphProgram("ours") as program:
    target = Serializes(value=1.0)
    program.initialize()
    restore_ops = restore.restore_nodes(path, {0: target})
    program.run(restore_ops)
    assert program.run(target.values["a"]) == 5.0


def test_extract_saveable_name_is_tensorflows():
  for key in ("object_path/.ATTRIBUTES/123", "a/.ATTRIBUTES/",
              "object/path/ATTRIBUTES/.ATTRIBUTES/x", "/.ATTRIBUTES/a"):
    assert restore._extract_saveable_name(key) == (  # pylint: disable=protected-access
        tf_restore._extract_saveable_name(key))  # pylint: disable=protected-access
