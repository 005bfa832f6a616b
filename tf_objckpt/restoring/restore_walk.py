"""The restore walk: matching a checkpoint's object graph to Python objects.

Restoring walks the checkpoint breadth first from a bound node (a
`CheckpointPosition`), binding each node to the Python object at the same
path of local names (`node_binding`), and gathers the values of everything
it binds to restore them together, as one read plan. A node whose object
does not exist yet is queued in its parent's `_deferred_dependencies` and
restored when the parent starts tracking an object under that name
("restore-on-create"). A Keras 3 optimizer's slots are bound to their
variables once the walk has bound the model's (`keras3_slot_binding`).
"""

import collections

from tf_objckpt.restoring import keras3_slot_binding
from tf_objckpt.restoring import node_binding


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
  batch = node_binding.RestoreBatch()
  while visit_queue:
    _restore_one(visit_queue.popleft(), visit_queue, batch)
  batch.walking = False
  for slot_list in batch.slot_lists:
    visit_queue.append(slot_list)
    while visit_queue:
      _restore_one(visit_queue.popleft(), visit_queue, batch)
  if checkpoint.slot_lists.unlisted:
    keras3_slot_binding.bind_unlisted_slots(checkpoint, visit_queue, batch,
                                            newest)
    while visit_queue:
      _restore_one(visit_queue.popleft(), visit_queue, batch)
  for error in batch.errors:
    checkpoint.keep_mismatch(error)
  return batch.restore(checkpoint)


def _restore_one(position, visit_queue, batch):
  """Gathers `position`'s own saveables into `batch`; queues its children.

  Children not yet present on the Python object are deferred: queued in
  the object's `_deferred_dependencies` until it tracks them. Plain
  variable children are bound and gathered here directly instead of being
  queued. A Keras 3 optimizer's slot list matches its slots to their
  variables (`keras3_slot_binding`).
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
  if keras3_slot_binding.binds_slot_list(position, visit_queue, batch):
    return
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
        deferred = checkpoint.position(node_id)
        deferred.only_if_it_fits = only_if_it_fits
        deferred.defer_in(parent, local_name)
      continue
    if only_if_it_fits and not checkpoint.position(node_id).fits(local_object):
      continue
    node_binding.bind_child(checkpoint, node_id, local_object, visit_queue,
                            batch, parent, local_name)
