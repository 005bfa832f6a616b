"""The core of object-based checkpointing: `Trackable` and `CheckpointPosition`.

A `Trackable` names its dependencies (other trackables) and its own state
(saveables). Checkpoints store that graph of objects, so restoring matches
objects by their paths of local names rather than by global variable names.

A `CheckpointPosition` points at one node of a checkpoint's object graph.
Restoring walks the checkpoint breadth first, binding each node to the
Python object at the same path. A node whose object does not exist yet is
queued in its parent's `_deferred_dependencies` and restored when the parent
starts tracking an object under that name ("restore-on-create").

Our `Trackable` subclasses TensorFlow's, so that TensorFlow's containers
(Keras layers, `tf.Module`) track our objects; and our positions offer the
methods TensorFlow's trackables call on theirs, so TensorFlow's objects keep
our positions in their deferred-dependency queues.
"""

import collections
import contextlib
import functools
from typing import Any, NamedTuple

from tensorflow.python.eager import context
from tensorflow.python.framework import constant_op
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import errors
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor_shape
from tensorflow.python.ops import gen_control_flow_ops
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.trackable import base as tf_base

from tf_objckpt import saveable_object
from tf_objckpt import saveable_object_util
from tf_objckpt import trackable_utils

# The checkpoint key of the serialized TrackableObjectGraph: TensorFlow's
# own, so that either library finds the other's object graph.
OBJECT_GRAPH_PROTO_KEY = tf_base.OBJECT_GRAPH_PROTO_KEY
# The attribute name of a variable's value.
VARIABLE_VALUE_KEY = "VARIABLE_VALUE"
# The attribute name of an object's JSON configuration (Keras uses it).
OBJECT_CONFIG_JSON_KEY = "OBJECT_CONFIG_JSON"


class TrackableReference(NamedTuple):
  """A named edge from a trackable to one of its dependencies."""
  name: str
  ref: Any


class CheckpointInitialValueCallable(tf_base.CheckpointInitialValueCallable):
  """A variable initializer that reads the variable's checkpointed value.

  Passing this as `initializer` makes a new variable start with its
  checkpointed value, so it is never initialized and then overwritten.
  """

  # pylint: disable=super-init-not-called
  def __init__(self, checkpoint_position):
    self._checkpoint_position = checkpoint_position

  def __call__(self, shape=None, dtype=None, shard_info=None):
    return CheckpointInitialValue(self._checkpoint_position, shape,
                                  shard_info=shard_info, dtype=dtype)


class CheckpointInitialValue(tf_base.CheckpointInitialValue):
  """An initial value read from a checkpoint, tagged with its restore UID.

  Variables recognize it and record the UID, so later restores from older
  `restore()` calls do not overwrite the value.
  """

  # pylint: disable=super-init-not-called
  def __init__(self, checkpoint_position, shape=None, shard_info=None,
               dtype=None):
    checkpoint_position.check_initial_value(
        None if shard_info else shape, dtype)
    shape_and_slice = _shape_and_slice(shape, shard_info)
    self.wrapped_value = checkpoint_position.value_tensors(
        {VARIABLE_VALUE_KEY: shape_and_slice})[VARIABLE_VALUE_KEY]
    self._checkpoint_position = checkpoint_position


def _shape_and_slice(shape, shard_info):
  """The RestoreV2 `shape_and_slice` string for one shard, or ""."""
  if not shard_info:
    return ""
  full_shape = " ".join("%d" % d for d in shape) + " "
  return full_shape + ":".join(
      "%d,%d" % (offset, size)
      for offset, size in zip(shard_info.offset, shard_info.shape))


class NoRestoreSaveable(saveable_object.SaveableObject):
  """Writes a tensor into the checkpoint; restoring it does nothing."""

  def __init__(self, tensor, name, dtype=None, device=None):
    spec = saveable_object.SaveSpec(tensor, "", name, dtype=dtype,
                                    device=device)
    super().__init__(tensor, [spec], name)

  def restore(self, restored_tensors, restored_shapes=None):
    del restored_tensors, restored_shapes  # Nothing to restore.
    if context.executing_eagerly():
      return None
    return gen_control_flow_ops.no_op()


