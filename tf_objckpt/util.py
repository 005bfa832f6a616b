"""Object-based saving and restoring: `Checkpoint`, `CheckpointV1` and friends.

`TrackableSaver` writes the object graph of a root trackable together with
its values, and restores a checkpoint by walking the checkpointed object
graph (see `base.CheckpointPosition`). A restore returns a load status to
check how well the checkpoint matched the program and, when graph building,
to run the restore ops.

Checkpoints without an object graph (written by the v1 name-based `Saver`)
are restored by variable names instead (`NameBasedSaverStatus`).
"""

import abc
import contextlib
import gc
import inspect
import math
import os
import weakref

from google.protobuf import message
from tensorflow.core.protobuf import trackable_object_graph_pb2
from tensorflow.python.checkpoint import checkpoint as tf_checkpoint_lib
from tensorflow.python.client import session as session_lib
from tensorflow.python.eager import context
from tensorflow.python.eager import def_function
from tensorflow.python.framework import constant_op
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import errors
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor_shape
from tensorflow.python.framework import tensor_util
from tensorflow.python.lib.io import file_io
from tensorflow.python.ops import array_ops
from tensorflow.python.ops import gen_control_flow_ops
from tensorflow.python.ops import gen_io_ops
from tensorflow.python.ops import variable_scope
from tensorflow.python.ops import variable_v1
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.trackable import data_structures as tf_data_structures
from tensorflow.python.training import py_checkpoint_reader
from tensorflow.python.util import compat
from tensorflow.python.util import deprecation

from tf_objckpt import base
from tf_objckpt import checkpoint_management
from tf_objckpt import data_structures
from tf_objckpt import functional_saver
from tf_objckpt import graph_view as graph_view_lib
from tf_objckpt import object_identity
from tf_objckpt import saveable_object_util
from tf_objckpt import tracking
from tf_objckpt import trackable_utils

# Values read ahead for restore-on-create are capped at this many bytes.
_PREFETCH_BUDGET_BYTES = 64 << 20


def open_checkpoint(save_path):
  """Opens a checkpoint's index, raising TensorFlow errors that name it.

  Raises:
    NotFoundError: If no checkpoint exists at `save_path`.
    DataLossError: If the checkpoint's files are corrupt.
  """
  try:
    return py_checkpoint_reader.NewCheckpointReader(save_path)
  except errors.NotFoundError as e:
    raise errors.NotFoundError(
        None, None,
        f"Error when restoring from checkpoint or SavedModel at "
        f"{save_path!r}: no checkpoint found there ({e.message}). Please "
        "double-check that the path is correct. You may be missing the "
        "checkpoint suffix (e.g. the '-1' in 'path/to/ckpt-1').") from e
  except errors.OpError as e:
    raise errors.DataLossError(
        None, None,
        f"The checkpoint at {save_path!r} is corrupt or truncated and cannot "
        f"be read: {e.message}") from e


def _read_object_graph(reader, save_path):
  """The checkpoint's TrackableObjectGraph, or None if it is name-based."""
  if not reader.has_tensor(base.OBJECT_GRAPH_PROTO_KEY):
    return None
  proto = trackable_object_graph_pb2.TrackableObjectGraph()
  # A damaged file fails as a bad proto, or in the reader: as an OpError, or
  # as an IndexError for a read past the end of a truncated data file.
  try:
    proto.ParseFromString(reader.get_tensor(base.OBJECT_GRAPH_PROTO_KEY))
  except (message.DecodeError, errors.OpError, IndexError) as e:
    raise errors.DataLossError(
        None, None,
        f"The object graph stored in checkpoint {save_path!r} is corrupt: "
        f"{e}") from e
  return proto


def node_paths(object_graph_proto):
  """Names each node of an object graph by its shortest path from the root.

  Returns:
    A list of names such as "(root).model.layer.kernel", indexed by node id.
  """
  names = {0: "(root)"}
  queue = [0]
  for node_id in queue:
    node = object_graph_proto.nodes[node_id]
    for child in node.children:
      if child.node_id not in names:
        names[child.node_id] = names[node_id] + "." + child.local_name
        queue.append(child.node_id)
  # Slots last: their variables may be deeper than their optimizer. Named
  # as TensorFlow names them: "<optimizer>'s state '<slot>' for <variable>".
  for node_id, node in enumerate(object_graph_proto.nodes):
    for slot in node.slot_variables:
      original = slot.original_variable_node_id
      if slot.slot_variable_node_id not in names:
        names[slot.slot_variable_node_id] = (
            f"{names.get(node_id, node_id)}'s state '{slot.slot_name}' for "
            f"{names.get(original, original)}")
  return [names.get(node_id, f"<unreachable node {node_id}>")
          for node_id in range(len(object_graph_proto.nodes))]


class _UnrestoredValuesReport:
  """Warns, when a restore is garbage collected, about values never used.

  Lives apart from the coordinator (which must be collectable) and runs
  from a `weakref.finalize`; `expect_partial()` silences it.
  """

  def __init__(self, object_graph_proto, matched_node_ids,
               unused_attributes, ignored_proto_ids):
    self.expect_partial = False
    self._proto = object_graph_proto
    self._matched_proto_ids = matched_node_ids
    self._unused_attributes = unused_attributes
    self._ignored_proto_ids = ignored_proto_ids

  def warn_if_incomplete(self):
    if self.expect_partial:
      return
    unmatched = [node_id for node_id, node in enumerate(self._proto.nodes)
                 if node.attributes and node_id not in self._matched_proto_ids
                 and node_id not in self._ignored_proto_ids]
    if not unmatched and not self._unused_attributes:
      return
    names = node_paths(self._proto)
    logging.warning(
        "A checkpoint restore is being discarded with values that were never "
        "restored; the values are listed below. Call "
        "`status.expect_partial()` on the status returned by restore() if "
        "this is intended.")
    for node_id in unmatched:
      logging.warning("Value in checkpoint could not be found in the "
                      "restored object: %s", names[node_id])
    for node_id, attributes in self._unused_attributes.items():
      logging.warning("An attribute in the restored object could not be "
                      "found in the checkpoint. Object: %s, attribute: %s",
                      names[node_id], attributes)


def _byte_size(dims, dtype):
  """About how many bytes a value of shape `dims` and `dtype` takes."""
  return math.prod(dims) * (64 if dtype is dtypes.string else dtype.size)


def _shape_matches(variable_shape, saved_dims):
  """Whether a variable of `variable_shape` can hold a value of `saved_dims`."""
  if variable_shape.rank is None:
    return True
  dims = variable_shape.as_list()
  return dims == saved_dims or len(dims) == len(saved_dims) and all(
      dim is None or dim == saved for dim, saved in zip(dims, saved_dims))


def _expected_shape(saveable):
  """The shape a saveable's single value must have, or None if unknown.

  Variables' saveables know it; so do `_serialize_to_tensors` saveables of
  variable-like objects (Keras 3 variables), whose shape is checked here so
  that a mismatch is found before anything is assigned.
  """
  shape = getattr(saveable, "_var_shape", None)
  if shape is not None:
    return shape
  obj = getattr(saveable, "_trackable", None)
  if (obj is None or len(saveable.specs) != 1 or
      getattr(saveable, "_local_names", None) != [base.VARIABLE_VALUE_KEY]):
    return None
  shape = getattr(obj, "shape", None)
  try:
    return tensor_shape.TensorShape(shape) if shape is not None else None
  except (TypeError, ValueError):
    return None


