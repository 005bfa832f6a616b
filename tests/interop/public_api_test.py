"""Our classes and modules offer TensorFlow's public names, with its signatures.

For each class or module we mirror, every public name (not starting with
"_") of TensorFlow's must exist in ours, and every callable must accept the
calls TensorFlow's accepts: the same parameters, in order, by name and kind;
ours may add parameters after them if they have defaults, and give a
default where TensorFlow has none. Annotations are not compared. The
differences we accept are listed in `ACCEPTED`, each with its reason.

Covers: tf_objckpt.util, tf_objckpt.checkpoint, tf_objckpt.api.trackable_saver,
tf_objckpt.api.load_status, tf_objckpt.base, tf_objckpt.tracking,
tf_objckpt.data_structures, tf_objckpt.graph_view, tf_objckpt.restore,
tf_objckpt.saveable_object_util, tf_objckpt.functional_saver,
tf_objckpt.checkpoint_management, tf_objckpt.checkpoint_utils,
tf_objckpt.saver, tf_objckpt.v1.saver_builders, tf_objckpt.sharding_policies,
tf_objckpt.restoring.node_restores,
tf_objckpt.api.object_checkpoints, tf_objckpt.objects.trackable,
tf_objckpt.objects.auto_trackable, tf_objckpt.objects.graph_walk,
tf_objckpt.objects.graph_serialization, tf_objckpt.api.checkpoint_manager,
tf_objckpt.v1.name_based_saver, tf_objckpt.inspection.object_metadata,
tf_objckpt.foundation.module_names.
"""

import inspect

import pytest
import tensorflow as tf
from tensorflow.python.checkpoint import checkpoint as tf_checkpoint
from tensorflow.python.checkpoint import checkpoint_management as tf_management
from tensorflow.python.checkpoint import functional_saver as tf_functional_saver
from tensorflow.python.checkpoint import graph_view as tf_graph_view
from tensorflow.python.checkpoint import restore as tf_restore
from tensorflow.python.trackable import autotrackable as tf_autotrackable
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.trackable import data_structures as tf_data_structures
from tensorflow.python.training import checkpoint_utils as tf_checkpoint_utils
from tensorflow.python.training import saver as tf_saver
from tensorflow.python.training.saving import saveable_object as tf_saveable_object
from tensorflow.python.training.saving import saveable_object_util as tf_saveable_object_util

import testlib as tl
import tf_objckpt
from tf_objckpt.api import load_status
from tf_objckpt.api import name_based_status
from tf_objckpt import base
from tf_objckpt import checkpoint_management
from tf_objckpt import checkpoint_utils
from tf_objckpt import data_structures
from tf_objckpt import functional_saver
from tf_objckpt import graph_view
from tf_objckpt import restore
from tf_objckpt import saveable_object_util
from tf_objckpt import saver
from tf_objckpt import sharding_policies
from tf_objckpt import tracking
from tf_objckpt import util
from tf_objckpt.engine import tf_compat
from tf_objckpt.v1 import saver_builders