class PythonStateSaveable(saveable_object.SaveableObject):
  """A saveable whose value comes from Python rather than from the graph.

  In graph mode its value is fed at save time (`feed_dict_additions`), so
  the cached save op does not embed a stale constant.
  """

  def feed_dict_additions(self):
    """Returns a feed dict that supplies the current Python state."""
    raise NotImplementedError

  def freeze(self):
    """Returns a saveable with the current state baked in as a constant."""
    raise NotImplementedError


class PythonStringStateSaveable(PythonStateSaveable):
  """Saves a Python string produced by `state_callback`.

  On restore the string is passed to `restore_callback`, eagerly, even when
  graph building (Python state lives outside the graph).
  """

  def __init__(self, name, state_callback, restore_callback=None):
    """Creates the saveable.

    Args:
      name: The checkpoint key.
      state_callback: Returns the string to save; called at every save.
      restore_callback: Receives the restored string; None to only save.
    """

    def current_state():
      with ops.init_scope():
        return state_callback()

    self._state_callback = current_state
    self._restore_callback = restore_callback
    with ops.device("/cpu:0"):
      # Fed with the current state at each graph-mode save.
      self._fed_state = constant_op.constant(b"")
    spec = saveable_object.SaveSpec(self._fed_state, "", name,
                                    dtype=dtypes.string)
    super().__init__(self._fed_state, [spec], name)

  @property
  def optional_restore(self):
    """Save-only state never counts as missing when restoring."""
    return self._restore_callback is None

  def feed_dict_additions(self):
    state = self._state_callback()
    return {self._fed_state: state}

  def freeze(self):
    state = self._state_callback

    def current_value():
      return constant_op.constant(state(), dtype=dtypes.string)

    return NoRestoreSaveable(tensor=current_value, name=self.name,
                             dtype=dtypes.string, device="cpu:0")

  def python_restore(self, restored_strings):
    """Hands the restored string, as bytes, to the restore callback.

    Bytes, not text: the state may be binary (a `np.save` buffer, say).
    """
    if self._restore_callback is not None:
      restored, = restored_strings
      if hasattr(restored, "numpy"):
        restored = restored.numpy()
      self._restore_callback(restored)

  def restore(self, restored_tensors, restored_shapes=None):
    del restored_shapes  # Strings are scalars.
    self.python_restore(restored_tensors)
    if context.executing_eagerly():
      return None
    return gen_control_flow_ops.no_op()


# Keys of `_serialize_to_tensors` values start with "<object path>" + this.
_ATTRIBUTES_SEGMENT = "/" + trackable_utils.OBJECT_ATTRIBUTES_NAME + "/"

# A slot of a bound variable, waiting for its optimizer to be bound.
_SlotAwaitingOptimizer = collections.namedtuple(
    "_SlotAwaitingOptimizer",
    ["original_variable", "slot_variable_id", "slot_name"])

# A slot in the checkpoint, waiting for its variable to be bound.
_SlotToRestore = collections.namedtuple(
    "_SlotToRestore", ["optimizer_id", "slot_variable_id", "slot_name"])