class _CheckpointRestoreCoordinator:
  """The state of one object-based `restore()` call.

  Knows the checkpoint (object graph, dtypes, shapes), which checkpoint
  nodes are bound to which Python objects, which restores wait for objects
  not created yet, and, when graph building, the restore ops to run.
  """

  def __init__(self, object_graph_proto, save_path, save_path_tensor, reader,
               restore_op_cache, restore_op_groups, graph_view, options=None):
    """Prepares to restore `save_path` into `graph_view`'s objects.

    Args:
      object_graph_proto: The checkpoint's TrackableObjectGraph.
      save_path: The checkpoint path, a string.
      save_path_tensor: A string tensor holding (or fed) the path.
      reader: A checkpoint reader opened on `save_path`.
      restore_op_cache: A dict of restore ops by name, shared by all
        restores of one saver, so graph-mode restores reuse ops.
      restore_op_groups: The saver's `RestoreOpGroups`.
      graph_view: The `ObjectGraphView` of the objects being restored.
      options: Optional `tf.train.CheckpointOptions`: the device to read on,
        and whether to skip optimizer slot variables.
    """
    self.object_graph_proto = object_graph_proto
    self.options = options
    self.skip_slot_variables = bool(
        getattr(options, "experimental_skip_slot_variables", False))
    self._io_device = functional_saver.io_device(options) or "/cpu:0"
    self.restore_uid = ops.uid()
    self.save_path_string = save_path
    self.save_path_tensor = save_path_tensor
    self.graph_view = graph_view
    self.restore_ops = []
    self._built_restore_ops = []
    self._mismatches = []  # Errors of deferred restores (graph building).
    self._restore_op_groups = restore_op_groups
    self.restore_ops_by_name = restore_op_cache
    self.on_new_restore_ops = None
    # Interned DTypes, so that dtype checks are identity checks.
    self.dtype_map = {
        key: dtypes.as_dtype(dtype_enum) for key, dtype_enum in
        reader._GetVariableToDataTypeMap().items()}  # pylint: disable=protected-access
    self.shape_map = reader.get_variable_to_shape_map()
    self._reader = reader
    # Node id -> Python object. Weak: a pending restore must not keep the
    # program's objects alive.
    self.objects_by_node_id = weakref.WeakValueDictionary()
    self.matched_node_ids = set()
    self.seen_objects = object_identity.ObjectIdentityWeakSet()
    # Node id -> attribute names present in the checkpoint but not restored.
    self.unused_attributes = {}
    # Variable node id -> slots to restore once the variable is bound.
    self.slots_by_variable = {}
    # Optimizer node id -> slots waiting for the optimizer to be bound.
    self.slots_awaiting_optimizer = {}
    for node_id, node in enumerate(object_graph_proto.nodes):
      for slot in () if self.skip_slot_variables else node.slot_variables:
        self.slots_by_variable.setdefault(
            slot.original_variable_node_id, []).append(
                base._SlotToRestore(  # pylint: disable=protected-access
                    optimizer_id=node_id,
                    slot_variable_id=slot.slot_variable_node_id,
                    slot_name=slot.slot_name))
    # Restore-on-create reads ahead: values of deferred variables are read
    # in one RestoreV2 and kept here until their variable is created.
    self._deferred_keys = {}
    self._prefetched = {}
    self._report = _UnrestoredValuesReport(
        object_graph_proto, self.matched_node_ids, self.unused_attributes,
        self.skipped_slot_node_ids())
    weakref.finalize(self, self._report.warn_if_incomplete)

  def skipped_slot_node_ids(self):
    """Slot variable nodes left alone (`experimental_skip_slot_variables`)."""
    if not self.skip_slot_variables:
      return frozenset()
    return frozenset(slot.slot_variable_node_id
                     for node in self.object_graph_proto.nodes
                     for slot in node.slot_variables)

  @property
  def expect_partial(self):
    return self._report.expect_partial

  @expect_partial.setter
  def expect_partial(self, value):
    self._report.expect_partial = value

  def describe_key(self, key):
    """Names a checkpoint value for error messages."""
    return (f"checkpoint key {key!r} (object "
            f"{trackable_utils.object_path_of_key(key)!r}) of checkpoint "
            f"{self.save_path_string!r}")

  def report_mismatch(self, error):
    """Raises `error`, or keeps it for `raise_mismatch` (graph, deferred).

    A deferred restore runs when its object is created. Eagerly, the value
    is assigned right then, so the error is raised right then. Graph
    building, nothing is assigned before the restore ops run, so the error
    is raised when they would run (and by the assertions), and building the
    model goes on, as it does in TensorFlow.
    """
    if context.executing_eagerly() or self.on_new_restore_ops:
      raise error
    self._mismatches.append(error)

  def raise_mismatch(self):
    """Raises the first error `report_mismatch` kept, if any."""
    if self._mismatches:
      raise self._mismatches[0]

  def new_restore_ops(self, new_ops):
    """Records restore ops created after `restore()` returned."""
    self.restore_ops.extend(new_ops)
    if self.on_new_restore_ops:
      self.on_new_restore_ops(new_ops)  # pylint: disable=not-callable

  def restore_ops_to_run(self):
    """What to fetch to run every restore op so far (graph mode)."""
    return self._restore_op_groups.fetches(self.restore_ops)

  def group_built_restore_ops(self):
    """Groups the restore ops this restore built (see `RestoreOpGroups`)."""
    self._restore_op_groups.group(self._built_restore_ops)

  def node_has_values(self, node_id):
    """Whether a node or anything below it holds checkpointed values."""
    node = self.object_graph_proto.nodes[node_id]
    if node.HasField("has_checkpoint_values"):
      return node.has_checkpoint_values.value
    return bool(node.children or node.attributes or node.slot_variables or
                node.HasField("registered_saver"))

  def defer(self, trackable, local_name, position):
    """Queues `position` until `trackable` tracks a dependency `local_name`."""
    trackable._deferred_dependencies.setdefault(local_name, []).append(  # pylint: disable=protected-access
        position)
    if context.executing_eagerly() and position.is_simple_variable():
      self._deferred_keys[position.object_proto.attributes[0]
                          .checkpoint_key] = None

  def cached_restore_op(self, name, saveable):
    """The restore op an earlier restore built for `saveable`, or None.

    Graph mode only. The op reads whichever checkpoint is fed, so this
    checkpoint's value is checked against the saveable first, as for a new
    op: a mismatch fails here rather than halfway through running the ops.
    """
    if context.executing_eagerly():
      return None
    restore_op = self.restore_ops_by_name.get(name)
    if restore_op is not None:
      self._check_saveables(
          saveable_object_util.validate_and_slice_inputs({name: saveable}), ())
    return restore_op

  def cached_saveable(self, trackable, name):
    """A saveable made for `trackable` by an earlier restore, or None."""
    cache = self.graph_view.saveables_cache
    if cache is None:
      return None
    saveables = cache.get(trackable, {}).get(name)
    if saveables is None:
      return None
    if isinstance(saveables, (list, tuple)):
      return saveables[0] if len(saveables) == 1 else None
    return saveables

  def cache_saveable(self, trackable, name, saveable):
    cache = self.graph_view.saveables_cache
    if cache is not None:
      cache.setdefault(trackable, {})[name] = (saveable,)

  def read_value(self, key, shape_and_slice=""):
    """Reads one checkpointed value (restore-on-create)."""
    if not context.executing_eagerly():
      with ops.init_scope(), ops.device(self._io_device):
        value, = gen_io_ops.restore_v2(
            self.save_path_tensor, [key], [shape_and_slice],
            [self.dtype_map[key]])
      return value
    spec = _KeyToRead(key, shape_and_slice, self.dtype_map.get(key))
    return self._read_eagerly([spec])[0]

  def _read_eagerly(self, specs):
    """Reads the values of `specs`, reading ahead deferred values.

    Values of variables that are still to be created are read in the same
    RestoreV2 (up to a byte budget) and kept, so creating N variables after
    `restore()` costs one read, not N.
    """
    if not self._prefetched and not self._deferred_keys:
      return self._restore_v2(specs)  # Nothing read ahead or to read ahead.
    wanted = [(spec.name, spec.slice_spec) for spec in specs]
    missing = [spec for spec, key in zip(specs, wanted)
               if key not in self._prefetched]
    if missing:
      to_read = missing + self._read_ahead_specs(
          {spec.name for spec in missing})
      try:
        values = self._restore_v2(to_read)
      except errors.OpError:
        if len(to_read) == len(missing):
          raise
        # A value read ahead may be the unreadable one; it must not fail
        # this read. Read only what is wanted; the rest is read when needed.
        to_read = missing
        values = self._restore_v2(to_read)
      for spec, value in zip(to_read, values):
        self._prefetched[(spec.name, spec.slice_spec)] = value
    for name, _ in wanted:
      self._deferred_keys.pop(name, None)
    return [self._prefetched.pop(key) for key in wanted]

  def _read_ahead_specs(self, excluded):
    budget = _PREFETCH_BUDGET_BYTES
    extra = []
    for key in self._deferred_keys:
      if key in excluded or (key, "") in self._prefetched:
        continue
      budget -= _byte_size(self.shape_map[key], self.dtype_map[key])
      if budget < 0:
        break
      extra.append(_KeyToRead(key, "", self.dtype_map[key]))
    return extra

  def _restore_v2(self, specs):
    """One eager RestoreV2 of `specs`; errors name the checkpoint."""
    try:
      return functional_saver.eager_restore_v2(
          self.save_path_tensor, [spec.name for spec in specs],
          [spec.slice_spec for spec in specs],
          [spec.dtype.base_dtype for spec in specs],
          [_byte_size(self.shape_map.get(spec.name, ()), spec.dtype)
           for spec in specs],
          self._io_device)
    except errors.OpError as e:
      raise type(e)(
          e.node_def, e.op,
          f"Failed to read values from checkpoint {self.save_path_string!r} "
          f"(keys such as {specs[0].name!r}): {e.message}") from e

  def _check_value(self, key, dtype, variable_shape):
    """Checks that `key` holds a value of `dtype` fitting `variable_shape`.

    Raises:
      NotFoundError: If the key is missing from the checkpoint.
      InvalidArgumentError: If the dtype differs.
      ValueError: If the shape differs (`variable_shape` None: unchecked).
    """
    saved_dtype = self.dtype_map.get(key)
    if saved_dtype is None:
      raise errors.NotFoundError(None, None,
                                 f"Missing {self.describe_key(key)}.")
    # DTypes are interned, so identity settles the common case.
    if saved_dtype is not dtype and saved_dtype != dtype.base_dtype:
      raise errors.InvalidArgumentError(
          None, None,
          f"Cannot restore {self.describe_key(key)}: the checkpoint holds "
          f"dtype {saved_dtype.name} but the object expects "
          f"{dtype.base_dtype.name}.")
    if (variable_shape is not None and
        not _shape_matches(variable_shape, self.shape_map[key])):
      raise ValueError(
          f"Cannot restore {self.describe_key(key)}: the checkpoint holds "
          f"shape {tuple(self.shape_map[key])} but the variable has shape "
          f"{variable_shape}.")

  def _check_saveables(self, saveables, variables):
    """Checks keys, dtypes and shapes before anything is assigned."""
    for saveable in saveables:
      variable_shape = _expected_shape(saveable)
      for spec in saveable.specs:
        self._check_value(spec.name, spec.dtype,
                          None if spec.slice_spec else variable_shape)
    for key, variable in variables:
      self._check_value(key, variable.dtype, variable.shape)

  def restore_saveables(self, tensor_saveables, python_saveables,
                        variables=()):
    """Restores saveables now (eagerly) or builds their restore ops.

    Every value is checked before any is assigned, so a mismatch leaves the
    objects untouched.

    Args:
      tensor_saveables: `{checkpoint key: SaveableObject}`.
      python_saveables: `PythonStateSaveable`s, restored immediately.
      variables: `(checkpoint key, variable)` pairs of stock resource
        variables, restored by assigning their values (eager only).

    Returns:
      The new restore ops when graph building, else an empty list.
    """
    saveables = saveable_object_util.validate_and_slice_inputs(tensor_saveables)
    self._check_saveables(saveables, variables)
    for saveable in python_saveables:
      saveable.python_restore(
          [self._reader.get_tensor(spec.name) for spec in saveable.specs])
    if context.executing_eagerly():
      specs = [spec for saveable in saveables for spec in saveable.specs]
      specs.extend(_KeyToRead(key, "", variable.dtype)
                   for key, variable in variables)
      if specs:
        values = self._read_eagerly(specs)
        functional_saver.apply_restored(saveables, values)
        saveable_object_util.assign_variables(
            [variable for _, variable in variables],
            values[len(values) - len(variables):])
      return []
    assert not variables, "Variables are gathered only when executing eagerly."
    if not saveables:
      return []
    new_ops = functional_saver.Saver(saveables).restore(self.save_path_tensor,
                                                        self.options)
    for name, restore_op in new_ops.items():
      self.restore_ops_by_name[name] = restore_op
    self._built_restore_ops.extend(new_ops.values())
    return list(new_ops.values())


