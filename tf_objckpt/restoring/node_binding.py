"""Binding checkpoint nodes to objects, and what one walk gathers to restore.

The restore walk binds each node of the checkpoint's object graph to the
program's object at the same path (`bind_object`; the coordinator records
it) and gathers what the node restores in a `RestoreBatch`: its saveables,
matched to its checkpointed attributes (`gather_saveables`), restored
together as one read plan. Binding a variable or an optimizer restores the
optimizer slots waiting for both. A plain variable (a stock resource
variable read from a node holding its value only, `plain_variable`) skips
this bookkeeping: bound and queued for the engine's batched reads.

`CheckpointPosition`'s methods of the same names (TensorFlow's) call these.
Positions of the nodes a walk goes on to are made by the restore's
coordinator (`checkpoint.position(node_id)`), so that the walk's modules
need not import the position's, which starts walks.
"""

from tf_objckpt.engine import registered_savers
from tf_objckpt.foundation import checkpoint_keys as trackable_utils
from tf_objckpt.foundation import tensorflow_internals
from tf_objckpt.restoring import object_graph_check
from tf_objckpt.saveables import python_state_saveables
from tf_objckpt.saveables import trackable_saveables


class RestoreBatch:
  """What one walk of a checkpoint found to restore; restored together."""

  __slots__ = ("cached", "tensor_saveables", "python_saveables", "variables",
               "registered", "errors")

  def __init__(self):
    self.cached = []  # (name, saveable, cached restore op) (graph mode).
    self.tensor_saveables = {}  # Checkpoint key -> SaveableObject.
    self.python_saveables = []  # PythonStateSaveables.
    # (name, checkpoint key, stock resource variable) of plain variables.
    self.variables = []
    self.registered = {}  # Saver name -> {object name: trackable}.
    self.errors = []  # Values that do not fit, for the assertions to raise.

  def add_node(self, position):
    """Adds the saveables of `position`'s own attributes.

    A node a registered saver wrote is restored by that saver's restore
    function, unless the object is not one it accepts and the saver lets
    such objects be skipped (`skip_restore`).
    """
    saved_by = position.object_proto.registered_saver
    if saved_by.name:
      if registered_savers.should_restore(position.trackable, saved_by.name):
        self.registered.setdefault(
            saved_by.name, {})[saved_by.object_name] = position.trackable
      else:
        position.skip_restore = True
      return
    cached, by_key, python_state = gather_saveables(position.checkpoint,
                                                    position.proto_id,
                                                    position.trackable)
    self.cached.extend(cached)
    self.tensor_saveables.update(by_key)
    self.python_saveables.extend(python_state)

  def restore(self, checkpoint):
    """Restores everything gathered, as one plan; returns all restore ops.

    Restore ops are returned when graph building; registered savers
    restore their own files.
    """
    restore_ops = checkpoint.restore_saveables(self.tensor_saveables,
                                               self.python_saveables,
                                               self.variables, self.cached)
    if self.registered:
      restore_ops.extend(
          registered_savers.restore(self.registered,
                                    checkpoint.values.path_tensor))
    return restore_ops


# ----------------------------------------------------------------------------
# Binding, and the optimizer slots it restores.
# ----------------------------------------------------------------------------


def bind_object(checkpoint, node_id, trackable):
  """Records that `trackable` is node `node_id`; restores its slots.

  Slot variables wait for both their variable and their optimizer: binding
  the second restores them.

  Returns:
    True if the correspondence is new, False if the node was already
    bound (to `trackable`, or, with a warning, to another object).
  """
  if not checkpoint.bind(node_id, trackable):
    return False
  _restore_slots_of_optimizer(checkpoint, node_id, trackable)
  _restore_slots_of_variable(checkpoint, node_id, trackable)
  return True


def _restore_slots_of_optimizer(checkpoint, node_id, optimizer):
  """Restores slots that waited for node `node_id`'s optimizer."""
  waiting = checkpoint.take_slots_awaiting_optimizer(node_id)
  if waiting and _holds_slots(checkpoint, optimizer, node_id):
    for deferred in waiting:
      _create_or_restore_slot(checkpoint, optimizer, deferred.original_variable,
                              deferred.slot_variable_id, deferred.slot_name)


def _restore_slots_of_variable(checkpoint, node_id, variable):
  """Restores (or keeps waiting) the optimizer slots of node `node_id`."""
  slots = checkpoint.take_slots_of_variable(node_id)
  if slots and not trackable_saveables.is_variable(variable):
    raise _mismatched_slots(
        checkpoint, node_id, "optimizers hold slots for it as a variable, "
        f"but its object is not a variable ({type(variable).__name__})")
  for slot in slots:
    optimizer = checkpoint.bound_objects.get(slot.optimizer_id)
    if optimizer is None:
      checkpoint.await_optimizer(slot.optimizer_id, variable, slot)
    elif _holds_slots(checkpoint, optimizer, slot.optimizer_id):
      _create_or_restore_slot(checkpoint, optimizer, variable,
                              slot.slot_variable_id, slot.slot_name)