class CheckpointPosition:
  """One node of a checkpoint being restored (see the module docstring)."""

  __slots__ = ("_checkpoint", "_node_id", "skip_restore")

  def __init__(self, checkpoint, proto_id):
    """Points at node `proto_id` of `checkpoint`'s object graph.

    Args:
      checkpoint: The restore coordinator of one `restore()` call.
      proto_id: The index of the node in `TrackableObjectGraph.nodes`.
    """
    self._checkpoint = checkpoint
    self._node_id = proto_id
    self.skip_restore = False

  def restore(self, trackable, reader=None):
    """Restores this node, and what is reachable from it, into `trackable`."""
    del reader  # Values are read through the coordinator.
    with ops.init_scope():
      if not self.bind_object(trackable):
        return
      restore_fn = getattr(trackable, "_restore_from_checkpoint_position",
                           None)
      try:
        if restore_fn is None:
          restore_ops = restore_breadth_first(self)
        else:
          restore_ops = restore_fn(self)
      except (ValueError, errors.OpError) as e:
        # Graph building, a value that does not fit is reported when the
        # restore ops run: creating the object goes on, as in TensorFlow.
        self._checkpoint.report_mismatch(e)
        return
      if restore_ops:
        self._checkpoint.new_restore_ops(restore_ops)

  def bind_object(self, trackable):
    """Records that `trackable` is this node; processes its slot variables.

    Returns:
      True if the correspondence is new, False if this node was already
      bound (to `trackable`, or, with a warning, to another object).
    """
    checkpoint = self._checkpoint
    checkpoint.seen_objects.add(trackable)
    checkpoint.matched_node_ids.add(self._node_id)
    bound = checkpoint.objects_by_node_id
    current = bound.get(self._node_id)
    if current is None:
      bound[self._node_id] = trackable
      self._restore_slots_of_optimizer(trackable)
      self._restore_slots_of_variable(trackable)
      return True
    if current is not trackable:
      logging.warning(
          "Inconsistent references when loading the checkpoint: the "
          "checkpoint reaches one object by two paths, the Python program "
          "reaches two objects (%s and %s). Either the program's object "
          "structure changed or the checkpoint comes from another program.",
          current, trackable)
    return False

  def _restore_slots_of_optimizer(self, optimizer):
    """Restores slots that waited for this node's optimizer to be bound."""
    for deferred in self._checkpoint.slots_awaiting_optimizer.pop(
        self._node_id, ()):
      self._create_or_restore_slot(optimizer, deferred.original_variable,
                                   deferred.slot_variable_id,
                                   deferred.slot_name)

  def _restore_slots_of_variable(self, variable):
    """Restores (or defers) optimizer slots of this node's variable."""
    checkpoint = self._checkpoint
    for slot in checkpoint.slots_by_variable.pop(self._node_id, ()):
      optimizer = checkpoint.objects_by_node_id.get(slot.optimizer_id, None)
      if optimizer is None:
        checkpoint.slots_awaiting_optimizer.setdefault(
            slot.optimizer_id, []).append(
                _SlotAwaitingOptimizer(
                    original_variable=variable,
                    slot_variable_id=slot.slot_variable_id,
                    slot_name=slot.slot_name))
      elif hasattr(optimizer, "_create_or_restore_slot_variable"):
        self._create_or_restore_slot(optimizer, variable,
                                     slot.slot_variable_id, slot.slot_name)

  def _create_or_restore_slot(self, optimizer, variable, slot_variable_id,
                              slot_name):
    """Has `optimizer` create (or find) a slot, then restores the slot.

    Older optimizers restore the slot themselves and return None; newer
    ones (Keras' OptimizerV2) return the slot for the caller to restore.
    """
    position = CheckpointPosition(self._checkpoint, slot_variable_id)
    slot_variable = optimizer._create_or_restore_slot_variable(  # pylint: disable=protected-access
        slot_variable_position=position, variable=variable,
        slot_name=slot_name)
    if slot_variable is not None:
      position.restore(slot_variable)

  def is_simple_variable(self):
    """Whether the value fits in a variable initializer (one tensor, no deps)."""
    attributes = self.object_proto.attributes
    return (len(attributes) == 1 and
            attributes[0].name == VARIABLE_VALUE_KEY and
            not self.object_proto.children)

  def value_tensors(self, shape_and_slices=None):
    """Reads this node's attribute values, before any object exists.

    Used for restore-on-create.

    Args:
      shape_and_slices: Optional `{attribute name: shape_and_slice}` to
        read only a slice of an attribute.

    Returns:
      A dict from attribute name to tensor.
    """
    shape_and_slices = shape_and_slices or {}
    values = {}
    for attribute in self.object_proto.attributes:
      values[attribute.name] = self._checkpoint.read_value(
          attribute.checkpoint_key,
          shape_and_slices.get(attribute.name, ""))
    return values

  def check_initial_value(self, shape=None, dtype=None):
    """Raises unless the value can initialize a variable of shape and dtype.

    Raises:
      ValueError: Naming the checkpoint key and object path, if the
        checkpointed shape or dtype differs (None: not checked).
    """
    key = self.object_proto.attributes[0].checkpoint_key
    saved_shape = self.value_shape()
    if (shape is not None and saved_shape is not None and
        not saved_shape.is_compatible_with(shape)):
      raise ValueError(
          f"Cannot restore {self._checkpoint.describe_key(key)}: the "
          f"checkpoint holds shape {saved_shape} but the variable being "
          f"created has shape {tuple(shape)}.")
    saved_dtype = self._checkpoint.dtype_map.get(key)
    if (dtype is not None and saved_dtype is not None and
        dtypes.as_dtype(dtype).base_dtype != saved_dtype):
      raise ValueError(
          f"Cannot restore {self._checkpoint.describe_key(key)}: the "
          f"checkpoint holds dtype {saved_dtype.name} but the variable being "
          f"created has dtype {dtypes.as_dtype(dtype).name}.")

  def value_shape(self):
    """The checkpointed shape of VARIABLE_VALUE, or None if there is none."""
    for attribute in self.object_proto.attributes:
      if attribute.name == VARIABLE_VALUE_KEY:
        dims = self._checkpoint.shape_map.get(attribute.checkpoint_key)
        return None if dims is None else tensor_shape.TensorShape(dims)
    return None

  def gather_ops_or_named_saveables(self):
    """Finds cached restore ops, or makes saveables for this node.

    Returns:
      A tuple (existing restore ops, {checkpoint key: saveable}, Python
      state saveables).
    """
    attributes = self.object_proto.attributes
    if not attributes:
      return [], {}, []
    trackable = self.trackable
    factories = saveable_object_util.saveable_objects_from_trackable(
        trackable)
    if (len(factories) == 1 and
        trackable_utils.SERIALIZE_TO_TENSORS_NAME in factories):
      return self._whole_object_saveable(factories, attributes, trackable)
    return self._saveables_by_attribute(factories)

  def _whole_object_saveable(self, factories, attributes, trackable):
    """One saveable restores every attribute (`_serialize_to_tensors`)."""
    first_key = attributes[0].checkpoint_key
    key = first_key[:first_key.index(_ATTRIBUTES_SEGMENT) +
                    len(_ATTRIBUTES_SEGMENT)]
    checkpoint = self._checkpoint
    # Cached under the attribute name saves use too, so that saves and
    # restores share saveables; restore ops are cached by saveable name.
    attribute = trackable_utils.SERIALIZE_TO_TENSORS_NAME
    saveable = checkpoint.cached_saveable(trackable, attribute)
    if saveable is None or key not in saveable.name:
      saveable = factories[attribute](name=key)
      checkpoint.cache_saveable(trackable, attribute, saveable)
    existing_op = checkpoint.cached_restore_op(saveable.name, saveable)
    if existing_op is not None:
      return [existing_op], {}, []
    return [], {key: saveable}, []

  def _saveables_by_attribute(self, factories):
    """Matches checkpointed attributes to the object's saveable factories."""
    checkpoint = self._checkpoint
    existing_ops, named_saveables, python_saveables = [], {}, []
    for attribute in self.object_proto.attributes:
      key = attribute.checkpoint_key
      saveable = checkpoint.cached_saveable(self.trackable, attribute.name)
      if saveable is not None and key not in saveable.name:
        saveable = None  # The object moved in the graph; names changed.
      if saveable is None:
        factory = factories.get(attribute.name)
        if factory is None:
          # TensorFlow 2.21's SerializedTensor has no optional_restore: an
          # attribute without a saveable is always reported as unused.
          checkpoint.unused_attributes.setdefault(
              self._node_id, []).append(attribute.name)
          continue
        saveable = factory(name=key) if callable(factory) else factory
        checkpoint.cache_saveable(self.trackable, attribute.name, saveable)
      existing_op = checkpoint.cached_restore_op(key, saveable)
      if existing_op is not None:
        existing_ops.append(existing_op)
      elif isinstance(saveable, PythonStateSaveable):
        python_saveables.append(saveable)
      else:
        named_saveables[key] = saveable
    return existing_ops, named_saveables, python_saveables

  def restore_ops(self):
    """Restores this node's own attributes (not its dependencies).

    Returns:
      Restore ops when graph building; an empty list when executing eagerly.
    """
    batch = _RestoreBatch()
    batch.add_node(self)
    return batch.restore(self._checkpoint)

  @property
  def checkpoint(self):
    return self._checkpoint

  @property
  def trackable(self):
    bound = self._checkpoint.objects_by_node_id
    return bound[self._node_id]

  @property
  def object_proto(self):
    nodes = self._checkpoint.object_graph_proto.nodes
    return nodes[self._node_id]

  @property
  def proto_id(self):
    return self._node_id

  @property
  def restore_uid(self):
    return self._checkpoint.restore_uid

  def __repr__(self):
    return repr(self.object_proto)


