"""`CheckpointPosition`: one node of a checkpoint being restored.

A position points at one node of a checkpoint's object graph. Restoring a
position into an object binds the node to it and walks what the node
reaches from there (`restore_walk`); a node whose object does not exist
yet waits as a position in its parent's deferred dependencies, and a
variable created that way starts with its checkpointed value
(`CheckpointInitialValue`). Optimizer slot variables are restored once
both their variable and their optimizer are bound.

Positions offer the methods TensorFlow's trackables call on theirs, so
TensorFlow's objects (Keras layers, `tf.Module`) keep our positions in their
deferred-dependency queues. The state of one restore (the checkpoint, what
is bound) is its coordinator's (`restore_coordinator`), which makes the
positions of the nodes a walk goes on to.
"""

import collections
import weakref

from tensorflow.python.eager import context
from tensorflow.python.eager import record
from tensorflow.python.framework import errors
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor_shape

from tf_objckpt.engine import saveable_objects
from tf_objckpt.foundation import checkpoint_keys as trackable_utils
from tf_objckpt.foundation import module_names
from tf_objckpt.restoring import initial_values
from tf_objckpt.restoring import node_binding
from tf_objckpt.restoring import object_graph_check
from tf_objckpt.restoring import restore_plan
from tf_objckpt.restoring import restore_walk
from tf_objckpt.restoring import trackable_saveables

# A slot of a bound variable, waiting for its optimizer to be bound.
_SlotAwaitingOptimizer = collections.namedtuple(
    "_SlotAwaitingOptimizer",
    ["original_variable", "slot_variable_id", "slot_name"])

# A slot in the checkpoint, waiting for its variable to be bound.
SlotToRestore = collections.namedtuple(
    "SlotToRestore", ["optimizer_id", "slot_variable_id", "slot_name"])