def _holds_slots(checkpoint, optimizer, optimizer_id):
  """Whether slots are restored into `optimizer`, bound to `optimizer_id`.

  An object without slots (a `Checkpoint` standing in for an optimizer to
  restore its step counter) restores none, as in TensorFlow.

  Raises:
    DataLossError: If the object is a variable: the checkpoint's path to
      it leads to an optimizer.
  """
  if trackable_saveables.is_variable(optimizer):
    raise _mismatched_slots(
        checkpoint, optimizer_id, "it holds slot variables, but its object "
        "is a variable")
  return hasattr(optimizer, "_create_or_restore_slot_variable")


def _mismatched_slots(checkpoint, node_id, problem):
  """The error of a slot whose objects are of the wrong kind."""
  return object_graph_check.damaged_graph_error(checkpoint.object_graph_proto,
                                                checkpoint.values.save_path,
                                                [(node_id, problem)])


def _create_or_restore_slot(checkpoint, optimizer, variable, slot_variable_id,
                            slot_name):
  """Has `optimizer` create (or find) a slot, then restores the slot.

  Older optimizers restore the slot themselves and return None; newer
  ones (Keras' OptimizerV2) return the slot for the caller to restore.
  """
  position = checkpoint.position(slot_variable_id)
  slot_variable = tensorflow_internals.create_or_restore_slot_variable(
      optimizer,
      slot_variable_position=position,
      variable=variable,
      slot_name=slot_name)
  if slot_variable is not None:
    position.restore(slot_variable)


# ----------------------------------------------------------------------------
# Plain variables.
# ----------------------------------------------------------------------------


def plain_variable(checkpoint, node_id, trackable):
  """`(name, key, stock variable)` if `trackable` can skip bookkeeping, or None.

  Restoring many variables spends most of its time on bookkeeping that a
  stock resource variable (or a Keras 3 variable wrapping one) read from a
  plain node (its value only, no dependencies, no optimizer slots waiting
  for it) does not need: it is bound and its value queued as a
  `read_plan.ToVariable`, which the engine restores by its batched reads
  and assigns.
  """
  key = checkpoint.graph_index.plain_keys.get(node_id)
  if key is None or checkpoint.slots_wait_for(node_id):
    return None
  variable = trackable_saveables.stock_variable(trackable)
  if variable is None:
    return None
  return (key.removesuffix(trackable_utils.VARIABLE_VALUE_KEY), key, variable)


def restore_plain_variable(checkpoint, trackable, plain):
  """Restores one bound plain variable (`plain_variable`) eagerly.

  What the walk does for a plain child, for a variable tracked after the
  restore (its value most often read ahead): a plan of one `ToVariable`.
  """
  if checkpoint.mark_restored(trackable):
    checkpoint.restore_variable_eagerly(*plain)


# ----------------------------------------------------------------------------
# A node's saveables, matched to its checkpointed attributes.
# ----------------------------------------------------------------------------


def gather_saveables(checkpoint, node_id, trackable):
  """Finds cached restore ops, or makes saveables, for node `node_id`.

  Returns:
    A tuple (`(name, saveable, restore op)` of saveables whose restore
    ops an earlier restore built, {checkpoint key: saveable}, Python
    state saveables).
  """
  stored = checkpoint.object_graph_proto.nodes[node_id].attributes
  if not stored:
    return [], {}, []
  factories = trackable_saveables.saveable_objects_from_trackable(trackable)
  if (len(factories) == 1 and
      trackable_utils.SERIALIZE_TO_TENSORS_NAME in factories):
    return _whole_object_saveable(checkpoint, factories, stored, trackable)
  return _saveables_by_attribute(checkpoint, node_id, factories, stored,
                                 trackable)


def _whole_object_saveable(checkpoint, factories, attributes, trackable):
  """One saveable restores every attribute (`_serialize_to_tensors`)."""
  key = trackable_utils.saveable_name(attributes[0].checkpoint_key)
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


def _saveables_by_attribute(checkpoint, node_id, factories, attributes,
                            trackable):
  """Matches checkpointed attributes to the object's saveable factories."""
  cached, named_saveables, python_saveables = [], {}, []
  for attribute in attributes:
    key = attribute.checkpoint_key
    saveable = checkpoint.cached_saveable(trackable, attribute.name)
    if saveable is not None and key not in saveable.name:
      saveable = None  # The object moved in the graph; names changed.
    if saveable is None:
      factory = factories.get(attribute.name)
      if factory is None:
        # TensorFlow 2.21's SerializedTensor has no optional_restore: an
        # attribute without a saveable is always reported as unused.
        checkpoint.record_unused_attribute(node_id, attribute.name)
        continue
      saveable = factory(name=key) if callable(factory) else factory
      checkpoint.cache_saveable(trackable, attribute.name, saveable)
    existing_op = checkpoint.cached_restore_op(key)
    if existing_op is not None:
      cached.append((key, saveable, existing_op))
    elif isinstance(saveable, python_state_saveables.PythonStateSaveable):
      python_saveables.append(saveable)
    else:
      named_saveables[key] = saveable
  return cached, named_saveables, python_saveables