class _RestoreBatch:
  """What one walk of a checkpoint found to restore; restored together."""

  __slots__ = ("restore_ops", "tensor_saveables", "python_saveables",
               "variables")

  def __init__(self):
    self.restore_ops = []  # Cached restore ops (graph mode).
    self.tensor_saveables = {}  # Checkpoint key -> SaveableObject.
    self.python_saveables = []  # PythonStateSaveables.
    self.variables = []  # (checkpoint key, stock resource variable).

  def add_node(self, position):
    """Adds the saveables of `position`'s own attributes."""
    found_ops, by_key, python_state = position.gather_ops_or_named_saveables()
    self.restore_ops.extend(found_ops)
    self.tensor_saveables.update(by_key)
    self.python_saveables.extend(python_state)

  def restore(self, checkpoint):
    """Restores everything gathered; returns all restore ops (graph mode)."""
    self.restore_ops.extend(checkpoint.restore_saveables(
        self.tensor_saveables, self.python_saveables, self.variables))
    return self.restore_ops


def _plain_variable_key(checkpoint, node_id, variable):
  """The key of a variable that can skip per-node bookkeeping, or None.

  Restoring many variables spends most of its time on bookkeeping that a
  stock resource variable read from a plain node (its value only, no
  dependencies, no optimizer slots waiting for it) does not need.
  """
  if (node_id in checkpoint.slots_by_variable or
      not saveable_object_util.has_default_variable_saving(variable)):
    return None
  node = checkpoint.object_graph_proto.nodes[node_id]
  if node.children or node.slot_variables or len(node.attributes) != 1:
    return None
  attribute = node.attributes[0]
  if attribute.name != VARIABLE_VALUE_KEY:
    return None
  return attribute.checkpoint_key