class RestoreOpGroups:
  """Graph-mode restore ops grouped to run through one no-op each.

  `Session.run` spends more Python time on each fetched op than a restore
  takes to run, so the restore ops one `restore()` builds are grouped under
  a no-op, built with them: running restore ops never adds an op. A group
  runs all of its ops, so a restore fetches only the groups whose ops it
  needs every one of, and its other ops one by one.
  """

  def __init__(self):
    self._groups = {}  # frozenset of restore ops -> the no-op running them.

  def group(self, restore_ops):
    """Groups `restore_ops` (unless empty, already grouped, or finalized)."""
    members = frozenset(restore_ops)
    if not members or members in self._groups:
      return
    graph = next(iter(members)).graph
    if graph.finalized:
      return
    with graph.as_default(), graph.control_dependencies(None):
      with graph.control_dependencies(members):
        self._groups[members] = gen_control_flow_ops.no_op(name="restore_all")

  def fetches(self, restore_ops):
    """The groups and single ops that run exactly `restore_ops`."""
    remaining = set(restore_ops)
    fetches = []
    for members, group in sorted(self._groups.items(),
                                 key=lambda item: -len(item[0])):
      if members <= remaining:
        fetches.append(group)
        remaining -= members
    fetches.extend(op for op in restore_ops if op in remaining)
    return fetches


class _KeyToRead:
  """The name, slice and dtype of one value to read (a minimal SaveSpec)."""

  __slots__ = ("name", "slice_spec", "dtype")

  def __init__(self, name, slice_spec, dtype):
    self.name = name
    self.slice_spec = slice_spec
    self.dtype = dtype


