"""`graph_view.ObjectGraphView` against TensorFlow's, method by method.

The same objects are viewed by both classes: children, descendants, paths,
serialized object graphs and saveables must agree. TensorFlow's own
`save_util_v1` must get the same answers from our view as from its own.

Covers: tf_objckpt.graph_view, tf_objckpt.objects.graph_walk,
tf_objckpt.objects.graph_serialization.
"""

import pytest
import tensorflow as tf
from tensorflow.python.checkpoint import graph_view as tf_graph_view
from tensorflow.python.checkpoint import save_util_v1
from tensorflow.python.saved_model import registration
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.util import object_identity

import testlib as tl
from tf_objckpt import graph_view

_VIEWS = {
    "tf": tf_graph_view.ObjectGraphView,
    "ours": graph_view.ObjectGraphView
}


def _program():
  """A root with nesting, containers, a shared object and optimizer slots."""
  root = tl.IMPLS["ours"].AutoTrackable()
  root.dense = tf.Module()
  root.dense.kernel = tf.Variable([[1., 2.]])
  root.dense.bias = tf.Variable([0.5])
  root.layers = [tf.Module(), {"inner": tf.Variable(3.)}]
  root.layers[0].shared = root.dense.bias
  root.state = tl.Counter()
  root.optimizer = tf.compat.v1.train.MomentumOptimizer(0.1, momentum=0.9)
  root.optimizer.apply_gradients([(tf.ones_like(root.dense.kernel),
                                   root.dense.kernel)])
  extra = tf.Variable(7.)
  return root, [tf_base.TrackableReference("extra", extra)]


@pytest.fixture(name="views")
def _views():
  root, attached = _program()  # Views hold the root weakly: kept alive here.
  yield {
      impl: view(root, attached_dependencies=attached)
      for impl, view in _VIEWS.items()
  }
  del root


def _refs(references):
  return [(reference.name, id(reference.ref)) for reference in references]


def _ids(objects):
  return [id(obj) for obj in objects]


def test_root_and_attached_dependencies(views):
  assert views["ours"].root is views["tf"].root
  assert (_refs(views["ours"].attached_dependencies) == _refs(
      views["tf"].attached_dependencies))


def test_descendants_in_breadth_first_order(views):
  assert _ids(views["ours"].descendants()) == _ids(views["tf"].descendants())


def test_children_of_every_object(views):
  for obj in views["tf"].descendants():
    expected = _refs(views["tf"].list_children(obj))
    children = views["ours"].list_children(obj)
    assert _refs(children) == expected, obj
    assert all(
        isinstance(child, tf_base.TrackableReference) for child in children)
    assert ({
        name: id(child) for name, child in views["ours"].children(obj).items()
    } == {
        name: id(child) for name, child in views["tf"].children(obj).items()
    })


def test_breadth_first_traversal_paths(views):
  results = {
      impl: view.breadth_first_traversal() for impl, view in views.items()
  }
  assert _ids(results["ours"][0]) == _ids(results["tf"][0])
  paths = results["ours"][1]  # By identity: some objects are unhashable.
  assert len(paths) == len(results["tf"][1])
  for obj, path in results["tf"][1].items():
    assert _refs(paths[obj]) == _refs(path), path


def _saveable_names(saveables):
  return [(saveable.name, [spec.name
                           for spec in saveable.specs])
          for saveable in saveables]


def _assert_same_serialization(results):
  saveables, proto, feed_additions = results["ours"]
  assert proto == results["tf"][1], "ours (left), TensorFlow's (right)"
  assert any(node.slot_variables for node in proto.nodes)
  assert (sorted(_saveable_names(saveables)) == sorted(
      _saveable_names(results["tf"][0])))
  return feed_additions


def test_serialize_object_graph(views):
  results = {impl: view.serialize_object_graph() for impl, view in views.items()}
  assert not _assert_same_serialization(results)


def test_serialize_object_graph_with_a_saveables_cache():
  """Graph building: Python state is then fed, as in TensorFlow."""
  with tf.Graph().as_default():
    root, attached = _program()
    results = {}
    for impl, view in _VIEWS.items():
      cache = object_identity.ObjectIdentityWeakKeyDictionary()
      results[impl] = view(
          root, attached).serialize_object_graph(saveables_cache=cache)
      assert cache, impl
    feed_additions = _assert_same_serialization(results)
    assert list(feed_additions.values()) == list(results["tf"][2].values())


def test_frozen_saveable_objects(views):
  results = {
      impl: view.frozen_saveable_objects() for impl, view in views.items()
  }
  assert (_saveable_names(results["ours"]) == _saveable_names(results["tf"]))
  graphs = [
      saveables[-1].specs[0].tensor.numpy() for saveables in results.values()
  ]
  assert graphs[0] == graphs[1]


def test_frozen_saveable_objects_in_another_graph(views):
  graph = tf.Graph()
  saveables = views["ours"].frozen_saveable_objects(to_graph=graph)
  assert saveables[-1].specs[0].tensor.graph is graph


class _SavedByARegisteredSaver(tl.IMPLS["ours"].AutoTrackable):
  """Written by the saver registered below, which writes nothing."""


registration.register_checkpoint_saver(
    package="tf_objckpt_test",
    name="GraphViewTest",
    predicate=lambda obj: isinstance(obj, _SavedByARegisteredSaver),
    save_fn=lambda trackables, file_prefix: [],
    restore_fn=lambda trackables, merged_prefix: None)


def test_frozen_saveables_of_mapped_copies():
  """With an object map, copies save in place of their originals."""
  root = tl.IMPLS["ours"].AutoTrackable()
  root.v = tf.Variable(1.)
  root.registered = _SavedByARegisteredSaver()
  copies = object_identity.ObjectIdentityDictionary()
  copies[root.v] = tf.Variable(1.)
  copies[root.registered] = _SavedByARegisteredSaver()
  results = {
      impl: view(root).frozen_saveable_objects(object_map=copies)
      for impl, view in _VIEWS.items()
  }
  assert (_saveable_names(results["ours"][:1]) == _saveable_names(
      results["tf"][:1]))
  assert results["ours"][0].op is copies[root.v]
  assert results["tf"][0].op is copies[root.v]
  registered, = [
      saveable for saveable in results["ours"]
      if hasattr(saveable, "registered_saver_name")
  ]
  assert registered.trackables == {"registered": copies[root.registered]}


def test_tensorflows_save_util_reads_our_view(views):
  """TensorFlow's save code walks a view through its public methods."""
  results = {
      impl: save_util_v1.serialize_gathered_objects(view)
      for impl, view in views.items()
  }
  assert results["ours"][1] == results["tf"][1]
  assert results["ours"][1] == views["tf"].serialize_object_graph()[1]
