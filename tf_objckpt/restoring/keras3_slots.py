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

Keras 3.3 to 3.8 at least (3.3.3 is TensorFlow 2.16's) assign most slot
lists empty and append to them, so TensorFlow writes those lists empty and
their slots under `_variables` only (`UnlistedSlots`); Keras 3.15 assigns
them full. Their order there (slot
kinds interleaved per variable, or one kind after another) is read from the
program's optimizer once built, and carried over to the checkpoint's
number of variables.
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


class UnlistedSlots(typing.NamedTuple):
  """Slots written under an optimizer's `_variables` only, in order."""
  optimizer_id: int
  variable_ids: typing.List[int]  # The node of each trainable variable.
  kinds: typing.List[str]  # The optimizer's slot lists written empty.
  slot_ids: typing.List[int]  # The slots' nodes, in `_variables` order.
  # (name, node id) of the optimizer's slot lists written in full: their
  # nodes are not reached if the program assigns them untracked.
  listed: typing.List[typing.Tuple[str, int]]


class SlotLists:
  """The slot lists of the Keras 3 optimizers in one checkpoint."""

  def __init__(self, object_graph_proto, child_names):
    """Finds the slot lists of `object_graph_proto`.

    Args:
      object_graph_proto: A checked TrackableObjectGraph.
      child_names: The local names of its nodes' children (a set).
    """
    nodes = object_graph_proto.nodes
    self._lists = {}  # Slot list node id -> SlotList.
    self.slot_ids = set()  # The nodes of all slots in those lists.
    # Optimizer node id -> positions of slot lists matched by position.
    self._waiting = {}
    self._trainable_list_ids = set()
    # Trainable variables that a path outside the optimizers reaches too.
    self._reached_elsewhere = set()
    self.unlisted = []  # UnlistedSlots of each optimizer that has some.
    # Most checkpoints hold no Keras 3 optimizer: their nodes are not
    # visited again.
    if _TRAINABLE_VARIABLES not in child_names:
      return
    for node_id in range(len(nodes)):
      self._add_optimizer(nodes, node_id)
    if self._trainable_list_ids:
      self._find_other_paths(nodes)

  def _add_optimizer(self, nodes, node_id):
    """Records the slot lists of node `node_id`, if a Keras 3 optimizer."""
    children = {
        child.local_name: child.node_id for child in nodes[node_id].children
    }
    if (_TRAINABLE_VARIABLES not in children or
        _OWNED_VARIABLES not in children):
      return
    trainable_list_id = children[_TRAINABLE_VARIABLES]
    variable_ids = _list_elements(nodes, trainable_list_id)
    owned = _list_elements(nodes, children[_OWNED_VARIABLES])
    if not variable_ids or owned is None:
      return
    self._trainable_list_ids.add(trainable_list_id)
    not_slots = set(variable_ids).union(children.values())
    unlisted = [element for element in owned if element not in not_slots]
    owned = set(unlisted)
    empty_lists, listed = [], []
    for name, list_id in children.items():
      elements = _list_elements(nodes, list_id)
      if (name != _OWNED_VARIABLES and elements and
          len(elements) == len(variable_ids) and owned.issuperset(elements)):
        self._lists[list_id] = SlotList(node_id, variable_ids)
        self.slot_ids.update(elements)
        owned.difference_update(elements)
        listed.append((name, list_id))
      elif elements == [] and not nodes[list_id].attributes:
        empty_lists.append(name)
    unlisted = [element for element in unlisted if element in owned]
    if unlisted and empty_lists:
      self.unlisted.append(
          UnlistedSlots(node_id, variable_ids, empty_lists, unlisted, listed))
      self.slot_ids.update(unlisted)

  def _find_other_paths(self, nodes):
    """Finds the trainable variables reached other than as optimizer's."""
    variable_ids = set()
    for list_id in self._trainable_list_ids:
      variable_ids.update(child.node_id for child in nodes[list_id].children)
    for node_id, node in enumerate(nodes):
      if node_id not in self._trainable_list_ids:
        self._reached_elsewhere.update(child.node_id
                                       for child in node.children
                                       if child.node_id in variable_ids)

  def slots_and_variables(self, object_graph_proto):
    """Yields `(optimizer id, slot id, variable ids)` of every slot.

    A listed slot's one variable; a slot written under `_variables` only
    may be any of its optimizer's variables until the program's optimizer
    shows its layout, so it names them all.
    """
    nodes = object_graph_proto.nodes
    for list_id, slot_list in self._lists.items():
      for index, slot_id in enumerate(_list_elements(nodes, list_id)):
        yield (slot_list.optimizer_id, slot_id,
               slot_list.variable_ids[index:index + 1])
    for unlisted in self.unlisted:
      for slot_id in unlisted.slot_ids:
        yield unlisted.optimizer_id, slot_id, unlisted.variable_ids

  def is_unlisted_slot(self, node_id):
    """Whether node `node_id` is a slot written under `_variables` only.

    Restoring one may complete its optimizer's slots: they are then
    matched to their variables.
    """
    return bool(self.unlisted) and node_id in self.slot_ids

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
            id(variable) not in bound and node_id not in self._reached_elsewhere
           ]

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
  (its trainable variable list is empty or does not match `slots` yet):
  the slots are then matched by position, as TensorFlow matches them.
  """
  optimizer = objects_by_node_id.get(slot_list.optimizer_id)
  variables = getattr(optimizer, _TRAINABLE_VARIABLES, None)
  if not variables or len(variables) != len(slots):
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


def _program_slot_order(optimizer, kinds, newest):
  """`(kind, index)` of each slot of `kinds` in the optimizer's `_variables`.

  Keras appends each slot to `_variables` before its slot list, and the
  restore of the slot being appended (`newest`) runs before it is in
  `_variables`: the last slot made may be missing from both, its list
  then one short. None if the optimizer holds no such lists (or is not
  built).
  """
  count = len(getattr(optimizer, _TRAINABLE_VARIABLES, None) or ())
  lists = {}
  for kind in kinds:
    slots = getattr(optimizer, kind, None)
    if isinstance(slots, list) and len(slots) in (count, count - 1):
      lists[kind] = slots
  if not count or not lists:
    return None
  place = {
      id(slot): (kind, index) for kind, slots in lists.items()
      for index, slot in enumerate(slots)
  }
  owned = list(getattr(optimizer, _OWNED_VARIABLES, ()))
  if newest is not None and not any(v is newest for v in owned):
    owned.append(newest)
  short = [kind for kind, slots in lists.items() if len(slots) < count]
  if len(short) == 1 and owned and id(owned[-1]) not in place:
    place[id(owned[-1])] = (short[0], count - 1)
  order = [place[id(variable)] for variable in owned if id(variable) in place]
  if len(order) != len(lists) * count:
    return None
  return order, lists, owned[-1]


def _layouts(kinds, count):
  """The slot orders Keras optimizers use, for `count` variables."""
  return ([(kind, index) for index in range(count) for kind in kinds],
          [(kind, index) for kind in kinds for index in range(count)])


def unlisted_layout(unlisted, optimizer, newest=None):
  """Where the program's optimizer keeps each of `unlisted`'s slots, or None.

  `newest`: a variable the optimizer is adding to `_variables`, if any.

  Returns:
    `(kind and index of the variable of each slot, in `unlisted.slot_ids`
    order; {kind: the program's slot list}; the slot made last)`. None
    (nothing to match yet) until the program's optimizer has made all its
    slots, or if their order is none Keras uses.
  """
  found = _program_slot_order(optimizer, unlisted.kinds, newest)
  if found is None:
    return None
  order, lists, last = found
  kinds = list(dict.fromkeys(kind for kind, _ in order))
  count = len(getattr(optimizer, _TRAINABLE_VARIABLES))
  for program_layout, written_layout in zip(
      _layouts(kinds, count), _layouts(kinds, len(unlisted.variable_ids))):
    if (program_layout == order and
        len(written_layout) == len(unlisted.slot_ids)):
      return written_layout, lists, last
  return None


def match_unlisted(unlisted, layout, objects_by_node_id, variables):
  """`(slot node id, program slot or None)` for each unlisted slot.

  Args:
    unlisted: The `UnlistedSlots`.
    layout: What `unlisted_layout` returned.
    objects_by_node_id: The objects bound to the checkpoint's nodes.
    variables: The program's optimizer's trainable variables.
  """
  written_layout, lists, last = layout
  positions = {
      id(variable): position for position, variable in enumerate(variables)
  }
  pairs = []
  for slot_id, (kind, index) in zip(unlisted.slot_ids, written_layout):
    variable = objects_by_node_id.get(unlisted.variable_ids[index])
    position = positions.get(id(variable))
    slots = lists[kind]
    slot = None
    if variable is not None and position is not None:
      slot = slots[position] if position < len(slots) else last
    pairs.append((slot_id, slot))
  return pairs
