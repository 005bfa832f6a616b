"""Tests of tf_objckpt.tracking.AutoTrackable, mostly against TensorFlow.

The same object structures are built with TensorFlow's AutoTrackable and
with ours; their dependency trees, `tf.train.Checkpoint` keys and object
graphs must be equal. TensorFlow objects (tf.Module, Keras layers of Keras 3
and tf_keras) must track ours, and ours must track theirs.

Covers: tf_objckpt.tracking, tf_objckpt.base, tf_objckpt.data_structures,
tf_objckpt.objects.auto_trackable, tf_objckpt.objects.trackable.
"""

import collections
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.trackable import data_structures as tf_ds

import testlib as tl
import tf_objckpt
from tf_objckpt import base
from tf_objckpt import data_structures as ds
from tf_objckpt import tracking

OURS = tracking.AutoTrackable

Pair = collections.namedtuple("Pair", ["first", "second"])


def tree(obj):
  """Ordered (name, class name, subtree) triples of the dependency tree."""
  children = obj._trackable_children()  # pylint: disable=protected-access
  result = []
  for name, child in children.items():
    if isinstance(child, tf.Variable):
      result.append((name, "Variable", child.name))
    else:
      result.append((name, type(child).__name__, tree(child)))
  return result


def build(impl, value_offset=0.0):
  """A nested structure of variables, modules, containers and AutoTrackables.

  Args:
    impl: "tf" or "ours": whose AutoTrackable and NoDependency to use.
    value_offset: Added to every variable's initial value.

  Returns:
    The root object.
  """
  lib = tl.IMPLS[impl]

  def var(name, value):
    if isinstance(value, tf.Tensor):  # Strings: change them another way.
      return tf.Variable(tf.strings.join([value, str(value_offset)]), name=name)
    return tf.Variable(value + value_offset, name=name)

  root = lib.AutoTrackable()
  root.scalar = var("scalar", 1.0)
  root.matrix = var("matrix", np.arange(6.0).reshape(2, 3))
  root.child = lib.AutoTrackable()
  root.child.v = var("child_v", 2.0)
  root.child.more = [var("more0", 3.0), {"deep": var("deep", 4.0)}]
  root.module = tf.Module()
  root.module.w = var("module_w", 5.0)
  root.items = [var("item0", 6.0), 7, [var("item2_0", 8.0)], (1, 2)]
  root.table = {
      "b": var("table_b", 9.0),
      "a": [var("table_a0", 10.0)],
      "c": "text"
  }
  root.pair = Pair(var("first", 11.0), (var("second0", 12.0), 3))
  root.shared = root.child  # One object reached by two paths.
  root.items.append(root.child.v)
  root.hidden = lib.data_structures.NoDependency(var("hidden", 13.0))
  root.strings = var("strings", tf.constant(["a", "bc"]))
  return root


def _leaf_values(root):
  """Variable values of `build()`'s structure, in a fixed order."""
  leaves = [
      root.scalar, root.matrix, root.child.v, root.child.more[0],
      root.child.more[1]["deep"], root.module.w, root.items[0],
      root.items[2][0], root.table["b"], root.table["a"][0], root.pair.first,
      root.pair.second[0], root.hidden, root.strings
  ]
  return [v.numpy().tolist() for v in leaves]


def _structure_values_differ(first, second):
  return all(a != b for a, b in zip(_leaf_values(first), _leaf_values(second)))


def test_dependency_tree_matches_tensorflow():
  ours = tree(build("ours"))
  assert ours == tree(build("tf"))
  assert [entry[0] for entry in ours] == [
      "scalar", "matrix", "child", "module", "items", "table", "pair", "shared",
      "strings"
  ]


def test_tracks_tensorflow_trackables_and_wraps_containers():
  root = build("ours")
  children = root._trackable_children()  # pylint: disable=protected-access
  assert children["scalar"] is root.scalar
  assert children["module"] is root.module
  assert children["shared"] is root.child
  assert "hidden" not in children
  assert isinstance(root.hidden, tf.Variable)
  assert isinstance(root.items, ds.ListWrapper)
  assert isinstance(root.items, list)
  assert isinstance(root.table, ds._DictWrapper)  # pylint: disable=protected-access
  assert isinstance(root.table, dict)
  assert isinstance(root.pair, ds._TupleWrapper)  # pylint: disable=protected-access
  assert isinstance(root.pair, Pair)
  assert root.pair.first.name == "first:0"


def test_savedmodel_save_type_lists_the_same_children():
  root = build("ours")
  checkpoint = root._trackable_children()  # pylint: disable=protected-access
  savedmodel = root._trackable_children(save_type="savedmodel", cache={})  # pylint: disable=protected-access
  assert list(savedmodel.items()) == list(checkpoint.items())
  assert list(
      root._trackable_children(  # pylint: disable=protected-access
          save_type=tf_base.SaveType.SAVEDMODEL).items()) == list(
              checkpoint.items())


