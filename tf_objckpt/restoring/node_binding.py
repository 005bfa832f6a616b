"""Binding checkpoint nodes to objects, and what one walk gathers to restore.

The restore walk binds each node of the checkpoint's object graph to the
program's object at the same path (`bind`, `bind_child`) and gathers the
values of everything it binds in a `RestoreBatch`, restored together as one
read plan. A plain variable (a stock resource variable read from a node
holding its value only, `plain_variable`) skips the bookkeeping of
positions: bound here and queued for the engine's batched reads.

Positions of the nodes the walk goes on to (`CheckpointPosition`) are made
by the restore's coordinator (`checkpoint.position(node_id)`), so that the
walk's modules need not import the position's, which starts walks.
"""

from tensorflow.python.platform import tf_logging as logging

from tf_objckpt.engine import registered_savers
from tf_objckpt.foundation import checkpoint_keys as trackable_utils
from tf_objckpt.saveables import trackable_saveables


def bind(checkpoint, node_id, trackable, see=True):
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


class RestoreBatch:
  """What one walk of a checkpoint found to restore; restored together."""

  __slots__ = ("cached", "tensor_saveables", "python_saveables", "variables",
               "registered", "errors", "walking", "slot_lists")

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
        self.registered.setdefault(
            saved_by.name, {})[saved_by.object_name] = position.trackable
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
    restore_ops = checkpoint.restore_saveables(self.tensor_saveables,
                                               self.python_saveables,
                                               self.variables, self.cached)
    if self.registered:
      restore_ops.extend(
          registered_savers.restore(self.registered,
                                    checkpoint.values.path_tensor))
    return restore_ops


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
  if key is None or node_id in checkpoint.slots_by_variable:
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


def bind_child(checkpoint,
               node_id,
               local_object,
               visit_queue,
               batch,
               parent=None,
               local_name=None):
  """Binds node `node_id` to `local_object`, gathering or queueing it.

  A value that does not fit a Keras 3 variable awaiting initialization is
  kept in `batch.errors`: the walk goes on (Keras would drop the error in
  the middle of building its model), and the status's assertions raise it.
  """
  plain = plain_variable(checkpoint, node_id, local_object)
  if plain:
    if bind(checkpoint, node_id, local_object, see=False):
      restore_uid = checkpoint.restore_uid
      if restore_uid > _update_uid(local_object):
        local_object._update_uid = restore_uid  # pylint: disable=protected-access
        batch.variables.append(plain)
    return
  child_position = checkpoint.position(node_id)
  try:
    if child_position.initialize_when_awaited(local_object, parent, local_name):
      return
  except ValueError as e:
    batch.errors.append(e)
    return
  if child_position.bind_object(local_object):
    visit_queue.append(child_position)
