"""The restore walk's Keras 3 steps, behind one hook: slots bound by variable.

A Keras 3 optimizer's slot lists (`keras3_slots`) are not walked by
position like other lists: once the walk has bound the model's variables,
each slot is bound to the program's slot of the variable bound to its
list element's node. Slots written under the optimizer's `_variables` only
are matched once its slots exist, and so are the slot lists an optimizer
assigned too early. Until then such slots are restored by position, each
only into a slot of its shape. Model variables the checkpoint reaches only
through the optimizer are bound late, with a warning.

`Keras3SlotSteps` is what the walk (`restore_walk.RestoreWalk`) asks, at
three points: whether it takes a node's children (`takes_children`),
which children the walk skips or restores only if they fit
(`child_rules`), and what to bind once the walk is done (`after_walk`).
"""

from tensorflow.python.platform import tf_logging as logging

from tf_objckpt.foundation import tensorflow_internals
from tf_objckpt.restoring import keras3_slots

_NO_RULES: tuple = (frozenset(), frozenset())


class _ReachedElsewhere:
  """The children of an optimizer's `_trainable_variables` the walk skips:
  those a path outside the optimizers reaches (the model's binds them)."""

  __slots__ = ("_slot_lists",)

  def __init__(self, slot_lists):
    self._slot_lists = slot_lists

  def __contains__(self, node_id):
    return self._slot_lists.reached_elsewhere(node_id)


class Keras3SlotSteps:
  """The Keras 3 steps of one walk (see the module docstring)."""

  def __init__(self, walk):
    self._walk = walk
    self._checkpoint = walk.checkpoint
    self._slot_lists = self._checkpoint.slot_lists
    self._walking = True  # False once the walk matches the slot lists.
    self._kept_lists = []  # Positions of slot lists, matched after the walk.

  def takes_children(self, position):
    """Binds the slots of `position`'s node if it is a Keras 3 slot list.

    While the walk binds the model's variables, a slot list is kept for
    later; then its slots are bound to their variables' slots, unless the
    program's optimizer is not ready: the list then waits for a later slot
    list of its optimizer, and is walked by position.

    Returns:
      True if this handled the node's children; False if they are to be
      walked by position (not a slot list, or its optimizer is not ready).
    """
    slot_list = self._slot_lists.get(position.proto_id)
    if slot_list is None:
      return False
    if self._walking:
      # Matched once the walk has bound the model's variables.
      self._kept_lists.append(position)
      return True
    if self._restore_slots_by_variable(position, slot_list):
      self._restore_waiting_slot_lists(slot_list)
      return True
    self._slot_lists.wait(slot_list, position)
    return False

  def child_rules(self, node_id):
    """`(skipped, fit_only)`: node ids among node `node_id`'s children that
    the walk skips, and those it restores only into an object of their
    shape.

    An optimizer's `_trainable_variables` skips the variables the model
    reaches (the model binds them). A Keras 3 slot reached by position
    (through `_variables`, or a slot list assigned too early) may be
    another variable's: matched by its list later, it is restored by
    position only into a slot of its shape.
    """
    slot_lists = self._slot_lists
    if not slot_lists.slot_ids and not slot_lists.is_trainable_list(node_id):
      return _NO_RULES
    skipped = (_ReachedElsewhere(slot_lists)
               if slot_lists.is_trainable_list(node_id) else frozenset())
    return skipped, slot_lists.slot_ids

  def after_walk(self, newest=None):
    """Binds the slots by variable, once the walk has bound the model.

    `newest`: a slot being added to the optimizer, if any.
    """
    self._walking = False
    for position in self._kept_lists:
      self._walk.visit(position)
      self._walk.drain()
    if self._slot_lists.unlisted:
      self._bind_unlisted_slots(newest)
      self._walk.drain()

  def _restore_slots_by_variable(self, position, slot_list):
    """Binds the slots of a Keras 3 slot list to their variables' slots.

    The slots may have been restored already by their place in the
    optimizer's `_variables` (which the optimizer fills before it assigns
    its slot lists): those that went to another variable's slot are
    restored again from the right node.

    Returns:
      False if the program's optimizer is not ready to match slots to
      variables: its slots are then matched by position.
    """
    bound = self._checkpoint.bound_objects
    slots = position.trackable
    variables = keras3_slots.trainable_variables(slot_list, bound, slots)
    if variables is None:
      return False
    self._bind_late_variables(slot_list, variables)
    for child in position.object_proto.children:
      slot = keras3_slots.slot_of(slot_list, int(child.local_name), bound,
                                  variables, slots)
      self._bind_slot(child.node_id, slot, slots, child.local_name)
    return True

  def _bind_late_variables(self, slot_list, variables):
    """Binds the trainable variables only the optimizer's list reaches."""
    late = self._slot_lists.unbound_variables(slot_list,
                                              self._checkpoint.bound_objects,
                                              variables)
    if late:
      logging.warning(
          "%d Keras 3 model variable(s) restored only now that the optimizer "
          "is built: the checkpoint reaches them only as "
          "'optimizer/_trainable_variables/<i>' (Keras 3 does not save a "
          "model's plain lists of layers). Calls of the model before this "
          "used their initial values.", len(late))
    for node_id, variable in late:
      self._walk.bind_child(node_id, variable)

  def _bind_slot(self, node_id, slot, parent=None, local_name=None):
    """Binds slot node `node_id` to the program's `slot` of its variable.

    The node may have been restored already by its place in the optimizer's
    `_variables` into another variable's slot: that slot gets its own value
    from its own node.
    """
    checkpoint = self._checkpoint
    bound = checkpoint.bound_objects.get(node_id)
    if bound is slot:
      return
    if bound is not None:
      checkpoint.unbind(node_id)
    if slot is not None:
      checkpoint.restore_again(slot)
      self._walk.bind_child(node_id, slot, parent, local_name)

  def _bind_unlisted_slots(self, newest=None):
    """Matches the slots written under `_variables` only to their variables.

    Done once the program's optimizer has made its slots (`keras3_slots`);
    until then they are restored by position, each only into a slot of its
    shape. `newest`: a slot being added to the optimizer, if any.
    """
    checkpoint = self._checkpoint
    bound = checkpoint.bound_objects
    for unlisted in self._slot_lists.unlisted:
      optimizer = bound.get(unlisted.optimizer_id)
      layout = keras3_slots.unlisted_layout(unlisted, optimizer, newest)
      if layout is None:
        continue
      variables = tensorflow_internals.trainable_variables(optimizer)
      self._bind_late_variables(unlisted, variables)
      for node_id, slot in keras3_slots.match_unlisted(unlisted, layout, bound,
                                                       variables):
        self._bind_slot(node_id, slot)
      for name, list_id in unlisted.listed:
        slots = getattr(optimizer, name, None)
        if list_id not in bound and isinstance(slots, list):
          list_position = checkpoint.position(list_id)
          list_position.bind_object(slots)
          self._restore_slots_by_variable(list_position,
                                          self._slot_lists.get(list_id))
      self._restore_waiting_slot_lists(unlisted)

  def _restore_waiting_slot_lists(self, slot_list):
    """Matches again the slot lists the same optimizer assigned too early.

    An optimizer may assign a slot list before its `_trainable_variables`
    (Keras' EMA averages): matched by position then, its slots are matched
    to their variables once a later slot list of the optimizer can be.
    """
    bound = self._checkpoint.bound_objects
    for waiting in self._slot_lists.take_waiting(slot_list):
      if bound.get(waiting.proto_id) is not None:
        self._restore_slots_by_variable(waiting,
                                        self._slot_lists.get(waiting.proto_id))