class _NameBasedRestoreCoordinator:
  """The state of restoring a name-based (v1 `Saver`) checkpoint."""

  def __init__(self, save_path, dtype_map=None):
    self.save_path = save_path
    self.dtype_map = dtype_map
    # Object -> attribute names that found no value, for assertions.
    self.unused_attributes = object_identity.ObjectIdentityWeakKeyDictionary()
    self.restore_uid = ops.uid()

  def globally_named_object_attributes(self, trackable):
    """Yields saveables named by global (variable) names for `trackable`.

    Attributes with no global name are recorded as unused (unless their
    restore is optional), so assertions fail for them.
    """
    factories = saveable_object_util.saveable_objects_from_trackable(
        trackable, tf1_saver=True)
    for attribute, factory in factories.items():
      if callable(factory):
        try:
          saveable = factory()
        except TypeError:
          if not getattr(factory(""), "optional_restore", False):
            self._record_unused(trackable, attribute)
          continue
      else:
        saveable = factory
      named = saveable_object_util.op_list_to_dict(
          [saveable], convert_variable_to_tensor=False)
      for name, op in named.items():
        yield from saveable_object_util.saveable_objects_for_op(op, name)

  def eager_restore(self, trackable):
    """Restores `trackable`'s attributes immediately (eager mode only)."""
    assert context.executing_eagerly()
    for saveable in self.globally_named_object_attributes(trackable):
      names = [spec.name for spec in saveable.specs]
      if not all(name in self.dtype_map for name in names):
        self._record_unused(trackable, saveable.name)
        continue
      with ops.device("/cpu:0"):
        restored = gen_io_ops.restore_v2(
            self.save_path, names, [spec.slice_spec for spec in saveable.specs],
            [self.dtype_map[name] for name in names])
      saveable.restore(restored, None)

  def _record_unused(self, trackable, attribute):
    self.unused_attributes.setdefault(trackable, []).append(attribute)


def _new_resource_variable(name, shape, dtype, initializer=None,
                           partition_info=None, **kwargs):
  """Creates a resource variable, never reusing one (unlike get_variable)."""
  dtype = dtypes.as_dtype(dtype)
  shape_object = tensor_shape.as_shape(shape)
  if (type(initializer) is tf_base.CheckpointInitialValueCallable and  # pylint: disable=unidiomatic-typecheck
      isinstance(initializer.checkpoint_position, base.CheckpointPosition)):
    # Our value, queued by a TensorFlow owner: check it as ours checks.
    initializer.checkpoint_position.check_initial_value(shape, dtype)
  with ops.init_scope():
    if initializer is None:
      store = variable_scope._get_default_variable_store()  # pylint: disable=protected-access
      initializer, from_value = store._get_default_initializer(  # pylint: disable=protected-access
          name=name, shape=shape_object, dtype=dtype)
    else:
      from_value = not callable(initializer)
    if from_value:
      if shape is not None:
        raise ValueError(
            f"Variable {name!r}: give either a constant initializer or a "
            "shape, not both.")
      initial_value = initializer
    else:
      if inspect.isclass(initializer):  # An initializer class: make one.
        initializer = initializer(dtype=dtype)

      shape_list = None if shape is None else shape_object.as_list()
      kwargs_for_initializer = {"dtype": dtype}
      if "partition_info" in inspect.signature(initializer).parameters:
        kwargs_for_initializer["partition_info"] = partition_info

      def initial_value():
        return initializer(shape_list, **kwargs_for_initializer)

    # A full shape is passed on so that a restored initial value of another
    # shape is an error rather than a variable of the wrong shape.
    if shape is not None and shape_object.is_fully_defined():
      kwargs["shape"] = shape_object
    return variable_v1.VariableV1(initial_value=initial_value, name=name,
                                dtype=dtype.base_dtype, use_resource=True,
                                **kwargs)


def add_variable(trackable, name, shape=None, dtype=dtypes.float32,
                 initializer=None, trainable=True):
  """Creates a variable tracked by `trackable` as `name`.

  Variable scopes do not influence it. If a restore is waiting for `name`,
  the variable starts with the checkpointed value and `initializer` is never
  called.
  """
  add_tracked = trackable._add_variable_with_custom_getter  # pylint: disable=protected-access
  return add_tracked(name=name, shape=shape, dtype=dtype,
                     initializer=initializer, getter=_new_resource_variable,
                     trainable=trainable)


def object_metadata(save_path):
  """Returns the parsed `TrackableObjectGraph` of a checkpoint.

  Raises:
    ValueError: If the checkpoint is name-based (has no object graph).
  """
  proto = _read_object_graph(open_checkpoint(save_path), save_path)
  if proto is None:
    raise ValueError(
        f"The checkpoint {save_path!r} is not object-based: it has no "
        f"{base.OBJECT_GRAPH_PROTO_KEY!r} entry. It was probably written by a "
        "name-based Saver.")
  return proto


def list_objects(root_trackable):
  """Every object saved with `root_trackable`, slot variables included."""
  view = graph_view_lib.ObjectGraphView(root_trackable)
  return view.list_objects()


def gather_initializers(root_trackable):
  """The initializers of every object saved with `root_trackable`."""
  return [obj.initializer for obj in list_objects(root_trackable)
          if getattr(obj, "initializer", None) is not None]


@contextlib.contextmanager
def capture_dependencies(template):
  """Tracks variables created in this scope as dependencies of `template`.

  Needs `template.variable_scope` to be active. A variable is tracked under
  its name relative to the template's scope; a nested template that
  captures its own variables becomes a dependency instead of them.
  """
  scope = template.variable_scope.name
  # Passed down to creators below this one, so that a nested template's
  # creator can tell this template to track it.
  this_template = (template, scope)

  def relative(name):
    return name[len(scope) + 1:]

  def creator(next_creator, name, initial_value, trackable_parent=None,
              **kwargs):
    kwargs["trackable_parent"] = this_template
    if name is None or not name.startswith(scope):
      return next_creator(name=name, initial_value=initial_value, **kwargs)
    if trackable_parent:  # Created in a nested template: track that one.
      nested, nested_scope = trackable_parent
      template._track_trackable(nested, name=relative(nested_scope),  # pylint: disable=protected-access
                                overwrite=True)
      return next_creator(name=name, initial_value=initial_value, **kwargs)

    def create_with_full_name(initializer, **inner_kwargs):
      inner_kwargs.pop("name")  # The scope-relative name; keep the full one.
      return next_creator(initial_value=initializer, name=name,
                          **inner_kwargs)

    add_tracked = template._add_variable_with_custom_getter  # pylint: disable=protected-access
    return add_tracked(initializer=initial_value, name=relative(name),
                       getter=create_with_full_name, overwrite=True,
                       **kwargs)

  with variable_scope.variable_creator_scope(creator):
    yield


@contextlib.contextmanager
def _garbage_collection_paused():
  """Pauses Python's cyclic garbage collector for one save or restore.

  A save or restore allocates a few small objects per variable; with the
  collector on, those allocations trigger full collections that walk the
  whole (large) TensorFlow heap, which costs more than the save itself.
  Nothing here creates reference cycles worth collecting early.
  """
  was_enabled = gc.isenabled()
  gc.disable()
  try:
    yield
  finally:
    if was_enabled:
      gc.enable()


def _default_session(session, action):
  """`session`, else the default session (or the one Keras provides).

  Raises:
    RuntimeError: If there is no session to `action` in.
  """
  if session is None:
    session = tf_checkpoint_lib.get_session()
  if session is None:
    raise RuntimeError(
        f"Unable to {action} in graph mode without a default session. Pass "
        "`session=`, or use `with tf.compat.v1.Session() as session:`.")
  return session


def _check_options(options):
  """Rejects `tf.train.CheckpointOptions` this library does not implement."""
  if getattr(options, "experimental_sharding_callback", None) is not None:
    raise NotImplementedError(
        "CheckpointOptions.experimental_sharding_callback is not supported "
        "by tf_objckpt: checkpoints are sharded by device only.")


