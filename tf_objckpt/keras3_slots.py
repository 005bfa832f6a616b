"""Keras 3 optimizer slots, matched to their variables by object path.

A Keras 3 optimizer writes no slot variable records. It tracks each kind of
slot in a list parallel to its `_trainable_variables` (`_momentums`,
`_velocities`, ...), and every variable it owns in `_variables` as well.
Element i of a slot list is the slot of the variable at
`_trainable_variables/i`, whose node the checkpoint shares with the model's
path to that variable. So each slot is restored into the slot the program's
optimizer keeps for the variable bound to that node, wherever that variable
stands in the optimizer's own lists: an optimizer built on the variables in
another order, or on some of them, gets the slots of its own variables, and
slots of variables it does not hold are left unmatched (and reported).
"""

import typing

_TRAINABLE_VARIABLES = "_trainable_variables"
_OWNED_VARIABLES = "_variables"


class SlotList(typing.NamedTuple):
  """A checkpointed slot list: its optimizer and its slots' variables."""
  optimizer_id: int
  variable_ids: typing.List[int]  # The node of each element's variable.


def _list_elements(nodes, node_id):
  """The node ids of a checkpointed list's elements in order, or None."""
  children = nodes[node_id].children
  by_index = {}
  for child in children:
    if not child.local_name.isdigit():
      return None
    by_index[int(child.local_name)] = child.node_id
  if sorted(by_index) != list(range(len(by_index))):
    return None
  return [by_index[index] for index in range(len(by_index))]


class SlotLists:
  """The slot lists of the Keras 3 optimizers in one checkpoint."""

  def __init__(self, object_graph_proto):
    nodes = object_graph_proto.nodes
    self._lists = {}  # Slot list node id -> SlotList.
    self.slot_ids = set()  # The nodes of all slots in those lists.
    # Optimizer node id -> positions of slot lists matched by position.
    self._waiting = {}
    self._trainable_list_ids = set()
    # Trainable variables that a path outside the optimizers reaches too.
    self._reached_elsewhere = set()
    # Searching the serialized graph is far faster than visiting every
    # node in Python, and most checkpoints hold no Keras 3 optimizer.
    if _TRAINABLE_VARIABLES.encode() not in (
        object_graph_proto.SerializeToString()):
      return
    for node_id in range(len(nodes)):
      self._add_optimizer(nodes, node_id)
    if self._trainable_list_ids:
      self._find_other_paths(nodes)

  def _add_optimizer(self, nodes, node_id):
    """Records the slot lists of node `node_id`, if a Keras 3 optimizer."""
    children = {child.local_name: child.node_id
                for child in nodes[node_id].children}
    if (_TRAINABLE_VARIABLES not in children or
        _OWNED_VARIABLES not in children):
      return
    trainable_list_id = children[_TRAINABLE_VARIABLES]
    variable_ids = _list_elements(nodes, trainable_list_id)
    owned = _list_elements(nodes, children[_OWNED_VARIABLES])
    if not variable_ids or owned is None:
      return
    self._trainable_list_ids.add(trainable_list_id)
    owned = set(owned) - set(variable_ids)
    for name, list_id in children.items():
      elements = _list_elements(nodes, list_id)
      if (name != _OWNED_VARIABLES and elements and
          len(elements) == len(variable_ids) and owned.issuperset(elements)):
        self._lists[list_id] = SlotList(node_id, variable_ids)
        self.slot_ids.update(elements)

  def _find_other_paths(self, nodes):
    """Finds the trainable variables reached other than as optimizer's."""
    variable_ids = set()
    for list_id in self._trainable_list_ids:
      variable_ids.update(child.node_id for child in nodes[list_id].children)
    for node_id, node in enumerate(nodes):
      if node_id not in self._trainable_list_ids:
        self._reached_elsewhere.update(
            child.node_id for child in node.children
            if child.node_id in variable_ids)

  def is_trainable_list(self, list_id):
    """Whether node `list_id` is an optimizer's `_trainable_variables`."""
    return list_id in self._trainable_list_ids

  def reached_elsewhere(self, variable_id):
    """Whether a path outside the optimizers reaches `variable_id` too.

    That path (the model's) then binds it: the optimizer's list, whose
    order is the order the program's optimizer was built on, does not.
    """
    return variable_id in self._reached_elsewhere

  def unbound_variables(self, slot_list, objects_by_node_id, variables):
    """`(node id, variable)` of trainable variables bound to no node yet.

    The optimizer's `_trainable_variables/i` may be the only path to a
    model variable (Keras 3 does not save a model's plain lists of layers).
    The program's optimizer replaces that list when it is built, so its
    elements are paired here, by the path TensorFlow writes, with the nodes
    that no other path reaches (`reached_elsewhere`).
    """
    bound = {id(obj) for obj in objects_by_node_id.values()}
    return [(node_id, variable)
            for node_id, variable in zip(slot_list.variable_ids, variables)
            if node_id not in objects_by_node_id and
            id(variable) not in bound and
            node_id not in self._reached_elsewhere]

  def get(self, list_id):
    """The `SlotList` at node `list_id`, or None if it is not one."""
    return self._lists.get(list_id)

  def wait(self, slot_list, position):
    """Keeps a slot list matched by position, to match it again later."""
    self._waiting.setdefault(slot_list.optimizer_id, []).append(position)

  def take_waiting(self, slot_list):
    """The positions kept by `wait` for `slot_list`'s optimizer."""
    return self._waiting.pop(slot_list.optimizer_id, ())


def trainable_variables(slot_list, objects_by_node_id, slots):
  """The variables that the program's `slots` list follows, or None.

  None when the program's optimizer is not bound or is still being built
  (its trainable variable list does not match `slots` yet): the slots are
  then matched by position, as TensorFlow matches them.
  """
  optimizer = objects_by_node_id.get(slot_list.optimizer_id)
  variables = getattr(optimizer, _TRAINABLE_VARIABLES, None)
  if variables is None or len(variables) != len(slots):
    return None
  return variables


def slot_of(slot_list, index, objects_by_node_id, variables, slots):
  """The program's slot for element `index` of the checkpointed list.

  None when the variable of that element is not bound, or the program's
  optimizer does not hold it.
  """
  variable = objects_by_node_id.get(slot_list.variable_ids[index])
  if variable is None:
    return None
  for position, candidate in enumerate(variables):
    if candidate is variable:
      return slots[position]
  return None
