"""The restore walk's Keras 3 steps: optimizer slots bound by variable.

A Keras 3 optimizer's slot lists (`keras3_slots`) are not walked by
position like other lists: once the walk has bound the model's variables,
each slot is bound to the program's slot of the variable bound to its
list element's node (`binds_slot_list`). Slots written under the
optimizer's `_variables` only are matched once its slots exist
(`bind_unlisted_slots`), and so are the slot lists an optimizer assigned
too early. Until then such slots are restored by position, each only into
a slot of its shape. Model variables the checkpoint reaches only through
the optimizer are bound late, with a warning.
"""

from tensorflow.python.platform import tf_logging as logging

from tf_objckpt.restoring import keras3_slots
from tf_objckpt.restoring import node_binding


def binds_slot_list(position, visit_queue, batch):
  """Binds the slots of `position`'s node if it is a Keras 3 slot list.

  While the walk binds the model's variables, a slot list is kept for
  later (`batch.slot_lists`); then its slots are bound to their variables'
  slots, unless the program's optimizer is not ready: the list then waits
  for a later slot list of its optimizer, and is walked by position.

  Returns:
    True if this handled the node's children; False if they are to be
    walked by position (not a slot list, or its optimizer is not ready).
  """
  checkpoint = position.checkpoint
  slot_list = checkpoint.slot_lists.get(position.proto_id)
  if slot_list is None:
    return False
  if batch.walking:
    # Matched once the walk has bound the model's variables.
    batch.slot_lists.append(position)
    return True
  if _restore_slots_by_variable(position, slot_list, visit_queue, batch):
    _restore_waiting_slot_lists(checkpoint, slot_list, visit_queue, batch)
    return True
  checkpoint.slot_lists.wait(slot_list, position)
  return False


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


def _bind_late_variables(checkpoint, slot_list, variables, visit_queue, batch):
  """Binds the trainable variables only the optimizer's list reaches."""
  late = checkpoint.slot_lists.unbound_variables(slot_list,
                                                 checkpoint.objects_by_node_id,
                                                 variables)
  if late:
    logging.warning(
        "%d Keras 3 model variable(s) restored only now that the optimizer "
        "is built: the checkpoint reaches them only as "
        "'optimizer/_trainable_variables/<i>' (Keras 3 does not save a "
        "model's plain lists of layers). Calls of the model before this "
        "used their initial values.", len(late))
  for node_id, variable in late:
    node_binding.bind_child(checkpoint, node_id, variable, visit_queue, batch)


def _bind_slot(checkpoint,
               node_id,
               slot,
               visit_queue,
               batch,
               parent=None,
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
    node_binding.bind_child(checkpoint, node_id, slot, visit_queue, batch,
                            parent, local_name)


def bind_unlisted_slots(checkpoint, visit_queue, batch, newest=None):
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
    for node_id, slot in keras3_slots.match_unlisted(unlisted, layout,
                                                     objects_by_node_id,
                                                     variables):
      _bind_slot(checkpoint, node_id, slot, visit_queue, batch)
    for name, list_id in unlisted.listed:
      slots = getattr(optimizer, name, None)
      if list_id not in objects_by_node_id and isinstance(slots, list):
        list_position = checkpoint.position(list_id)
        list_position.bind_object(slots)
        _restore_slots_by_variable(list_position,
                                   checkpoint.slot_lists.get(list_id),
                                   visit_queue, batch)
    _restore_waiting_slot_lists(checkpoint, unlisted, visit_queue, batch)


def _restore_waiting_slot_lists(checkpoint, slot_list, visit_queue, batch):
  """Matches again the slot lists that the same optimizer assigned too early.

  An optimizer may assign a slot list before its `_trainable_variables`
  (Keras' EMA averages): matched by position then, its slots are matched
  to their variables once a later slot list of the optimizer can be.
  """
  for waiting in checkpoint.slot_lists.take_waiting(slot_list):
    if checkpoint.objects_by_node_id.get(waiting.proto_id) is not None:
      _restore_slots_by_variable(waiting,
                                 checkpoint.slot_lists.get(waiting.proto_id),
                                 visit_queue, batch)
