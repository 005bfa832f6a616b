"""The restore walk: matching a checkpoint's object graph to Python objects.

A `CheckpointPosition` points at one node of a checkpoint's object graph.
Restoring walks the checkpoint breadth first from the root, binding each
node to the Python object at the same path of local names, and gathers the
values of everything it binds to restore them together. A node whose object
does not exist yet is queued in its parent's `_deferred_dependencies` and
restored when the parent starts tracking an object under that name
("restore-on-create"); a variable created that way starts with its
checkpointed value (`CheckpointInitialValue`). Optimizer slot variables are
restored once both their variable and their optimizer are bound.

Each walk restores what it found as one read plan (`restore_plan`), checked
and executed by the coordinator; a plain variable skips the position
bookkeeping and is queued as a `ToVariable`, for the engine's fast path.

Positions offer the methods TensorFlow's trackables call on theirs, so
TensorFlow's objects (Keras layers, `tf.Module`) keep our positions in their
deferred-dependency queues. The state of one restore (the checkpoint, what
is bound) is its coordinator's (`restore_coordinator`).
"""

import collections
import weakref

from tensorflow.python.eager import context
from tensorflow.python.eager import record
from tensorflow.python.framework import errors
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor_shape
from tensorflow.python.platform import tf_logging as logging

from tf_objckpt.engine import registered_savers
from tf_objckpt.restoring import initial_values
from tf_objckpt.restoring import keras3_slots
from tf_objckpt.restoring import object_graph_check
from tf_objckpt.restoring import restore_plan
from tf_objckpt import saveable_object
from tf_objckpt import saveable_object_util
from tf_objckpt.foundation import checkpoint_keys as trackable_utils