class _LoadStatus(abc.ABC):
  """What a restore returns: assertions about the match, and restore ops."""

  @abc.abstractmethod
  def assert_consumed(self):
    """Raises unless every checkpointed value and object was matched."""

  @abc.abstractmethod
  def assert_existing_objects_matched(self):
    """Raises unless every existing Python object got a value."""

  @abc.abstractmethod
  def assert_nontrivial_match(self):
    """Raises if nothing beyond the root object matched."""

  @abc.abstractmethod
  def run_restore_ops(self, session=None):
    """Runs the restore ops (graph mode); requires a checkpoint."""

  @abc.abstractmethod
  def initialize_or_restore(self, session=None):
    """Restores what the checkpoint has and initializes everything else."""

  def expect_partial(self):
    """Silences the warning about values left unrestored."""
    return self


def _objects_with_values(objects):
  """The objects that save values of their own (not only dependencies)."""
  return [obj for obj in objects
          if saveable_object_util.saveable_objects_from_trackable(obj)]


def streaming_restore(status, session=None):
  """When graph building, runs restore ops as soon as they are created.

  Restore ops for dependencies added later (deferred restores) run in
  `session` as they are created. Nothing to do when executing eagerly.

  Raises:
    NotImplementedError: For name-based checkpoints.
  """
  if context.executing_eagerly():
    return
  session = _default_session(session, "stream restore ops")
  if isinstance(status, NameBasedSaverStatus):
    raise NotImplementedError(
        "Streaming restore is not supported for name-based checkpoints.")
  status.run_restore_ops(session=session)
  # pylint: disable=protected-access
  feed_dict = status._feed_dict
  status._checkpoint.on_new_restore_ops = (
      lambda new_ops: session.run(new_ops, feed_dict=feed_dict))


class CheckpointLoadStatus(_LoadStatus):
  """The status of an object-based restore.

  Values for objects that do not exist yet are restored when the objects
  are created; the assertions tell how much has been matched so far. When
  graph building, `run_restore_ops` runs the restore ops created so far.
  """

  def __init__(self, coordinator, feed_dict, graph_view):
    self._checkpoint = coordinator
    self._feed_dict = feed_dict
    self._graph_view = graph_view
    self._root = graph_view.root  # The view may hold only a weak reference.

  def assert_consumed(self):
    """Asserts every checkpointed value and every object was matched.

    Raises:
      AssertionError: If a checkpointed object with values has no Python
        object, slot variables wait for restoring, an attribute in the
        checkpoint was not restored, or an existing object got no value.
    """
    checkpoint = self._checkpoint
    names = node_paths(checkpoint.object_graph_proto)
    self.assert_existing_objects_matched()
    skipped = checkpoint.skipped_slot_node_ids()
    for node_id, node in enumerate(checkpoint.object_graph_proto.nodes):
      if (node.attributes and node_id not in skipped and
          checkpoint.objects_by_node_id.get(node_id) is None):
        raise AssertionError(
            f"Unresolved object in checkpoint {names[node_id]}: {node}")
    if checkpoint.slots_by_variable:
      raise AssertionError(
          f"Unresolved slot restorations: {checkpoint.slots_by_variable}")
    if checkpoint.unused_attributes:
      details = "\n".join(
          f"{names[node_id]} ({checkpoint.objects_by_node_id.get(node_id)}): "
          f"{attributes}"
          for node_id, attributes in checkpoint.unused_attributes.items())
      raise AssertionError(
          "Unused attributes in these objects (the attributes exist in the "
          f"checkpoint but were not restored):\n{details}")
    return self

  def assert_existing_objects_matched(self):
    """Asserts every existing object in the dependency graph got a value.

    Weaker than `assert_consumed`: checkpointed values whose objects do not
    exist yet (an unbuilt Keras layer, say) do not fail it. A value that
    did not fit an object created after `restore()` raises its error.
    """
    checkpoint = self._checkpoint
    checkpoint.raise_mismatch()
    for node_id, node in enumerate(checkpoint.object_graph_proto.nodes):
      trackable = checkpoint.objects_by_node_id.get(node_id)
      if (trackable is not None and
          trackable._update_uid < checkpoint.restore_uid):  # pylint: disable=protected-access
        raise AssertionError(
            f"Object {node} not assigned a value from checkpoint.")
    for obj in self._graph_view.list_objects(
        skip_slot_variables=checkpoint.skip_slot_variables):
      if (isinstance(obj, data_structures.TrackableDataStructure) and
          not obj._trackable_children()):  # pylint: disable=protected-access
        continue
      checkpoint.seen_objects.add(obj)
    unmatched = self._unmatched_objects()
    if unmatched:
      shown = unmatched[:10]
      raise AssertionError(
          f"Found {len(unmatched)} Python objects that were not bound to "
          "checkpointed values, likely due to changes in the Python program. "
          f"Showing {len(shown)} of {len(unmatched)} unmatched objects: "
          f"{shown}")
    return self

  def _unmatched_objects(self):
    bound = object_identity.ObjectIdentitySet(
        self._checkpoint.objects_by_node_id.values())
    return [obj for obj in _objects_with_values(
        self._checkpoint.seen_objects) if obj not in bound]

  def assert_nontrivial_match(self):
    """Asserts that something besides the root object matched."""
    self._checkpoint.raise_mismatch()
    for obj in self._graph_view.list_objects(
        skip_slot_variables=self._checkpoint.skip_slot_variables):
      self._checkpoint.seen_objects.add(obj)
    if len(self._checkpoint.objects_by_node_id) <= 1:
      unmatched = self._unmatched_objects()
      if unmatched:
        raise AssertionError(
            "Only the root object matched the checkpoint: the checkpoint "
            "probably comes from another program. Objects without a "
            f"checkpointed value: {unmatched}")
      raise AssertionError(
          "Nothing to load. No dependencies have been added to "
          f"{self._graph_view.root} yet.")
    return self

  def run_restore_ops(self, session=None):
    """Runs the restore ops created so far (graph mode).

    Raises:
      NotFoundError, InvalidArgumentError, ValueError: If a value of an
        object created after `restore()` does not fit it; nothing runs.
    """
    if context.executing_eagerly():
      return
    self._checkpoint.raise_mismatch()
    _default_session(session, "run restore ops").run(
        self._checkpoint.restore_ops_to_run(), feed_dict=self._feed_dict)

  def initialize_or_restore(self, session=None):
    """Restores matched objects and initializes the others (graph mode).

    Objects restored by this or a later `restore()` are not initialized.
    """
    if context.executing_eagerly():
      return
    session = _default_session(session, "initialize or restore")
    restore_uid = self._checkpoint.restore_uid
    bound = object_identity.ObjectIdentitySet(
        self._checkpoint.objects_by_node_id.values())
    initializers = [
        obj.initializer for obj in self._graph_view.list_objects()
        if hasattr(obj, "initializer") and obj not in bound and
        getattr(obj, "_update_uid", restore_uid - 1) < restore_uid]
    self.run_restore_ops(session=session)
    session.run(initializers)

  def expect_partial(self):
    self._checkpoint.expect_partial = True
    return self


_NO_CHECKPOINT = ("No checkpoint specified (save_path=None); nothing is "
                  "being restored.")