# (label, ours, TensorFlow's). Classes, then modules.
MIRRORED = [
    ("Checkpoint", util.Checkpoint, tf_checkpoint.Checkpoint),
    ("CheckpointV1", util.CheckpointV1, tf_checkpoint.CheckpointV1),
    ("TrackableSaver", util.TrackableSaver, tf_checkpoint.TrackableSaver),
    ("CheckpointLoadStatus", load_status.CheckpointLoadStatus,
     tf_checkpoint.CheckpointLoadStatus),
    ("InitializationOnlyStatus", load_status.InitializationOnlyStatus,
     tf_checkpoint.InitializationOnlyStatus),
    ("NameBasedSaverStatus", name_based_status.NameBasedSaverStatus,
     tf_checkpoint.NameBasedSaverStatus),
    ("ObjectGraphView", graph_view.ObjectGraphView,
     tf_graph_view.ObjectGraphView),
    ("ObjectGraphProtoPrettyPrinter", util.ObjectGraphProtoPrettyPrinter,
     tf_checkpoint.ObjectGraphProtoPrettyPrinter),
    ("CheckpointManager", checkpoint_management.CheckpointManager,
     tf_management.CheckpointManager),
    ("Saver", saver.Saver, tf_saver.Saver),
    ("BaseSaverBuilder", saver_builders.BaseSaverBuilder,
     tf_saver.BaseSaverBuilder),
    ("BulkSaverBuilder", saver_builders.BulkSaverBuilder,
     tf_saver.BulkSaverBuilder),
    ("MultiDeviceSaver", functional_saver.Saver,
     tf_functional_saver.MultiDeviceSaver),
    ("List", data_structures.List, tf_data_structures.List),
    ("ListWrapper", data_structures.ListWrapper,
     tf_data_structures.ListWrapper),
    ("Mapping", data_structures.Mapping, tf_data_structures.Mapping),
    (
        "_DictWrapper",
        data_structures._DictWrapper,  # pylint: disable=protected-access
        tf_data_structures._DictWrapper),  # pylint: disable=protected-access
    ("NoDependency", data_structures.NoDependency,
     tf_data_structures.NoDependency),
    ("Trackable", base.Trackable, tf_base.Trackable),
    ("AutoTrackable", tracking.AutoTrackable, tf_autotrackable.AutoTrackable),
    ("CheckpointPosition", restore.CheckpointPosition,
     tf_restore.CheckpointPosition),
    ("module checkpoint", util, tf_checkpoint),
    ("module checkpoint_management", checkpoint_management, tf_management),
    ("module graph_view", graph_view, tf_graph_view),
    ("module saver", saver, tf_saver),
    ("module saveable_object_util", saveable_object_util,
     tf_saveable_object_util),
    ("module data_structures", data_structures, tf_data_structures),
    ("module base", base, tf_base),
    ("module functional_saver", functional_saver, tf_functional_saver),
    ("module checkpoint_utils", checkpoint_utils, tf_checkpoint_utils),
    ("module restore", restore, tf_restore),
] + ([] if tf_compat.sharding_policies is None else [
    # TensorFlow 2.15 has no sharding policies.
    ("ShardByTaskPolicy", sharding_policies.ShardByTaskPolicy,
     tf_compat.sharding_policies.ShardByTaskPolicy),
    ("MaxShardSizePolicy", sharding_policies.MaxShardSizePolicy,
     tf_compat.sharding_policies.MaxShardSizePolicy),
    ("module sharding_policies", sharding_policies,
     tf_compat.sharding_policies),
])

# (label, name): why ours differs.
ACCEPTED = {
    # Our engine is built from saveables (`Saver.from_saveables` is
    # TensorFlow's way too); TensorFlow's constructor takes each object's
    # serialized tensors.
    ("module functional_saver", "MultiDeviceSaver"):
        "constructor",
    # Load statuses are made by `restore()`, never by users: their
    # constructors take our restore coordinator.
    ("module checkpoint", "CheckpointLoadStatus"):
        "constructor",
    ("module checkpoint", "InitializationOnlyStatus"):
        "constructor",
    ("module checkpoint", "NameBasedSaverStatus"):
        "constructor",
    # `CheckpointPosition` (restore.py) is the restore walk's node: it
    # reads values through our coordinator, not a `CheckpointReader`, and
    # TensorFlow's resharding callbacks and registered-saver lookups are
    # done by our walk itself.
    ("CheckpointPosition", "restore_ops"):
        "no reader argument",
    ("CheckpointPosition", "callback"):
        "resharding",
    ("CheckpointPosition", "has_non_trivial_reshard_callback"):
        "resharding",
    ("CheckpointPosition", "update_resharding_callback"):
        "resharding",
    ("CheckpointPosition", "create_child_position"):
        "walk",
    ("CheckpointPosition", "create_slot_variable_position"):
        "walk",
    ("CheckpointPosition", "get_registered_saver_name"):
        "walk",
    # The class TensorFlow's policy packs its shards with (a new one per
    # call); ours packs with classes of its own.
    ("MaxShardSizePolicy", "MaxShardSizePartitioner"):
        "implementation",
}


