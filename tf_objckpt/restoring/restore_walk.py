"""The restore walk: matching a checkpoint's object graph to Python objects.

Entry points, each a walk of the checkpoint from bound nodes:
- `restore_from_root`: a restore (`TrackableSaver.restore`) restores node 0
  into the root, then the objects attached to the root.
- `restore_node`: restores one node, and what it reaches, into an object
  (what each of those two does; a position restored later, by
  restore-on-create, does the same).
- `restore_breadth_first`: walks on from a position just bound.

A walk (`RestoreWalk`) goes breadth first from its bound nodes, binding
each node to the Python object at the same path of local names
(`node_binding`), and gathers the values of everything it binds to restore
them together, as one read plan. It owns its queue. A node whose object
does not exist yet is queued in its parent's `_deferred_dependencies` and
restored when the parent starts tracking an object under that name
("restore-on-create"). The Keras 3 optimizers' slots are bound by variable,
behind one hook (`keras3_slot_binding.Keras3SlotSteps`).
"""

import collections

from tf_objckpt.foundation import tensorflow_internals
from tf_objckpt.restoring import keras3_slot_binding
from tf_objckpt.restoring import node_binding


def restore_from_root(checkpoint, root, attached_dependencies=()):
  """Restores a checkpoint into `root`, and into the objects attached to it.

  With an object map (`object_maps`), each pair's node is restored into
  its object first; then, unless a pair names the root, node 0 into the
  root as usual, the walk leaving the pairs' nodes and objects alone. The
  attached objects (a `Checkpoint(root=...)`'s save counter) restore from
  the checkpoint's root in any case.

  Args:
    checkpoint: The `CheckpointRestoreCoordinator` of the restore.
    root: The object node 0 is restored into.
    attached_dependencies: References (`TrackableReference`s) to objects
      saved as the root's children without being its dependencies
      (`Checkpoint(root=...)`); each is restored from the root's child of
      its name, unless already bound.
  """
  object_map = checkpoint.object_map
  if object_map is not None:
    for pair in object_map.pairs:
      restore_node(checkpoint, pair.node_id, pair.trackable)
  if object_map is None or not object_map.covers_root:
    restore_node(checkpoint, 0, root)
  root_children = {
      child.local_name: child.node_id
      for child in checkpoint.object_graph_proto.nodes[0].children
  }
  for reference in attached_dependencies:
    node_id = root_children.get(reference.name)
    if (reference.name != "root" and node_id is not None and
        node_id not in checkpoint.bound_objects):
      restore_node(checkpoint, node_id, reference.ref)


def restore_node(checkpoint, node_id, trackable):
  """Restores node `node_id`, and what it reaches, into `trackable`.

  Values of objects that exist are restored now (eagerly) or get restore
  ops (graph building); the others wait for their objects.
  """
  checkpoint.position(node_id).restore(trackable)


def restore_breadth_first(position):
  """Restores the object bound to `position` and its reachable dependencies.

  Breadth first, so that shorter paths win when objects are shared; all
  values found in one walk are restored together.

  Returns:
    Restore ops when graph building, else an empty list.
  """
  return RestoreWalk(position.checkpoint).run([position])


def restore_unlisted_slots(checkpoint, newest=None):
  """Matches Keras 3 slots written under `_variables` only, if it can now.

  `newest`: a slot being added to the optimizer, if any.

  Returns:
    Restore ops when graph building, else an empty list.
  """
  return RestoreWalk(checkpoint).run((), newest)


class RestoreWalk:
  """One walk: its queue of bound positions, and what it gathers.

  `run` walks from the positions given: each is restored (its saveables
  gathered into `batch`) and its children bound and queued, or deferred;
  then the Keras 3 steps bind slots by variable; then the batch is
  restored, as one plan.
  """

  def __init__(self, checkpoint):
    self.checkpoint = checkpoint
    self._object_map = checkpoint.object_map
    self.batch = node_binding.RestoreBatch()
    self._queue = collections.deque()
    self._keras3 = keras3_slot_binding.Keras3SlotSteps(self)

  def run(self, positions, newest=None):
    """Walks from `positions` (bound); restores what it found.

    `newest`: a Keras 3 slot being added to its optimizer, if any.

    Returns:
      Restore ops when graph building, else an empty list.
    """
    for position in positions:
      self.visit(position)
    self.drain()
    self._keras3.after_walk(newest)
    for error in self.batch.errors:
      self.checkpoint.keep_mismatch(error)
    return self.batch.restore(self.checkpoint)

  def visit(self, position):
    """Queues a bound position: its node is restored, its children walked."""
    self._queue.append(position)

  def drain(self):
    """Restores the queued positions, and those their children queue."""
    queue = self._queue
    while queue:
      self._restore_one(queue.popleft())

  def _restore_one(self, position):
    """Gathers `position`'s own saveables; binds or defers its children.

    Children not yet present on the Python object are deferred: queued in
    the object's `_deferred_dependencies` until it tracks them. Plain
    variable children are bound and gathered here directly instead of being
    queued. A Keras 3 optimizer's slot list is the hook's.
    """
    parent = position.trackable
    checkpoint = self.checkpoint
    if not checkpoint.assigned(parent):
      self.batch.add_node(position)
      checkpoint.mark_restored(parent)
    children = checkpoint.graph_index.children.get(position.proto_id)
    if not children or self._keras3.takes_children(position):
      return
    bound = checkpoint.bound_objects
    current_children = tensorflow_internals.children(parent)
    skipped, fit_only = self._keras3.child_rules(position.proto_id)
    object_map = self._object_map
    for node_id, local_name in zip(*children):
      if node_id in bound or node_id in skipped:
        continue  # Bound through another path.
      only_if_it_fits = node_id in fit_only
      local_object = tensorflow_internals.lookup_dependency(
          parent, local_name, current_children)
      if object_map is not None and object_map.takes_elsewhere(
          node_id, local_object):
        continue  # An object map's pair binds it.
      if local_object is None:
        if checkpoint.node_has_values(node_id):
          deferred = checkpoint.position(node_id)
          deferred.only_if_it_fits = only_if_it_fits
          deferred.defer_in(parent, local_name)
        continue
      if only_if_it_fits and not checkpoint.position(node_id).fits(
          local_object):
        continue
      self.bind_child(node_id, local_object, parent, local_name)

  def bind_child(self, node_id, local_object, parent=None, local_name=None):
    """Binds node `node_id` to `local_object`, gathering or queueing it.

    A value that does not fit a Keras 3 variable awaiting initialization is
    kept in `batch.errors`: the walk goes on (Keras would drop the error in
    the middle of building its model), and the status's assertions raise it.
    """
    checkpoint = self.checkpoint
    plain = node_binding.plain_variable(checkpoint, node_id, local_object)
    if plain:
      if (checkpoint.bind(node_id, local_object, see=False) and
          checkpoint.mark_restored(local_object)):
        self.batch.variables.append(plain)
      return
    child_position = checkpoint.position(node_id)
    try:
      if child_position.initialize_when_awaited(local_object, parent,
                                                local_name):
        return
    except ValueError as e:
      self.batch.errors.append(e)
      return
    if child_position.bind_object(local_object):
      self.visit(child_position)