def _bind_plain_variable(checkpoint, node_id, variable, key, batch):
  """Binds `variable` to node `node_id` and queues its value (eager only).

  Unlike `bind_object`, leaves `seen_objects` alone: it serves to
  find objects that are not bound.
  """
  checkpoint.matched_node_ids.add(node_id)
  checkpoint.objects_by_node_id[node_id] = variable
  variable._maybe_initialize_trackable()  # pylint: disable=protected-access
  if checkpoint.restore_uid > variable._update_uid:  # pylint: disable=protected-access
    variable._update_uid = checkpoint.restore_uid  # pylint: disable=protected-access
    batch.variables.append((key, variable))


def _restore_one(position, visit_queue, batch):
  """Gathers `position`'s own saveables into `batch`; queues its children.

  Children not yet present on the Python object are deferred: queued in
  the object's `_deferred_dependencies` until it tracks them. When
  executing eagerly, plain variable children are bound and gathered here
  directly instead of being queued.
  """
  parent = position.trackable
  parent._maybe_initialize_trackable()  # pylint: disable=protected-access
  checkpoint = position.checkpoint
  if checkpoint.restore_uid > parent._update_uid:  # pylint: disable=protected-access
    batch.add_node(position)
    parent._update_uid = checkpoint.restore_uid  # pylint: disable=protected-access
  children = position.object_proto.children
  if not children:
    return
  eager = context.executing_eagerly()
  objects_by_node_id = checkpoint.objects_by_node_id
  current_children = parent._trackable_children()  # pylint: disable=protected-access
  for child in children:
    node_id = child.node_id
    if node_id in objects_by_node_id:
      continue  # Already bound through another path.
    local_object = parent._lookup_dependency(  # pylint: disable=protected-access
        child.local_name, current_children)
    if local_object is None:
      if checkpoint.node_has_values(node_id):
        checkpoint.defer(parent, child.local_name,
                         CheckpointPosition(checkpoint, node_id))
      continue
    key = eager and _plain_variable_key(checkpoint, node_id, local_object)
    if key:
      _bind_plain_variable(checkpoint, node_id, local_object, key, batch)
      continue
    child_position = CheckpointPosition(checkpoint, node_id)
    if child_position.bind_object(local_object):
      visit_queue.append(child_position)