class InitializationOnlyStatus(_LoadStatus):
  """The status of `restore(None)`: there is nothing to restore.

  Its assertions always fail; `initialize_or_restore` initializes the
  variables (graph mode).
  """

  def __init__(self, graph_view, restore_uid):
    self._graph_view = graph_view
    self._restore_uid = restore_uid
    self._root = graph_view.root

  def assert_consumed(self):
    raise AssertionError(_NO_CHECKPOINT)

  def assert_existing_objects_matched(self):
    raise AssertionError(_NO_CHECKPOINT)

  def assert_nontrivial_match(self):
    raise AssertionError(_NO_CHECKPOINT)

  def run_restore_ops(self, session=None):
    raise AssertionError(
        "No checkpoint specified, so no restore ops are available "
        "(save_path=None to Saver.restore).")

  def initialize_or_restore(self, session=None):
    """Runs the initializers of objects not restored by a later restore."""
    if context.executing_eagerly():
      return
    initializers = [
        obj.initializer for obj in self._graph_view.list_objects()
        if getattr(obj, "initializer", None) is not None and
        getattr(obj, "_update_uid", self._restore_uid - 1) < self._restore_uid]
    _default_session(session, "initialize").run(initializers)


_DEPRECATED_RESTORE_INSTRUCTIONS = (
    "Restoring a name-based checkpoint with the object-based API matches "
    "variables by their global names, which is fragile, and adds restore ops "
    "on each call when graph building. Re-save the checkpoint with this "
    "object-based saver's save() and use the new checkpoint from now on.")


class NameBasedSaverStatus(_LoadStatus):
  """The status of restoring a name-based checkpoint by variable names."""

  @deprecation.deprecated(date=None,
                          instructions=_DEPRECATED_RESTORE_INSTRUCTIONS)
  def __init__(self, checkpoint, graph_view):
    self._checkpoint = checkpoint
    self._graph_view = graph_view
    self._optionally_restored = []
    self._root = graph_view.root

  def add_to_optionally_restored(self, var):
    """Ignores `var` in assertions (e.g. a save counter the Saver lacks)."""
    self._optionally_restored.append(var)

  def assert_consumed(self):
    """Raises if an attribute or object found no value by name."""
    unused = [(obj, attributes) for obj, attributes
              in self._checkpoint.unused_attributes.items()
              if all(obj is not x for x in self._optionally_restored)]
    if unused:
      details = "".join(f"\n    {obj}: {attributes}"
                        for obj, attributes in unused)
      raise AssertionError(
          f"Some objects had attributes which were not restored: {details}")
    for obj in self._graph_view.list_objects():
      obj._maybe_initialize_trackable()  # pylint: disable=protected-access
      if obj._update_uid < self._checkpoint.restore_uid:  # pylint: disable=protected-access
        raise AssertionError(f"Object not restored: {obj}")
    return self

  def assert_existing_objects_matched(self):
    return self.assert_consumed()

  def assert_nontrivial_match(self):
    return self.assert_consumed()

  def _gather_saveable_objects(self):
    """Globally named saveables of objects not yet restored by this call."""
    saveables = []
    for obj in self._graph_view.list_objects():
      obj._maybe_initialize_trackable()  # pylint: disable=protected-access
      if obj._update_uid >= self._checkpoint.restore_uid:  # pylint: disable=protected-access
        continue
      obj._update_uid = self._checkpoint.restore_uid  # pylint: disable=protected-access
      saveables.extend(
          self._checkpoint.globally_named_object_attributes(obj))
    return saveables

  def run_restore_ops(self, session=None):
    """Restores by name with a v1 `Saver` (graph mode)."""
    if context.executing_eagerly():
      return
    from tf_objckpt import saver as v1_saver_lib  # pylint: disable=g-import-not-at-top
    with ops.device("/cpu:0"):
      saveables = self._gather_saveable_objects()
      v1_saver_lib.Saver(saveables).restore(
          sess=_default_session(session, "restore by name"),
          save_path=self._checkpoint.save_path)

  def initialize_or_restore(self, session=None):
    self.run_restore_ops(session=session)


class _SessionWithFeedDictAdditions(session_lib.SessionInterface):
  """A session wrapper that adds fixed feeds to every `run`."""

  def __init__(self, session, feed_additions):
    self._wrapped_session = session
    self._feed_additions = feed_additions

  def run(self, fetches, feed_dict=None, **kwargs):
    feed_dict = dict(feed_dict or {})
    feed_dict.update(self._feed_additions)
    return self._wrapped_session.run(fetches=fetches, feed_dict=feed_dict,
                                     **kwargs)