@pytest.mark.parametrize("impl", ["tf", "ours"])
def test_reassign_and_delete_attributes(impl):
  root = tl.IMPLS[impl].AutoTrackable()
  a, b = tf.Variable(1.0), tf.Variable(2.0)
  root.x = a
  root.y = b
  root.x = b  # Replaces the dependency in place (order kept).
  names = [(name, ref is b) for name, ref in root._checkpoint_dependencies]  # pylint: disable=protected-access
  assert names == [("x", True), ("y", True)]
  del root.x
  assert list(root._trackable_children()) == ["y"]  # pylint: disable=protected-access
  assert root._lookup_dependency("x") is None  # pylint: disable=protected-access
  with pytest.raises(AttributeError):
    del root.x
  root.x = a  # Tracked again, now after "y".
  assert list(root._trackable_children()) == ["y", "x"]  # pylint: disable=protected-access


def test_delete_untracked_attribute_keeps_dependencies():
  results = {}
  for impl, lib in tl.IMPLS.items():
    root = lib.AutoTrackable()
    root.v = tf.Variable(1.0)
    root.plain = 3
    del root.plain
    results[impl] = list(root._trackable_children())  # pylint: disable=protected-access
  assert results["ours"] == results["tf"] == ["v"]


def test_setattr_tracking_flag_and_decorators():

  class Builder(OURS):

    @base.no_automatic_dependency_tracking
    def add_untracked(self, value):
      self.untracked = value

  root = Builder()
  root.add_untracked(tf.Variable(1.0))
  assert root._setattr_tracking  # pylint: disable=protected-access
  root.tracked = tf.Variable(2.0)
  with base.no_automatic_dependency_tracking_scope(root):
    root.in_scope = [tf.Variable(3.0)]
  assert type(root.in_scope) is list  # pylint: disable=unidiomatic-typecheck
  root._setattr_tracking = False  # pylint: disable=protected-access
  root.off = tf.Variable(4.0)
  root._setattr_tracking = True  # pylint: disable=protected-access
  assert list(root._trackable_children()) == ["tracked"]  # pylint: disable=protected-access


def test_manual_tracking_scope_suppresses_attribute_tracking():
  root = OURS()
  with base.no_manual_dependency_tracking_scope(root):
    root.v = tf.Variable(1.0)
  assert not root._trackable_children()  # pylint: disable=protected-access


def test_no_dependency_helper_method():
  root = OURS()
  root.v = root._no_dependency(tf.Variable(1.0))  # pylint: disable=protected-access
  root.l = root._no_dependency([tf.Variable(1.0)])  # pylint: disable=protected-access
  assert not root._trackable_children()  # pylint: disable=protected-access
  assert type(root.l) is list  # pylint: disable=unidiomatic-typecheck


def test_no_dependency_exported_at_top_level():
  assert tf_objckpt.NoDependency is ds.NoDependency
  assert tf_objckpt.AutoTrackable is OURS


def test_is_a_tensorflow_trackable():
  assert issubclass(OURS, base.Trackable)
  assert issubclass(OURS, tf_base.Trackable)


@pytest.mark.parametrize("impl", ["tf", "ours"])
def test_tf_module_tracks_autotrackable(impl):
  module = tf.Module()
  module.holder = tl.IMPLS[impl].AutoTrackable()
  module.holder.v = tf.Variable(1.0)
  module.holder.l = [tf.Variable(2.0)]
  assert module._trackable_children()["holder"] is module.holder  # pylint: disable=protected-access
  # tf.Module does not look inside non-Module trackables for variables.
  assert module.variables == ()


def _keras3_layer():
  return keras.layers.Dense(2)


def _tf_keras_layer():
  return tf_keras.layers.Dense(2)


@pytest.mark.parametrize("make_layer", [_keras3_layer, _tf_keras_layer],
                         ids=["keras3", "tf_keras"])
def test_keras_layer_tracks_our_autotrackable(make_layer, tmp_path):
  layer = make_layer()
  layer.build((None, 3))
  layer.extra = OURS()
  layer.extra.v = tf.Variable([1.0, 2.0], name="extra_v")
  layer.extra.l = [tf.Variable(3.0, name="extra_l0")]
  children = layer._trackable_children()  # pylint: disable=protected-access
  assert children["extra"] is layer.extra
  path = tf.train.Checkpoint(layer=layer).write(str(tmp_path / "ckpt"))
  keys = {name for name, _ in tf.train.list_variables(path)}
  assert "layer/extra/v/.ATTRIBUTES/VARIABLE_VALUE" in keys
  assert "layer/extra/l/0/.ATTRIBUTES/VARIABLE_VALUE" in keys