# Keys of `_serialize_to_tensors` values start with "<object path>" + this.
_ATTRIBUTES_SEGMENT = "/" + trackable_utils.OBJECT_ATTRIBUTES_NAME + "/"


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
          lambda checkpoint: restore_unlisted_slots(checkpoint, trackable),
          self._checkpoint)

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
    plain = context.executing_eagerly() and _plain_variable(
        checkpoint, self._node_id, trackable)
    if plain:  # Bound as the walk binds a plain child.
      if _bind(checkpoint, self._node_id, trackable, see=False):
        self._record_restore_ops(
            lambda _: _restore_plain_variable(checkpoint, trackable, plain),
            None)
      return
    if not self.bind_object(trackable):
      return
    restore_fn = getattr(trackable, "_restore_from_checkpoint_position",
                         restore_breadth_first)
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
    if not _bind(self._checkpoint, self._node_id, trackable):
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
    if slots and not saveable_object_util.is_variable(variable):
      raise self._mismatched_slots(
          self._node_id, "optimizers hold slots for it as a variable, but "
          f"its object is not a variable ({type(variable).__name__})")
    for slot in slots:
      optimizer = checkpoint.objects_by_node_id.get(slot.optimizer_id, None)
      if optimizer is None:
        checkpoint.slots_awaiting_optimizer.setdefault(
            slot.optimizer_id, []).append(
                _SlotAwaitingOptimizer(
                    original_variable=variable,
                    slot_variable_id=slot.slot_variable_id,
                    slot_name=slot.slot_name))
      elif self._holds_slots(optimizer, slot.optimizer_id):
        self._create_or_restore_slot(optimizer, variable,
                                     slot.slot_variable_id, slot.slot_name)

  def _holds_slots(self, optimizer, optimizer_id):
    """Whether slots are restored into `optimizer`, bound to `optimizer_id`.

    An object without slots (a `Checkpoint` standing in for an optimizer to
    restore its step counter) restores none, as in TensorFlow.

    Raises:
      DataLossError: If the object is a variable: the checkpoint's path to
        it leads to an optimizer.
    """
    if saveable_object_util.is_variable(optimizer):
      raise self._mismatched_slots(
          optimizer_id, "it holds slot variables, but its object is a "
          "variable")
    return hasattr(optimizer, "_create_or_restore_slot_variable")

  def _mismatched_slots(self, node_id, problem):
    """The error of a slot whose objects are of the wrong kind."""
    checkpoint = self._checkpoint
    return object_graph_check.damaged_graph_error(
        checkpoint.object_graph_proto, checkpoint.values.save_path,
        [(node_id, problem)])

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
            attributes[0].name == trackable_utils.VARIABLE_VALUE_KEY and
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
      values[attribute.name] = self._checkpoint.values.read_one(
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
    self._checkpoint.check(
        restore_plan.plan_of_initial_value(key, dtype, shape),
        shape_error=ValueError, dtype_error=ValueError)

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
          checkpoint.unused_attributes.setdefault(
              self._node_id, []).append(attribute.name)
          continue
        saveable = factory(name=key) if callable(factory) else factory
        checkpoint.cache_saveable(self.trackable, attribute.name, saveable)
      existing_op = checkpoint.cached_restore_op(key)
      if existing_op is not None:
        cached.append((key, saveable, existing_op))
      elif isinstance(saveable, saveable_object.PythonStateSaveable):
        python_saveables.append(saveable)
      else:
        named_saveables[key] = saveable
    return cached, named_saveables, python_saveables

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


def _bind(checkpoint, node_id, trackable, see=True):
  """Records that `trackable` is node `node_id` of `checkpoint`.

  Plain variables skip `seen_objects` (`see=False`): it finds unbound ones.

  Returns:
    True if the correspondence is new, False if the node was already bound
    (to `trackable`, or, with a warning, to another object).
  """
  if see:
    checkpoint.seen_objects.add(trackable)
  checkpoint.matched_node_ids.add(node_id)
  bound = checkpoint.objects_by_node_id
  current = bound.get(node_id)
  if current is None:
    bound[node_id] = trackable
    return True
  if current is not trackable:
    logging.warning(
        "Inconsistent references when loading the checkpoint: the "
        "checkpoint reaches one object by two paths, the Python program "
        "reaches two objects (%s and %s). Either the program's object "
        "structure changed or the checkpoint comes from another program.",
        current, trackable)
  return False


class _RestoreBatch:
  """What one walk of a checkpoint found to restore; restored together."""

  __slots__ = ("cached", "tensor_saveables", "python_saveables",
               "variables", "registered", "errors", "walking", "slot_lists")

  def __init__(self):
    self.cached = []  # (name, saveable, cached restore op) (graph mode).
    self.tensor_saveables = {}  # Checkpoint key -> SaveableObject.
    self.python_saveables = []  # PythonStateSaveables.
    # (name, checkpoint key, stock resource variable) of plain variables.
    self.variables = []
    self.registered = {}  # Saver name -> {object name: trackable}.
    self.errors = []  # Values that do not fit, for the assertions to raise.
    self.walking = True  # False once the walk matches Keras 3 slot lists.
    self.slot_lists = []  # Positions of Keras 3 slot lists, matched last.

  def add_node(self, position):
    """Adds the saveables of `position`'s own attributes.

    A node a registered saver wrote is restored by that saver's restore
    function, unless the object is not one it accepts and the saver lets
    such objects be skipped (`skip_restore`).
    """
    saved_by = position.object_proto.registered_saver
    if saved_by.name:
      if registered_savers.should_restore(position.trackable, saved_by.name):
        self.registered.setdefault(saved_by.name, {})[
            saved_by.object_name] = position.trackable
      else:
        position.skip_restore = True
      return
    cached, by_key, python_state = position.gather_ops_or_named_saveables()
    self.cached.extend(cached)
    self.tensor_saveables.update(by_key)
    self.python_saveables.extend(python_state)

  def restore(self, checkpoint):
    """Restores everything gathered, as one plan; returns all restore ops.

    Restore ops are returned when graph building; registered savers
    restore their own files.
    """
    restore_ops = checkpoint.restore_saveables(
        self.tensor_saveables, self.python_saveables, self.variables,
        self.cached)
    if self.registered:
      restore_ops.extend(registered_savers.restore(
          self.registered, checkpoint.values.path_tensor))
    return restore_ops


def _plain_variable(checkpoint, node_id, trackable):
  """`(name, key, stock variable)` if `trackable` can skip bookkeeping, or None.

  Restoring many variables spends most of its time on bookkeeping that a
  stock resource variable (or a Keras 3 variable wrapping one) read from a
  plain node (its value only, no dependencies, no optimizer slots waiting
  for it) does not need: it is bound and its value queued as a
  `read_plan.ToVariable`, which the engine restores by its batched reads
  and assigns.
  """
  key = checkpoint.graph_index.plain_keys.get(node_id)
  if key is None or node_id in checkpoint.slots_by_variable:
    return None
  variable = saveable_object_util.stock_variable(trackable)
  if variable is None:
    return None
  return (key.removesuffix(trackable_utils.VARIABLE_VALUE_KEY), key,
          variable)


def _restore_plain_variable(checkpoint, trackable, plain):
  """Restores one bound plain variable (`_plain_variable`) eagerly.

  What the walk does for a plain child, for a variable tracked after the
  restore (its value most often read ahead): a plan of one `ToVariable`.
  """
  restore_uid = checkpoint.restore_uid
  if restore_uid > _update_uid(trackable):
    trackable._update_uid = restore_uid  # pylint: disable=protected-access
    checkpoint.restore_variable_eagerly(*plain)


def _update_uid(trackable):
  """The restore that last assigned `trackable` (made trackable if not)."""
  try:
    return trackable._update_uid  # pylint: disable=protected-access
  except AttributeError:
    trackable._maybe_initialize_trackable()  # pylint: disable=protected-access
    return trackable._update_uid  # pylint: disable=protected-access


def _restore_one(position, visit_queue, batch):
  """Gathers `position`'s own saveables into `batch`; queues its children.

  Children not yet present on the Python object are deferred: queued in
  the object's `_deferred_dependencies` until it tracks them. Plain
  variable children are bound and gathered here directly instead of being
  queued. A Keras 3 optimizer's slot list matches its slots to their
  variables (`keras3_slots`).
  """
  parent = position.trackable
  parent._maybe_initialize_trackable()  # pylint: disable=protected-access
  checkpoint = position.checkpoint
  if checkpoint.restore_uid > parent._update_uid:  # pylint: disable=protected-access
    batch.add_node(position)
    parent._update_uid = checkpoint.restore_uid  # pylint: disable=protected-access
  children = checkpoint.graph_index.children.get(position.proto_id)
  if not children:
    return
  slot_list = checkpoint.slot_lists.get(position.proto_id)
  if slot_list is not None:
    if batch.walking:
      # Matched once the walk has bound the model's variables.
      batch.slot_lists.append(position)
      return
    if _restore_slots_by_variable(position, slot_list, visit_queue, batch):
      _restore_waiting_slot_lists(checkpoint, slot_list, visit_queue, batch)
      return
    checkpoint.slot_lists.wait(slot_list, position)
  objects_by_node_id = checkpoint.objects_by_node_id
  current_children = parent._trackable_children()  # pylint: disable=protected-access
  slot_lists = checkpoint.slot_lists
  trainable_list = slot_lists.is_trainable_list(position.proto_id)
  for node_id, local_name in zip(*children):
    if node_id in objects_by_node_id:
      continue  # Already bound through another path.
    if trainable_list and slot_lists.reached_elsewhere(node_id):
      continue  # A Keras 3 optimizer's variable, bound through the model.
    # A Keras 3 slot reached by position (through `_variables`, or a slot
    # list assigned too early) may be another variable's: matched by its
    # list later, it is restored here only into a slot of its shape.
    only_if_it_fits = node_id in slot_lists.slot_ids
    local_object = parent._lookup_dependency(  # pylint: disable=protected-access
        local_name, current_children)
    if local_object is None:
      if checkpoint.node_has_values(node_id):
        deferred = CheckpointPosition(checkpoint, node_id)
        deferred.only_if_it_fits = only_if_it_fits
        deferred.defer_in(parent, local_name)
      continue
    if only_if_it_fits and not CheckpointPosition(
        checkpoint, node_id).fits(local_object):
      continue
    _bind_child(checkpoint, node_id, local_object, visit_queue, batch,
                parent, local_name)


def _restore_slots_by_variable(position, slot_list, visit_queue, batch):
  """Binds the slots of a Keras 3 slot list to their variables' slots.

  The slots may have been restored already by their place in the
  optimizer's `_variables` (which the optimizer fills before it assigns its
  slot lists): those that went to another variable's slot are restored
  again from the right node.

  Returns:
    False if the program's optimizer is not ready to match slots to
    variables: its slots are then matched by position.
  """
  checkpoint = position.checkpoint
  objects_by_node_id = checkpoint.objects_by_node_id
  slots = position.trackable
  variables = keras3_slots.trainable_variables(slot_list, objects_by_node_id,
                                               slots)
  if variables is None:
    return False
  _bind_late_variables(checkpoint, slot_list, variables, visit_queue, batch)
  for child in position.object_proto.children:
    slot = keras3_slots.slot_of(slot_list, int(child.local_name),
                                objects_by_node_id, variables, slots)
    _bind_slot(checkpoint, child.node_id, slot, visit_queue, batch, slots,
               child.local_name)
  return True


def _bind_late_variables(checkpoint, slot_list, variables, visit_queue,
                         batch):
  """Binds the trainable variables only the optimizer's list reaches."""
  late = checkpoint.slot_lists.unbound_variables(
      slot_list, checkpoint.objects_by_node_id, variables)
  if late:
    logging.warning(
        "%d Keras 3 model variable(s) restored only now that the optimizer "
        "is built: the checkpoint reaches them only as "
        "'optimizer/_trainable_variables/<i>' (Keras 3 does not save a "
        "model's plain lists of layers). Calls of the model before this "
        "used their initial values.", len(late))
  for node_id, variable in late:
    _bind_child(checkpoint, node_id, variable, visit_queue, batch)


def _bind_slot(checkpoint, node_id, slot, visit_queue, batch, parent=None,
               local_name=None):
  """Binds slot node `node_id` to the program's `slot` of its variable.

  The node may have been restored already by its place in the optimizer's
  `_variables` into another variable's slot: that slot gets its own value
  from its own node.
  """
  bound = checkpoint.objects_by_node_id.get(node_id)
  if bound is slot:
    return
  if bound is not None:
    checkpoint.unbind(node_id)
  if slot is not None:
    checkpoint.restore_again(slot)
    _bind_child(checkpoint, node_id, slot, visit_queue, batch, parent,
                local_name)


def _restore_unlisted_slots(checkpoint, visit_queue, batch, newest=None):
  """Matches the slots written under `_variables` only to their variables.

  Done once the program's optimizer has made its slots (`keras3_slots`);
  until then they are restored by position, each only into a slot of its
  shape. `newest`: a slot being added to the optimizer, if any.
  """
  objects_by_node_id = checkpoint.objects_by_node_id
  for unlisted in checkpoint.slot_lists.unlisted:
    optimizer = objects_by_node_id.get(unlisted.optimizer_id)
    layout = keras3_slots.unlisted_layout(unlisted, optimizer, newest)
    if layout is None:
      continue
    variables = optimizer._trainable_variables  # pylint: disable=protected-access
    _bind_late_variables(checkpoint, unlisted, variables, visit_queue, batch)
    for node_id, slot in keras3_slots.match_unlisted(
        unlisted, layout, objects_by_node_id, variables):
      _bind_slot(checkpoint, node_id, slot, visit_queue, batch)
    for name, list_id in unlisted.listed:
      slots = getattr(optimizer, name, None)
      if list_id not in objects_by_node_id and isinstance(slots, list):
        list_position = CheckpointPosition(checkpoint, list_id)
        list_position.bind_object(slots)
        _restore_slots_by_variable(list_position, checkpoint.slot_lists.get(
            list_id), visit_queue, batch)
    _restore_waiting_slot_lists(checkpoint, unlisted, visit_queue, batch)


def _restore_waiting_slot_lists(checkpoint, slot_list, visit_queue, batch):
  """Matches again the slot lists that the same optimizer assigned too early.

  An optimizer may assign a slot list before its `_trainable_variables`
  (Keras' EMA averages): matched by position then, its slots are matched
  to their variables once a later slot list of the optimizer can be.
  """
  for waiting in checkpoint.slot_lists.take_waiting(slot_list):
    if checkpoint.objects_by_node_id.get(waiting.proto_id) is not None:
      _restore_slots_by_variable(waiting, checkpoint.slot_lists.get(
          waiting.proto_id), visit_queue, batch)


def _bind_child(checkpoint, node_id, local_object, visit_queue, batch,
                parent=None, local_name=None):
  """Binds node `node_id` to `local_object`, gathering or queueing it.

  A value that does not fit a Keras 3 variable awaiting initialization is
  kept in `batch.errors`: the walk goes on (Keras would drop the error in
  the middle of building its model), and the status's assertions raise it.
  """
  plain = _plain_variable(checkpoint, node_id, local_object)
  if plain:
    if _bind(checkpoint, node_id, local_object, see=False):
      restore_uid = checkpoint.restore_uid
      if restore_uid > _update_uid(local_object):
        local_object._update_uid = restore_uid  # pylint: disable=protected-access
        batch.variables.append(plain)
    return
  child_position = CheckpointPosition(checkpoint, node_id)
  try:
    if child_position.initialize_when_awaited(local_object, parent,
                                              local_name):
      return
  except ValueError as e:
    batch.errors.append(e)
    return
  if child_position.bind_object(local_object):
    visit_queue.append(child_position)


def restore_breadth_first(position):
  """Restores the object bound to `position` and its reachable dependencies.

  Breadth first, so that shorter paths win when objects are shared; all
  values found in one walk are restored together.

  Returns:
    Restore ops when graph building, else an empty list.
  """
  return _walk(position.checkpoint, collections.deque([position]))


def restore_unlisted_slots(checkpoint, newest=None):
  """Matches Keras 3 slots written under `_variables` only, if it can now.

  `newest`: a slot being added to the optimizer, if any.

  Returns:
    Restore ops when graph building, else an empty list.
  """
  return _walk(checkpoint, collections.deque(), newest)


def _walk(checkpoint, visit_queue, newest=None):
  """Restores the nodes queued and what they reach; see `_restore_one`."""
  batch = _RestoreBatch()
  while visit_queue:
    _restore_one(visit_queue.popleft(), visit_queue, batch)
  batch.walking = False
  for slot_list in batch.slot_lists:
    visit_queue.append(slot_list)
    while visit_queue:
      _restore_one(visit_queue.popleft(), visit_queue, batch)
  if checkpoint.slot_lists.unlisted:
    _restore_unlisted_slots(checkpoint, visit_queue, batch, newest)
    while visit_queue:
      _restore_one(visit_queue.popleft(), visit_queue, batch)
  for error in batch.errors:
    checkpoint.keep_mismatch(error)
  return batch.restore(checkpoint)