class CheckpointPosition:
  """One node of a checkpoint being restored (see the module docstring)."""

  __slots__ = ("_checkpoint", "_node_id", "skip_restore", "_deferred_in",
               "only_if_it_fits")

  def __init__(self, checkpoint, proto_id):
    """Points at node `proto_id` of `checkpoint`'s object graph.

    Args:
      checkpoint: The restore coordinator of one `restore()` call.
      proto_id: The index of the node in `TrackableObjectGraph.nodes`.
    """
    self._checkpoint = checkpoint
    self._node_id = proto_id
    self.skip_restore = False
    # (weak reference to the parent, local name) once deferred.
    self._deferred_in = None
    # A Keras 3 slot reached by position: restored only into an object of
    # its shape (`keras3_slots`).
    self.only_if_it_fits = False

  def defer_in(self, parent, local_name):
    """Queues this node until `parent` tracks a dependency `local_name`."""
    self._deferred_in = (weakref.ref(parent), local_name)
    self._checkpoint.defer(parent, local_name, self)

  def initialize_when_awaited(self, trackable, parent=None, local_name=None):
    """Restores `trackable` on its initialization if Keras 3 still awaits it.

    Args:
      trackable: The object bound to this node.
      parent: The object `trackable` is a dependency of, if known; a value
        that does not fit is queued again there (see
        `_restore_on_initialization`).
      local_name: The name `parent` tracks `trackable` under.

    Returns:
      True if `trackable` is a Keras 3 variable awaiting its initialization
      and this node its plain value: the value is then its initializer.
      False if it is to be restored as usual.
    """
    if not (initial_values.awaits_initialization(trackable) and
            self.is_simple_variable()):
      return False
    if parent is not None:
      self._deferred_in = (weakref.ref(parent), local_name)
    self._restore_on_initialization(trackable)
    return True

  def restore(self, trackable, reader=None):
    """Restores this node, and what is reachable from it, into `trackable`.

    A Keras 3 slot written under `_variables` only may be the optimizer's
    last: its slots are then matched to their variables (`keras3_slots`).
    """
    del reader  # Values are read through the coordinator.
    self._restore_into(trackable)
    slot_lists = self._checkpoint.slot_lists
    if slot_lists.unlisted and self._node_id in slot_lists.slot_ids:
      self._restore_ops_of(
          lambda checkpoint: restore_walk.restore_unlisted_slots(
              checkpoint, trackable), self._checkpoint)

  def _restore_into(self, trackable):
    """Restores this node and its dependencies into `trackable`.

    Out of any function being built and any tape. Eagerly with no tape
    recording, `ops.init_scope()` would do nothing, and it is skipped: a
    restore-on-create runs this once per variable.
    """
    if context.executing_eagerly() and not record.could_possibly_record():
      self._restore_in_scope(trackable)
      return
    with ops.init_scope():
      self._restore_in_scope(trackable)

  def _restore_in_scope(self, trackable):
    """`_restore_into`, in `ops.init_scope()` (or where it does nothing)."""
    if self.only_if_it_fits and not self.fits(trackable):
      return
    if self.initialize_when_awaited(trackable):
      return
    checkpoint = self._checkpoint
    plain = context.executing_eagerly() and node_binding.plain_variable(
        checkpoint, self._node_id, trackable)
    if plain:  # Bound as the walk binds a plain child.
      if node_binding.bind(checkpoint, self._node_id, trackable, see=False):
        self._record_restore_ops(
            lambda _: node_binding.restore_plain_variable(
                checkpoint, trackable, plain), None)
      return
    if not self.bind_object(trackable):
      return
    restore_fn = getattr(trackable, "_restore_from_checkpoint_position",
                         restore_walk.restore_breadth_first)
    self._record_restore_ops(restore_fn, self)

  def _restore_ops_of(self, restore_fn, argument):
    """Runs `restore_fn(argument)`, recording the restore ops it returns."""
    with ops.init_scope():
      self._record_restore_ops(restore_fn, argument)

  def _record_restore_ops(self, restore_fn, argument):
    """`_restore_ops_of`, inside `ops.init_scope()` already."""
    try:
      restore_ops = restore_fn(argument)
    except (ValueError, errors.OpError) as e:
      # Graph building, a value that does not fit is reported when the
      # restore ops run: creating the object goes on, as in TensorFlow.
      self._checkpoint.report_mismatch(e)
      return
    if restore_ops:
      self._checkpoint.new_restore_ops(restore_ops)

  def _restore_on_initialization(self, variable):
    """Gives a Keras 3 variable made in a symbolic build its value.

    Keras builds layers without `build()` by tracing them in a scratch
    graph: their variables are created there uninitialized, and initialized
    (by `_initializer`) once the trace ends. So the value is checked now and
    becomes the variable's initializer.

    Keras drops errors raised during the trace, then builds the layer again
    eagerly. So a value that does not fit is queued again in its parent
    before raising: the eager build raises it where Keras lets it out.

    Raises:
      ValueError: Naming the key, the object path and both shapes, if the
        value does not fit the variable (or its dtype differs).
    """
    try:
      self.check_initial_value(variable.shape, variable.dtype)
    except ValueError:
      self._defer_again()
      raise
    if not self.bind_object(variable):
      return
    variable._initializer = (  # pylint: disable=protected-access
        initial_values.CheckpointInitialValueCallable(self))
    variable._maybe_initialize_trackable()  # pylint: disable=protected-access
    variable._update_uid = self._checkpoint.restore_uid  # pylint: disable=protected-access

  def _defer_again(self):
    """Queues this node again in the parent it waited in, if still alive."""
    parent = self._deferred_in and self._deferred_in[0]()
    if parent is not None:
      self._checkpoint.defer(parent, self._deferred_in[1], self)

  def bind_object(self, trackable):
    """Records that `trackable` is this node; processes its slot variables.

    Returns:
      True if the correspondence is new, False if this node was already
      bound (to `trackable`, or, with a warning, to another object).
    """
    if not node_binding.bind(self._checkpoint, self._node_id, trackable):
      return False
    self._restore_slots_of_optimizer(trackable)
    self._restore_slots_of_variable(trackable)
    return True

  def _restore_slots_of_optimizer(self, optimizer):
    """Restores slots that waited for this node's optimizer to be bound."""
    waiting = self._checkpoint.slots_awaiting_optimizer.pop(self._node_id, ())
    if waiting and self._holds_slots(optimizer, self._node_id):
      for deferred in waiting:
        self._create_or_restore_slot(optimizer, deferred.original_variable,
                                     deferred.slot_variable_id,
                                     deferred.slot_name)

  def _restore_slots_of_variable(self, variable):
    """Restores (or defers) optimizer slots of this node's variable."""
    checkpoint = self._checkpoint
    slots = checkpoint.slots_by_variable.pop(self._node_id, ())
    if slots and not trackable_saveables.is_variable(variable):
      raise self._mismatched_slots(
          self._node_id, "optimizers hold slots for it as a variable, but "
          f"its object is not a variable ({type(variable).__name__})")
    for slot in slots:
      optimizer = checkpoint.objects_by_node_id.get(slot.optimizer_id, None)
      if optimizer is None:
        checkpoint.slots_awaiting_optimizer.setdefault(
            slot.optimizer_id, []).append(
                _SlotAwaitingOptimizer(original_variable=variable,
                                       slot_variable_id=slot.slot_variable_id,
                                       slot_name=slot.slot_name))
      elif self._holds_slots(optimizer, slot.optimizer_id):
        self._create_or_restore_slot(optimizer, variable, slot.slot_variable_id,
                                     slot.slot_name)

  def _holds_slots(self, optimizer, optimizer_id):
    """Whether slots are restored into `optimizer`, bound to `optimizer_id`.

    An object without slots (a `Checkpoint` standing in for an optimizer to
    restore its step counter) restores none, as in TensorFlow.

    Raises:
      DataLossError: If the object is a variable: the checkpoint's path to
        it leads to an optimizer.
    """
    if trackable_saveables.is_variable(optimizer):
      raise self._mismatched_slots(
          optimizer_id, "it holds slot variables, but its object is a "
          "variable")
    return hasattr(optimizer, "_create_or_restore_slot_variable")

  def _mismatched_slots(self, node_id, problem):
    """The error of a slot whose objects are of the wrong kind."""
    checkpoint = self._checkpoint
    return object_graph_check.damaged_graph_error(checkpoint.object_graph_proto,
                                                  checkpoint.values.save_path,
                                                  [(node_id, problem)])

  def _create_or_restore_slot(self, optimizer, variable, slot_variable_id,
                              slot_name):
    """Has `optimizer` create (or find) a slot, then restores the slot.

    Older optimizers restore the slot themselves and return None; newer
    ones (Keras' OptimizerV2) return the slot for the caller to restore.
    """
    position = CheckpointPosition(self._checkpoint, slot_variable_id)
    slot_variable = optimizer._create_or_restore_slot_variable(  # pylint: disable=protected-access
        slot_variable_position=position,
        variable=variable,
        slot_name=slot_name)
    if slot_variable is not None:
      position.restore(slot_variable)

  def is_simple_variable(self):
    """Whether the value fits in a variable initializer (one tensor, no deps)."""
    node = self.object_proto
    return (len(node.attributes) == 1 and
            node.attributes[0].name == trackable_utils.VARIABLE_VALUE_KEY and
            not node.children)

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
      values[attribute.name] = self._checkpoint.values.read_one(
          attribute.checkpoint_key, shape_and_slices.get(attribute.name, ""))
    return values

  def check_initial_value(self, shape=None, dtype=None):
    """Raises unless the value can initialize a variable of shape and dtype.

    Raises:
      ValueError: Naming the checkpoint key and object path, if the
        checkpointed shape or dtype differs (None: not checked).
    """
    key = self.object_proto.attributes[0].checkpoint_key
    self._checkpoint.check(restore_plan.plan_of_initial_value(
        key, dtype, shape),
                           shape_error=ValueError,
                           dtype_error=ValueError)

  def fits(self, trackable):
    """Whether `trackable` has this node's checkpointed shape (if known)."""
    shape = self.value_shape()
    own_shape = getattr(trackable, "shape", None)
    return shape is None or own_shape is None or (
        shape.as_list() == tensor_shape.TensorShape(own_shape).as_list())

  def value_shape(self):
    """The checkpointed shape of VARIABLE_VALUE, or None if there is none."""
    for attribute in self.object_proto.attributes:
      if attribute.name == trackable_utils.VARIABLE_VALUE_KEY:
        dims = self._checkpoint.values.shapes.get(attribute.checkpoint_key)
        return None if dims is None else tensor_shape.TensorShape(dims)
    return None

  def gather_ops_or_named_saveables(self):
    """Finds cached restore ops, or makes saveables for this node.

    Returns:
      A tuple (`(name, saveable, restore op)` of saveables whose restore
      ops an earlier restore built, {checkpoint key: saveable}, Python
      state saveables).
    """
    stored = self.object_proto.attributes
    if not stored:
      return [], {}, []
    trackable = self.trackable
    factories = trackable_saveables.saveable_objects_from_trackable(trackable)
    if (len(factories) == 1 and
        trackable_utils.SERIALIZE_TO_TENSORS_NAME in factories):
      return self._whole_object_saveable(factories, stored, trackable)
    return self._saveables_by_attribute(factories)

  def _whole_object_saveable(self, factories, attributes, trackable):
    """One saveable restores every attribute (`_serialize_to_tensors`)."""
    key = trackable_utils.saveable_name(attributes[0].checkpoint_key)
    checkpoint = self._checkpoint
    # Cached under the attribute name saves use too, so that saves and
    # restores share saveables; restore ops are cached by saveable name.
    attribute = trackable_utils.SERIALIZE_TO_TENSORS_NAME
    saveable = checkpoint.cached_saveable(trackable, attribute)
    if saveable is None or key not in saveable.name:
      saveable = factories[attribute](name=key)
      checkpoint.cache_saveable(trackable, attribute, saveable)
    existing_op = checkpoint.cached_restore_op(saveable.name)
    if existing_op is not None:
      return [(saveable.name, saveable, existing_op)], {}, []
    return [], {key: saveable}, []

  def _saveables_by_attribute(self, factories):
    """Matches checkpointed attributes to the object's saveable factories."""
    checkpoint = self._checkpoint
    cached, named_saveables, python_saveables = [], {}, []
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
          checkpoint.unused_attributes.setdefault(self._node_id,
                                                  []).append(attribute.name)
          continue
        saveable = factory(name=key) if callable(factory) else factory
        checkpoint.cache_saveable(self.trackable, attribute.name, saveable)
      existing_op = checkpoint.cached_restore_op(key)
      if existing_op is not None:
        cached.append((key, saveable, existing_op))
      elif isinstance(saveable, saveable_objects.PythonStateSaveable):
        python_saveables.append(saveable)
      else:
        named_saveables[key] = saveable
    return cached, named_saveables, python_saveables

  def restore_ops(self):
    """Restores this node's own attributes (not its dependencies).

    Returns:
      Restore ops when graph building; an empty list when executing eagerly.
    """
    batch = node_binding.RestoreBatch()
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


module_names.keep_module_name("tf_objckpt.restore", CheckpointPosition)