class TrackableSaver:
  """Saves and restores a root trackable and everything it depends on.

  Values are matched to objects by their paths of local names, so
  checkpoints survive renaming variables and moving code. When graph
  building, the save op is built once and rebuilt only if the object graph
  changes; the path, the object graph and Python state are fed, and restore
  ops are cached per checkpoint key, so repeated calls add no ops.
  """

  def __init__(self, graph_view):
    """Configures saving for `graph_view`'s root."""
    self._graph_view = graph_view
    self._restore_path_tensor = None  # Fed with the path (graph mode).
    self._save_feeds = None  # (path tensor, object graph tensor), fed.
    self._last_save_key = None
    self._save_path_tensor = None  # The cached save's result.
    self._restore_op_cache = {}
    self._restore_op_groups = RestoreOpGroups()

  def _gather_saveables(self, object_graph_tensor=None):
    """The saveables to write, the object graph's included."""
    saveables, graph_proto, feed_additions = (
        self._graph_view.serialize_object_graph())
    serialized = graph_proto.SerializeToString()
    if object_graph_tensor is not None:
      feed_additions[object_graph_tensor] = serialized
    else:
      with ops.device("/cpu:0"):
        object_graph_tensor = constant_op.constant(serialized)
    saveables.append(base.NoRestoreSaveable(
        tensor=object_graph_tensor, name=base.OBJECT_GRAPH_PROTO_KEY))
    return saveables, serialized, feed_additions

  def _save_cached_when_graph_building(self, file_prefix, object_graph_tensor,
                                       options):
    """Builds the save op, or reuses it while the object graph is unchanged.

    Returns:
      (the path tensor, evaluating to `file_prefix` once written; the feed
      dict to run it with).
    """
    saveables, serialized_graph, feed_additions = self._gather_saveables(
        object_graph_tensor=object_graph_tensor)
    cache_key = (serialized_graph, functional_saver.io_device(options))
    if (self._last_save_key != cache_key or
        context.executing_eagerly() or ops.inside_function()):
      with ops.device("/cpu:0"):
        save_op = functional_saver.Saver(saveables).save(file_prefix, options)
        self._save_path_tensor = file_prefix
        if save_op is not None:  # Graph building: the path, once written.
          with ops.control_dependencies([save_op]):
            self._save_path_tensor = array_ops.identity(file_prefix)
      self._last_save_key = cache_key
    return self._save_path_tensor, feed_additions

  def _feed_tensors(self):
    """The graph-mode tensors fed with the file prefix and object graph."""
    if self._save_feeds is None:
      with ops.device("/cpu:0"):
        self._save_feeds = (constant_op.constant(b""),
                            constant_op.constant(b""))
    return self._save_feeds

  def build_save_ops(self, options=None):
    """Builds the graph-mode save ops now, without running them.

    A session sends its whole graph again at each run that finds new ops,
    so building everything a first save needs before running anything
    saves that cost.
    """
    with _garbage_collection_paused():
      self._save_cached_when_graph_building(*self._feed_tensors(), options)

  def save(self, file_prefix, checkpoint_number=None, session=None,
           options=None):
    """Writes a checkpoint of the root and its dependencies.

    Args:
      file_prefix: The path prefix of the checkpoint files.
      checkpoint_number: If given, appended to the prefix as "-N".
      session: The session to run the save in when graph building (default:
        the default session). Ignored eagerly.
      options: Optional `tf.train.CheckpointOptions`.

    Returns:
      The checkpoint path (a tensor inside a `tf.function`).

    Raises:
      RuntimeError: When graph building without a session to run in.
    """
    _check_options(options)
    with _garbage_collection_paused():
      return self._save(file_prefix, checkpoint_number, session, options)

  def _save(self, file_prefix, checkpoint_number, session, options):
    use_session = (not context.executing_eagerly() and
                   not ops.inside_function())
    if checkpoint_number:
      file_prefix = f"{file_prefix}-{checkpoint_number:d}"
    feed_dict = {}
    if use_session:
      session = _default_session(
          session, f"save checkpoint to {file_prefix!r}")
      file_prefix_tensor, object_graph_tensor = self._feed_tensors()
      feed_dict[file_prefix_tensor] = file_prefix
    else:
      with ops.device("/cpu:0"):
        file_prefix_tensor = ops.convert_to_tensor(file_prefix,
                                                   dtype=dtypes.string)
      object_graph_tensor = None
    if not tensor_util.is_tf_type(file_prefix):
      directory = os.path.dirname(file_prefix)
      file_io.recursive_create_dir(directory)
    save_path, feed_additions = self._save_cached_when_graph_building(
        file_prefix_tensor, object_graph_tensor, options)
    feed_dict.update(feed_additions or {})
    return session.run(save_path, feed_dict) if use_session else save_path

  def restore(self, save_path, options=None):
    """Restores a checkpoint into the root and its dependencies.

    Existing objects are restored now (eagerly) or get restore ops (graph
    building); objects added later are restored when they are tracked.
    Checkpoints without an object graph are restored by variable names.

    Args:
      save_path: A checkpoint path, or None to only initialize.
      options: Optional `tf.train.CheckpointOptions`.

    Returns:
      A `CheckpointLoadStatus`, `NameBasedSaverStatus`, or, for None, an
      `InitializationOnlyStatus`.
    """
    _check_options(options)
    if save_path is None:
      return InitializationOnlyStatus(self._graph_view, restore_uid=ops.uid())
    with _garbage_collection_paused():
      return self._restore(compat.as_str(os.fspath(save_path)), options)

  def _restore(self, save_path, options):
    reader = open_checkpoint(save_path)
    object_graph_proto = _read_object_graph(reader, save_path)
    if object_graph_proto is None:
      return self._restore_by_names(save_path, reader)
    feed_dict = None
    if context.executing_eagerly():
      with ops.device("/cpu:0"):
        path_tensor = constant_op.constant(save_path)
    else:
      if self._restore_path_tensor is None:
        with ops.device("/cpu:0"):
          self._restore_path_tensor = constant_op.constant(b"")
      path_tensor = self._restore_path_tensor
      feed_dict = {path_tensor: save_path}
    checkpoint = _CheckpointRestoreCoordinator(
        object_graph_proto=object_graph_proto, save_path=save_path,
        save_path_tensor=path_tensor, reader=reader,
        restore_op_cache=self._restore_op_cache,
        restore_op_groups=self._restore_op_groups,
        graph_view=self._graph_view, options=options)
    base.CheckpointPosition(checkpoint, 0).restore(self._graph_view.root)
    self._restore_attached_dependencies(checkpoint)
    checkpoint.raise_mismatch()
    if not context.executing_eagerly():
      checkpoint.group_built_restore_ops()
    return CheckpointLoadStatus(checkpoint, feed_dict=feed_dict,
                                graph_view=self._graph_view)

  def _restore_attached_dependencies(self, checkpoint):
    """Restores objects attached to the root without being its dependencies."""
    root_children = {child.local_name: child.node_id for child
                     in checkpoint.object_graph_proto.nodes[0].children}
    for reference in self._graph_view.attached_dependencies:
      node_id = root_children.get(reference.name)
      if (reference.name != "root" and node_id is not None and
          node_id not in checkpoint.objects_by_node_id):
        base.CheckpointPosition(checkpoint, node_id).restore(reference.ref)

  def _restore_by_names(self, save_path, reader):
    """Starts a name-based restore of a checkpoint with no object graph."""
    graph_building = not context.executing_eagerly()
    coordinator = _NameBasedRestoreCoordinator(
        save_path=save_path,
        dtype_map=None if graph_building else
        reader.get_variable_to_dtype_map())
    if not graph_building:
      for obj in self._graph_view.list_objects():
        obj._maybe_initialize_trackable()  # pylint: disable=protected-access
        obj._name_based_restores.add(coordinator)  # pylint: disable=protected-access
        obj._name_based_attribute_restore(coordinator)  # pylint: disable=protected-access
    return NameBasedSaverStatus(coordinator, graph_view=self._graph_view)


def frozen_saver(root_trackable):
  """A saver of `root_trackable`'s objects as they are now.

  Later structural changes are not seen; restoring needs a checkpoint with
  exactly this object graph. Its checkpoints are ordinary object-based
  checkpoints.
  """
  return functional_saver.Saver(
      graph_view_lib.ObjectGraphView(root_trackable).frozen_saveable_objects())


def saver_with_op_caching(obj):
  """A `TrackableSaver` for `obj` that caches saveables when graph building."""
  cache = None if context.executing_eagerly() else (
      object_identity.ObjectIdentityWeakKeyDictionary())
  view = graph_view_lib.ObjectGraphView(weakref.ref(obj),
                                        saveables_cache=cache)
  return TrackableSaver(view)


def _check_trackable(name, value, accept_weak_references):
  """Returns `value` (dereferenced if a weak reference) if it is trackable.

  Raises:
    ValueError: If it is not.
  """
  if accept_weak_references and isinstance(value, weakref.ref):
    value = value()
  if not isinstance(value, (tf_base.Trackable, def_function.Function)):
    raise ValueError(
        f"`Checkpoint` was expecting {name} to be a trackable object (an "
        f"object derived from `Trackable`), got {value!r} of type "
        f"{type(value).__name__}. Only trackable objects (variables, "
        "modules, layers, optimizers, ...) can be checkpointed.")
  return value


def _assign_trackable_arguments(checkpoint, kwargs):
  """Assigns `kwargs` as attributes of `checkpoint`, requiring trackables.

  Returns:
    `{name: trackable}` in name order, weak references dereferenced.

  Raises:
    ValueError: If a value is not trackable.
  """
  assigned = {}
  for name, value in sorted(kwargs.items(), key=lambda item: item[0]):
    if isinstance(value, tf_data_structures.NoDependency):
      value = value.value  # Tracked all the same, as TensorFlow does.
    setattr(checkpoint, name, value)
    assigned[name] = _check_trackable(
        name, getattr(checkpoint, name),
        accept_weak_references=checkpoint._ACCEPTS_WEAK_REFERENCES)  # pylint: disable=protected-access
  return assigned