def restore_breadth_first(position):
  """Restores the object bound to `position` and its reachable dependencies.

  Breadth first, so that shorter paths win when objects are shared; all
  values found in one walk are restored together.

  Returns:
    Restore ops when graph building, else an empty list.
  """
  visit_queue = collections.deque([position])
  batch = _RestoreBatch()
  while visit_queue:
    _restore_one(visit_queue.popleft(), visit_queue, batch)
  return batch.restore(position.checkpoint)


@contextlib.contextmanager
def _attribute_set_to_false(obj, name):
  """Sets boolean attribute `name` of `obj` to False for a scope."""
  previous = getattr(obj, name, True)
  setattr(obj, name, False)
  try:
    yield
  finally:
    setattr(obj, name, previous)


def no_automatic_dependency_tracking(method):
  """Decorates a method so attribute assignments in it add no dependencies."""

  @functools.wraps(method)
  def wrapper(self, *args, **kwargs):
    with _attribute_set_to_false(self, "_self_setattr_tracking"):
      return method(self, *args, **kwargs)

  return wrapper


def no_manual_dependency_tracking_scope(obj):
  """A scope in which `obj._track_trackable` records nothing."""
  return _attribute_set_to_false(obj, "_manual_tracking")


def no_automatic_dependency_tracking_scope(obj):
  """A scope in which attribute assignments on `obj` add no dependencies."""
  return _attribute_set_to_false(obj, "_setattr_tracking")