def _public(namespace, module_only):
  """`{name: attribute}` of the public names of a class or module."""
  names = {}
  for name in dir(namespace):
    if name.startswith("_"):
      continue
    value = inspect.getattr_static(namespace, name)
    if module_only and (inspect.ismodule(value) or getattr(
        value, "__module__", namespace.__name__) != namespace.__name__):
      continue  # TensorFlow's imports are not its API.
    names[name] = value
  return names


def _signature(value):
  """The signature of a callable attribute, or None."""
  if isinstance(value, (staticmethod, classmethod)):
    value = value.__func__
  if isinstance(value, property) or not callable(value):
    return None
  try:
    return inspect.signature(value)
  except (TypeError, ValueError):
    return None


def _accepts_calls_of(ours, theirs):
  """Whether `ours` takes every call `theirs` takes (see module docstring)."""
  our_parameters = list(ours.parameters.values())
  their_parameters = list(theirs.parameters.values())
  if len(our_parameters) < len(their_parameters):
    return False
  for our, their in zip(our_parameters, their_parameters):
    if (our.name, our.kind) != (their.name, their.kind):
      return False
    if (their.default is not inspect.Parameter.empty and
        our.default != their.default):
      return False
  return all(extra.default is not inspect.Parameter.empty or extra.kind in (
      inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
             for extra in our_parameters[len(their_parameters):])


def _differences(label, ours, theirs):
  module_only = inspect.ismodule(theirs)
  our_names = _public(ours, module_only=False)
  differences = []
  for name, their_value in _public(theirs, module_only).items():
    if (label, name) in ACCEPTED:
      continue
    if name not in our_names:
      differences.append(f"{name}: missing")
      continue
    their_signature = _signature(their_value)
    our_signature = _signature(our_names[name])
    if their_signature is not None and (
        our_signature is None or
        not _accepts_calls_of(our_signature, their_signature)):
      differences.append(
          f"{name}: ours {our_signature}, TensorFlow's {their_signature}")
  return differences


@pytest.mark.parametrize("label,ours,theirs",
                         MIRRORED,
                         ids=[label for label, _, _ in MIRRORED])
def test_public_names_and_signatures_match_tensorflows(label, ours, theirs):
  assert not _differences(label, ours, theirs)


def test_accepted_differences_are_still_differences():
  """An entry of `ACCEPTED` that TensorFlow and we now agree on is stale."""
  mirrored = {label: (ours, theirs) for label, ours, theirs in MIRRORED}
  for label, name in ACCEPTED:
    if label not in mirrored:
      continue  # A class this TensorFlow lacks (2.15: sharding policies).
    ours, theirs = mirrored[label]
    our_value = inspect.getattr_static(ours, name, None)
    # Older TensorFlows lack some of these names (resharding came in 2.16).
    their_value = inspect.getattr_static(theirs, name, None)
    if their_value is None:
      continue
    our_signature, their_signature = (_signature(our_value),
                                      _signature(their_value))
    assert our_value is None or not (
        our_signature and their_signature and
        _accepts_calls_of(our_signature, their_signature)), (label, name)


def test_sharding_policies_module_holds_all_three_policies():
  """TensorFlow's two and our `ParallelShardsPolicy`, the top-level one."""
  assert (sharding_policies.ParallelShardsPolicy
          is tf_objckpt.ParallelShardsPolicy)
  for name in ("ShardByTaskPolicy", "MaxShardSizePolicy"):
    assert getattr(sharding_policies,
                   name).__module__ == ("tf_objckpt.engine.sharding_policies")


# What the names added for TensorFlow's sake do, against TensorFlow's.


def test_pretty_printer_names_nodes_as_tensorflow_does(tmp_path):
  variable = tf.Variable([1., 2.])
  optimizer = tf.compat.v1.train.AdamOptimizer(0.1)
  optimizer.apply_gradients([(tf.ones([2]), variable)])
  path = tf.train.Checkpoint(model=tf.Module(), v=variable,
                             optimizer=optimizer).write(str(tmp_path / "c"))
  proto = util.object_metadata(path)
  names = util.ObjectGraphProtoPrettyPrinter(proto).node_names
  assert names == tf_checkpoint.ObjectGraphProtoPrettyPrinter(proto).node_names
  assert "(root).optimizer's state 'm' for (root).v" in names.values()


def test_multi_device_saver_from_saveables_and_its_saver_def(tmp_path):
  """`from_saveables`, then `to_proto()` run in a session as TF's is."""
  prefixes = {}
  assert functional_saver.MultiDeviceSaver is functional_saver.Saver
  for impl, saver_class in (("tf", tf_functional_saver.MultiDeviceSaver),
                            ("ours", functional_saver.MultiDeviceSaver)):
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
      variable = tf.compat.v1.get_variable("v", initializer=[1., 2.])
      session.run(variable.initializer)
      saveables = tf_saveable_object_util.validate_and_slice_inputs(
          {"v": variable})
      saver_def = saver_class.from_saveables(saveables).to_proto()
      (tmp_path / impl).mkdir()
      prefixes[impl] = str(tmp_path / impl / "ckpt")
      session.run(saver_def.save_tensor_name,
                  {saver_def.filename_tensor_name: prefixes[impl]})
      session.run(variable.assign([0., 0.]))
      session.run(saver_def.restore_op_name,
                  {saver_def.filename_tensor_name: prefixes["tf"]})
      assert session.run(variable).tolist() == [1., 2.]
  assert (tf.train.load_checkpoint(
      prefixes["ours"]).get_tensor("v").tolist() == [1., 2.])


def _serialized_values(serialized_tensors):
  """`[(object id, {key: value, or {slice spec: value}})]` as numpy values.

  Objects without tensors are left out (TensorFlow lists them, under
  wrappers of its own).
  """

  def numpy(value):
    if isinstance(value, tf_saveable_object.SaveSpec):  # A deferred read.
      value = value.tensor
    value = value.numpy()
    return value.tolist() if hasattr(value, "tolist") else value

  return [(id(obj), {
      key: ({
          spec: numpy(tensor)
          for spec, tensor in value.items()
      } if isinstance(value, dict) else numpy(value))
      for key, value in tensors.items()
  })
          for obj, tensors in serialized_tensors.items()
          if tensors]


def test_gathered_serialized_tensors_are_tensorflows():
  """`TrackableSaver._gather_serialized_tensors`, which TensorFlow's tests
  call: each object's tensors by key (and slice), the object graph under
  None, for the same objects."""
  root = tf.Module()
  root.v = tf.Variable([1.0, 2.0])
  root.sliced = tf.Variable([3.0])
  root.sliced._set_save_slice_info(  # pylint: disable=protected-access
      tf.Variable.SaveSliceInfo("sliced", [2], [1], [1]))
  root.child = tf.Module()
  root.child.step = tf.Variable(7, dtype=tf.int64)
  gathered = {
      "tf":
          tf_checkpoint.TrackableSaver(tf_graph_view.ObjectGraphView(root)
                                      )._gather_serialized_tensors(None),  # pylint: disable=protected-access
      "ours":
          util.TrackableSaver(graph_view.ObjectGraphView(root)
                             )._gather_serialized_tensors(None),  # pylint: disable=protected-access
  }
  assert (_serialized_values(gathered["ours"][0]) == _serialized_values(
      gathered["tf"][0]))
  assert gathered["ours"][3] == gathered["tf"][3]


@pytest.mark.parametrize("function", ["set_list_item", "set_tuple_item"])
@pytest.mark.parametrize("index", ["0", "3", "x"])
def test_set_list_and_tuple_items(function, index):
  results = {}
  for impl, module in (("tf", tf_data_structures), ("ours", data_structures)):
    items = ["a"]
    outcome = tl.outcome(getattr(module, function), items, index, "b")
    results[impl] = (items, outcome.name)
  assert results["ours"] == results["tf"]


def test_session_lookup_is_tensorflows():
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    assert util.get_session() is session is tf_checkpoint.get_session()
  assert util.register_session_provider is (
      tf_checkpoint.register_session_provider)