class _CheckpointBase(tracking.AutoTrackable):
  """What `Checkpoint` and `CheckpointV1` share: objects and a save counter."""

  # Whether arguments may be weak references to trackables.
  _ACCEPTS_WEAK_REFERENCES = False

  def __init__(self, **kwargs):
    super().__init__()
    _assign_trackable_arguments(self, kwargs)
    self._save_counter = None  # Created lazily, for restore-on-create.
    self._save_assign_op = None
    self._saver = saver_with_op_caching(self)

  def _maybe_create_save_counter(self):
    if self._save_counter is None:
      with ops.device("/cpu:0"):
        self._save_counter = data_structures.NoDependency(add_variable(
            self, name="save_counter", initializer=0, dtype=dtypes.int64,
            trainable=False))
      self._attach_save_counter()

  def _attach_save_counter(self):
    """Hook for `Checkpoint(root=...)`, whose save counter is attached."""

  @property
  def save_counter(self):
    """An int64 variable counting saves; numbers the checkpoints."""
    self._maybe_create_save_counter()
    return self._save_counter

  def _write(self, file_prefix, session=None, options=None):
    """Writes a checkpoint, then runs the options' write callbacks."""
    output = self._saver.save(file_prefix=_as_path(file_prefix),
                              session=session, options=options)
    if tensor_util.is_tf_type(output):
      if not context.executing_eagerly():
        return output  # Inside a function: the path is a tensor.
      output = output.numpy()
    output = compat.as_str(output)
    _run_write_callbacks(options, output)
    return output

  def _save(self, file_prefix, session=None, options=None):
    """Increments the save counter, writes, and updates the state file."""
    file_prefix = _as_path(file_prefix)
    graph_building = not context.executing_eagerly()
    if graph_building:
      if ops.inside_function():
        raise NotImplementedError(
            "Calling tf.train.Checkpoint.save() from a function is not "
            "supported, as save() modifies saving metadata in ways not "
            "supported by TensorFlow Operations. Consider using "
            "tf.train.Checkpoint.write(), a lower-level API which does not "
            "update metadata. tf.train.latest_checkpoint and related APIs will "
            "not see this checkpoint.")
      session = _default_session(
          session, f"save checkpoint to {file_prefix!r}")
      new_counter = self._save_counter is None
    if graph_building:
      if self._save_assign_op is None:  # Built once, then run at each save.
        self._save_assign_op = data_structures.NoDependency(
            self._increment_save_counter())
        self._saver.build_save_ops(options)
      if new_counter:
        session.run(self.save_counter.initializer)
      count = session.run(self._save_assign_op)
    else:
      count = self._increment_save_counter().numpy()

    def update_checkpoint_state(save_path):
      record_latest = checkpoint_management.update_checkpoint_state_internal
      record_latest(save_dir=os.path.dirname(file_prefix),
                    model_checkpoint_path=save_path,
                    all_model_checkpoint_paths=[save_path],
                    save_relative_paths=True)

    options = checkpoint_management.with_write_callback(
        options, update_checkpoint_state)
    return self._write(f"{file_prefix}-{count:d}",
                       session=session, options=options)

  def _increment_save_counter(self):
    """Adds one to the save counter; returns the new count (or its op)."""
    with ops.colocate_with(self.save_counter):
      return self.save_counter.assign_add(1, read_value=True)

  def _restore(self, save_path, options=None):
    """Restores the objects and the save counter.

    The save counter is created first, so that every restore, the first
    included, finds the same objects (and, graph building, the same restore
    ops to run together).
    """
    self._maybe_create_save_counter()
    status = self._saver.restore(save_path=save_path, options=options)
    if isinstance(status, NameBasedSaverStatus):
      status.add_to_optionally_restored(self.save_counter)
    return status


def _as_path(file_prefix):
  """A path-like prefix as a string; strings and tensors unchanged."""
  if isinstance(file_prefix, os.PathLike):
    return os.fspath(file_prefix)
  return file_prefix


def _run_write_callbacks(options, save_path):
  """Calls each write callback of `options`, with the path if it takes one.

  Raises:
    AssertionError: If a callback takes more than one argument.
  """
  for callback in getattr(options, "experimental_write_callbacks", None) or ():
    num_parameters = len(inspect.signature(callback).parameters)
    if num_parameters == 0:
      callback()
    elif num_parameters == 1:
      callback(save_path)
    else:
      raise AssertionError(
          "Checkpoint write callbacks must take 0 or 1 arguments (the "
          f"checkpoint path); {callback} takes {num_parameters}.")


class CheckpointV1(_CheckpointBase):
  """Groups trackable objects for saving and restoring (TF1 API).

  Like `Checkpoint`, but `save`, `write` and `restore` work when graph
  building too: they run in `session` (default: the default session), and
  restores return restore ops to run with `run_restore_ops` or
  `initialize_or_restore`.
  """

  def write(self, file_prefix, session=None, options=None):
    """Writes a checkpoint at `file_prefix`, without numbering or state."""
    return self._write(file_prefix, session=session, options=options)

  def save(self, file_prefix, session=None, options=None):
    """Writes "<file_prefix>-<save_counter>" and updates `latest_checkpoint`."""
    return self._save(file_prefix, session=session, options=options)

  def restore(self, save_path, options=None):
    """Restores from `save_path`; returns a load status."""
    return self._restore(save_path, options=options)


class Checkpoint(_CheckpointBase):
  """Groups trackable objects for saving and restoring (TF2 API).

  Keyword arguments become dependencies under their names:

    checkpoint = Checkpoint(model=model, optimizer=optimizer)
    path = checkpoint.save("/tmp/training/ckpt")
    checkpoint.restore(path).assert_consumed()

  Restoring before variables exist restores them when they are created.
  With `root=obj`, `obj` itself is the root of the saved object graph and
  the other arguments (and the save counter) are attached to it.
  """

  _ACCEPTS_WEAK_REFERENCES = True

  def __init__(self, root=None, **kwargs):
    if root is None:
      self._attached_dependencies = None
      super().__init__(**kwargs)
      return
    tracking.AutoTrackable.__init__(self)  # pylint: disable=non-parent-init-called
    self._root = root
    root_object = _check_trackable("root", root, accept_weak_references=True)
    root_object._maybe_initialize_trackable()  # pylint: disable=protected-access
    kwargs["root"] = root
    attached = []
    for name, value in _assign_trackable_arguments(self, kwargs).items():
      existing = root_object._lookup_dependency(name)  # pylint: disable=protected-access
      if existing is None:
        attached.append(base.TrackableReference(name, value))
      elif existing is not value:
        raise ValueError(
            f"Cannot create a Checkpoint with keyword argument {name} if "
            f"root.{name} already exists.")
    self._attached_dependencies = data_structures.NoDependency(attached)
    existing_counter = root_object._lookup_dependency("save_counter")  # pylint: disable=protected-access
    self._save_counter = data_structures.NoDependency(existing_counter)
    self._save_assign_op = None
    self._saver = TrackableSaver(graph_view_lib.ObjectGraphView(
        root, attached_dependencies=attached))

  def _attach_save_counter(self):
    if self._attached_dependencies is None:
      return
    self._attached_dependencies.append(
        base.TrackableReference("save_counter", self._save_counter))
    root = self._saver._graph_view.root  # pylint: disable=protected-access
    waiting = root._deferred_dependencies.pop("save_counter", ())  # pylint: disable=protected-access
    if waiting:
      waiting[0].restore(self._save_counter)

  def write(self, file_prefix, options=None):
    """Writes a checkpoint at `file_prefix`, without numbering or state."""
    return self._write(file_prefix, options=options)

  def save(self, file_prefix, options=None):
    """Writes "<file_prefix>-<save_counter>" and updates `latest_checkpoint`."""
    return self._save(file_prefix, options=options)

  def read(self, save_path, options=None):
    """Restores a checkpoint written by `write` (no save counter handling)."""
    return self._saver.restore(save_path=save_path, options=options)

  def restore(self, save_path, options=None):
    """Restores from `save_path` (a checkpoint or a SavedModel directory).

    Returns:
      A load status.
    """
    return self._restore(_saved_model_variables_path(save_path),
                         options=options)

  def sync(self):
    """Waits for pending writes; there are none, writes are synchronous."""


def _saved_model_variables_path(save_path):
  """The checkpoint inside a SavedModel directory, else `save_path`."""
  if save_path is None:
    return None
  path = _as_path(save_path)
  if file_io.is_directory(path) and any(
      file_io.file_exists(os.path.join(path, name))
      for name in ("saved_model.pb", "saved_model.pbtxt")):
    return os.path.join(path, "variables", "variables")
  return save_path