class Trackable(tf_base.Trackable):
  """An object whose state and dependencies can be checkpointed.

  Dependencies are declared explicitly with `_track_trackable` (see
  `tracking.AutoTrackable` for attribute-assignment tracking). Subclasses
  save their own state by overriding `_gather_saveables_for_checkpoint` (or
  TensorFlow's `_serialize_to_tensors`).
  """

  # TensorFlow's base class keeps the bookkeeping (its `_self_*`
  # attributes and the properties reading them); this class changes how
  # dependencies are tracked, looked up and restored.

  def _maybe_initialize_trackable(self):
    """Creates the bookkeeping lazily, so subclasses need not call __init__.

    Checks before calling TensorFlow's initializer, whose decorator costs
    more than the check on every call.
    """
    if not hasattr(self, "_self_unconditional_checkpoint_dependencies"):
      tf_base.Trackable._maybe_initialize_trackable(self)  # pylint: disable=protected-access

  @property
  def _tracking_metadata(self):
    """Extra metadata a subclass may attach to its object graph node."""
    return ""

  def _name_based_attribute_restore(self, coordinator):
    """Restores this object's values from a name-based checkpoint."""
    self._maybe_initialize_trackable()
    super()._name_based_attribute_restore(coordinator)

  def _trackable_children(self, save_type="checkpoint", cache=None, **kwargs):
    """Returns `{local name: dependency}` (TensorFlow's traversal API)."""
    del save_type, cache, kwargs  # Checkpoints and SavedModels agree here.
    self._maybe_initialize_trackable()
    return {name: ref for name, ref in self._checkpoint_dependencies}

  def _lookup_dependency(self, name, cached_dependencies=None):
    """Returns the dependency named `name`, or None."""
    if cached_dependencies is not None:
      return cached_dependencies.get(name)
    self._maybe_initialize_trackable()
    return self._self_unconditional_dependency_names.get(name)

  def _add_variable_with_custom_getter(self, name, shape=None,
                                       dtype=dtypes.float32, initializer=None,
                                       getter=None, overwrite=False,
                                       **kwargs_for_getter):
    """Creates a variable with `getter` and tracks it as `name`.

    When executing eagerly and a restore is waiting for `name`, the
    checkpointed value becomes the initial value (`initializer` is ignored),
    unless `initializer` itself comes from a newer restore.

    Raises:
      ValueError: If `name` is already a different dependency.
    """
    self._maybe_initialize_trackable()
    with ops.init_scope():
      if context.executing_eagerly():
        restored = self._preload_simple_restoration(name=name, shape=shape)
      else:
        restored = None
    if restored is not None and not (
        isinstance(initializer, tf_base.CheckpointInitialValueCallable) and
        initializer.restore_uid > restored.restore_uid):
      initializer = restored
    variable = getter(name=name, shape=shape, dtype=dtype,
                      initializer=initializer, **kwargs_for_getter)
    if not overwrite or isinstance(variable, tf_base.Trackable):
      return self._track_trackable(variable, name=name, overwrite=overwrite)
    return variable

  def _preload_simple_restoration(self, name, shape=None):
    """An initializer holding a queued restore of `name`, or None.

    The queued restore stays queued: if the initializer is not used (a
    custom getter may replace it), tracking the variable still restores it.
    None when nothing is queued or the value needs more than an initializer.
    """
    del shape  # Checked when the initial value is created.
    queued = self._deferred_dependencies.get(name, ())
    if not queued or not all(p.is_simple_variable() for p in queued):
      return None
    newest = max(queued, key=lambda position: position.restore_uid)
    if isinstance(newest, CheckpointPosition):
      return CheckpointInitialValueCallable(newest)
    return tf_base.CheckpointInitialValueCallable(newest)

  def _track_trackable(self, trackable, name, overwrite=False):
    """Declares `trackable` a dependency named `name`; returns it.

    Restores waiting for `name` are applied to `trackable`.

    Raises:
      TypeError: If `trackable` is not a trackable.
      ValueError: If another object is tracked as `name` and not
        `overwrite`.
    """
    self._maybe_initialize_trackable()
    if not isinstance(trackable, tf_base.Trackable):
      raise TypeError(
          f"Only trackable objects can be tracked; got {trackable!r} of type "
          f"{type(trackable).__name__} for dependency {name!r}.")
    if not getattr(self, "_manual_tracking", True):
      return trackable
    reference = TrackableReference(name=name, ref=trackable)
    dependencies = self._self_unconditional_checkpoint_dependencies
    current = self._lookup_dependency(name)
    if current is not None and current is not trackable:
      if not overwrite:
        raise ValueError(
            f"A different object is already tracked as {name!r} by "
            f"{type(self).__name__}; dependency names must be unique "
            "(pass overwrite=True to replace it).")
      dependencies[:] = [reference if old.name == name else old
                         for old in dependencies]
    by_name = self._self_unconditional_dependency_names
    by_name[name] = trackable
    if current is None:
      # Tracked before restoring, so that a failed restore leaves it
      # tracked consistently.
      dependencies.append(reference)
      self._handle_deferred_dependencies(name, trackable)
    return trackable

  def _restore_from_checkpoint_position(self, position):
    """Restores this object and its dependencies; returns restore ops."""
    return restore_breadth_first(position)

  def _single_restoration_from_checkpoint_position(self, position,
                                                   visit_queue):
    """Restores this object's own values and queues its dependencies."""
    batch = _RestoreBatch()
    _restore_one(position, visit_queue, batch)
    return batch.restore(position.checkpoint)

  def _list_extra_dependencies_for_serialization(self, cache):
    """Dependencies saved only in SavedModels; none by default."""
    del cache
    return {}

  def _list_functions_for_serialization(self, cache):
    """Functions saved only in SavedModels; none by default."""
    del cache
    return {}