def test_tf_checkpoint_saves_same_keys_and_graph_for_ours(tmp_path):
  tf_path = tf.train.Checkpoint(obj=build("tf")).write(
      str(tmp_path / "tf" / "ckpt"))
  ours_path = tf.train.Checkpoint(obj=build("ours")).write(
      str(tmp_path / "ours" / "ckpt"))
  assert tl.keys(ours_path) == tl.keys(tf_path)
  assert "obj/table/a/0/.ATTRIBUTES/VARIABLE_VALUE" in tl.keys(ours_path)
  assert "obj/pair/first/.ATTRIBUTES/VARIABLE_VALUE" in tl.keys(ours_path)
  assert tl.object_graph(ours_path) == tl.object_graph(tf_path)


def test_our_checkpoint_saves_same_keys_and_graph_as_tensorflow(tmp_path):
  tf_path = tf.train.Checkpoint(obj=build("tf")).write(
      str(tmp_path / "tf" / "ckpt"))
  ours_path = tf_objckpt.Checkpoint(obj=build("ours")).write(
      str(tmp_path / "ours" / "ckpt"))
  assert tl.keys(ours_path) == tl.keys(tf_path)
  assert tl.object_graph(ours_path) == tl.object_graph(tf_path)


@pytest.mark.parametrize("writer,reader", tl.PAIRS)
def test_checkpoint_round_trip_between_implementations(writer, reader,
                                                       tmp_path):
  source = build("ours")
  path = tl.write(writer, tmp_path / "ckpt", obj=source)
  target = build("ours", value_offset=100.0)
  saved = _leaf_values(source)
  assert _structure_values_differ(source, target)
  status = tl.IMPLS[reader].Checkpoint(obj=target).read(path)
  status.assert_consumed()
  expected = list(saved)
  # NoDependency: not in the checkpoint.
  expected[12] = _leaf_values(target)[12]
  assert _leaf_values(target) == expected


@pytest.mark.parametrize("reader", ["tf", "ours"])
def test_restore_on_create_through_attributes_and_containers(reader, tmp_path):
  """Values queued by a restore reach variables assigned afterwards."""
  source = OURS()
  source.v = tf.Variable(1.0)
  source.l = [tf.Variable(2.0), {"k": tf.Variable(3.0)}]
  source.l.append(tf.Variable(4.0))
  source.t = (tf.Variable(5.0),)
  path = tf.train.Checkpoint(obj=source).write(str(tmp_path / "ckpt"))

  target = OURS()
  status = tl.IMPLS[reader].Checkpoint(obj=target).read(path)
  target.v = tf.Variable(0.0)
  target.l = [tf.Variable(0.0), {"k": tf.Variable(0.0)}]
  target.l.append(tf.Variable(0.0))
  target.t = (tf.Variable(0.0),)
  status.assert_consumed()
  got = [target.v, target.l[0], target.l[1]["k"], target.l[2], target.t[0]]
  assert [v.numpy() for v in got] == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_unsaveable_list_fails_checkpoint_like_tensorflow(tmp_path):
  errors = {}
  for impl, lib in tl.IMPLS.items():
    root = lib.AutoTrackable()
    root.l = [tf.Variable(1.0), tf.Variable(2.0)]
    root.l.reverse()
    with pytest.raises(ValueError) as info:
      tf.train.Checkpoint(obj=root).write(str(tmp_path / impl / "ckpt"))
    errors[impl] = type(info.value)
  assert errors["ours"] is errors["tf"] is ValueError


def test_unsaveable_dict_fails_our_checkpoint(tmp_path):
  root = OURS()
  root.d = {1: tf.Variable(1.0)}
  with pytest.raises(ValueError, match="non-string key"):
    tf_objckpt.Checkpoint(obj=root).write(str(tmp_path / "ckpt"))


def test_tensorflow_savedmodel_saves_our_objects(tmp_path):
  root = OURS()
  root.v = tf.Variable(3.0)
  root.l = [tf.Variable(4.0)]
  root.child = OURS()
  root.child.d = {"w": tf.Variable(5.0)}
  export_dir = os.fspath(tmp_path / "saved")
  tf.saved_model.save(root, export_dir)
  loaded = tf.saved_model.load(export_dir)
  assert loaded.v.numpy() == 3.0
  assert loaded.l[0].numpy() == 4.0
  assert loaded.child.d["w"].numpy() == 5.0
  # Revived as TensorFlow's own wrappers, as if TensorFlow had saved them.
  assert isinstance(loaded.l, tf_ds.ListWrapper)
  assert isinstance(loaded.child.d, tf_ds._DictWrapper)  # pylint: disable=protected-access


def test_add_trackable_child_sets_attribute():
  root = OURS()
  v = tf.Variable(1.0)
  root._add_trackable_child("v", v)  # pylint: disable=protected-access
  assert root.v is v
  assert root._trackable_children() == {"v": v}  # pylint: disable=protected-access


def test_self_assignment_does_not_rewrap():
  for lib in tl.IMPLS.values():
    root = lib.AutoTrackable()
    root.l = [tf.Variable(1.0)]
    wrapper = root.l
    root.l = root.l
    assert root.l is wrapper
