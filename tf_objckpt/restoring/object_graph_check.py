"""Checks a checkpoint's object graph before it is walked, and names its nodes.

An object graph is data read from disk: damaged, truncated or made by hand,
it may point at nodes that do not exist or at values the checkpoint does not
hold. A restore checks it first (`check_object_graph`), so that such a graph
fails with a `DataLossError` naming the checkpoint and the node rather than
restoring half of it. Cycles are legal, and so are values no node mentions.

Everything here takes time and memory linear in the size of the graph:
nodes are named by their path from the root only when a message needs them
(`NodePaths`), so a graph 100,000 nodes deep costs no more than a wide one.
"""

import bisect

from tensorflow.python.framework import errors
from tensorflow.python.trackable import base as tf_base

from tf_objckpt.engine import read_plan
from tf_objckpt.foundation import checkpoint_keys as trackable_utils

# At most this many problems are spelled out in one error message.
_MAX_PROBLEMS_IN_MESSAGE = 20


class NodePaths:
  """Names nodes by their shortest path from the root, on demand.

  Indexing gives names such as "(root).model.layer.kernel" (with
  `separator="/"`, "model/layer/kernel", the root being "(root)"); a slot
  variable is named as TensorFlow names it, "<optimizer>'s state '<slot>'
  for <variable>". Only the parent of each node is stored, so naming a node
  costs its depth and naming none costs nothing.
  """

  def __init__(self, object_graph_proto, separator="."):
    self._proto = object_graph_proto
    self._separator = separator
    self._parents = None  # node id -> (parent id, local name), or a slot.

  def __len__(self):
    return len(self._proto.nodes)

  def __getitem__(self, node_id):
    if self._parents is None:
      self._parents = self._find_parents()
    return self._name(node_id, frozenset())

  def _name(self, node_id, naming):
    """The name of `node_id`; `naming` holds the slots being named."""
    parts = []
    current = node_id
    while current != 0:
      link = self._parents.get(current)
      if link is None or current in naming:
        return f"<unreachable node {node_id}>"
      if isinstance(link, _SlotLink):
        naming |= {current}
        return (f"{self._name(link.optimizer_id, naming)}'s state "
                f"'{link.slot_name}' for "
                f"{self._name(link.variable_id, naming)}" +
                "".join(reversed(parts)))
      parent, local_name = link
      parts.append(self._separator + local_name)
      current = parent
    if self._separator == "/":
      return "".join(reversed(parts))[1:] or "(root)"
    return "(root)" + "".join(reversed(parts))

  def _find_parents(self):
    """Each reachable node's parent on a shortest path, breadth first."""
    nodes = self._proto.nodes
    parents = {}
    queue = [0] if nodes else []
    for node_id in queue:
      for child in nodes[node_id].children:
        child_id = child.node_id
        if child_id != 0 and child_id not in parents and (0 <= child_id <
                                                          len(nodes)):
          parents[child_id] = (node_id, child.local_name)
          queue.append(child_id)
    # Slots last: their variables may be deeper than their optimizer.
    for node_id, node in enumerate(nodes):
      for slot in node.slot_variables:
        if slot.slot_variable_node_id not in parents:
          parents[slot.slot_variable_node_id] = _SlotLink(
              node_id, slot.original_variable_node_id, slot.slot_name)
    return parents


class _SlotLink:
  """How a slot variable is reached: through its optimizer and variable."""

  __slots__ = ("optimizer_id", "variable_id", "slot_name")

  def __init__(self, optimizer_id, variable_id, slot_name):
    self.optimizer_id = optimizer_id
    self.variable_id = variable_id
    self.slot_name = slot_name


def object_graph_problems(object_graph_proto, stored_keys):
  """Yields `(node id, problem)` for every structural fault of the graph.

  Args:
    object_graph_proto: A `TrackableObjectGraph`.
    stored_keys: The checkpoint's keys (a set or dict).
  """
  nodes = object_graph_proto.nodes
  count = len(nodes)
  holds = _KeyLookup(stored_keys).holds
  if not count:
    yield 0, "the object graph has no root node"
    return
  for node_id, node in enumerate(nodes):
    children = {}  # Local name -> node id.
    for child in node.children:
      if not 0 <= child.node_id < count:
        yield node_id, (f"child {child.local_name!r} refers to node "
                        f"{child.node_id}, but there are {count} nodes")
      if children.setdefault(child.local_name, child.node_id) != child.node_id:
        yield node_id, (f"two children named {child.local_name!r} refer to "
                        f"different nodes")
    for slot in node.slot_variables:
      for role, referred in (("variable", slot.original_variable_node_id),
                             ("slot variable", slot.slot_variable_node_id)):
        if not 0 <= referred < count:
          yield node_id, (f"slot {slot.slot_name!r} refers to {role} node "
                          f"{referred}, but there are {count} nodes")
        elif referred == 0 or not _is_variable(nodes[referred]):
          yield node_id, (f"slot {slot.slot_name!r} refers to {role} node "
                          f"{referred}, which is not a variable")
    for attribute in node.attributes:
      if not attribute.checkpoint_key:
        yield node_id, f"attribute {attribute.name!r} has an empty key"
      elif not holds(attribute.checkpoint_key):
        yield node_id, (
            f"attribute {attribute.name!r} names "
            f"{read_plan.describe_key(attribute.checkpoint_key)}, which "
            "the checkpoint does not hold")


def _is_variable(node):
  """Whether an object graph node holds a variable's value."""
  return any(attribute.name == trackable_utils.VARIABLE_VALUE_KEY
             for attribute in node.attributes)


class _KeyLookup:
  """Whether a checkpoint holds the values an attribute names.

  An attribute's key is the key of its value, or, for objects saved through
  a legacy `SaveableObject` of several tensors (iterators, lookup tables),
  the prefix of their keys ("table/.ATTRIBUTES/table" of
  "table/.ATTRIBUTES/table-keys" and "-values").
  """

  def __init__(self, stored_keys):
    self._keys = stored_keys
    self._sorted = None

  def holds(self, key):
    if key in self._keys:
      return True
    if self._sorted is None:
      self._sorted = sorted(self._keys)
    index = bisect.bisect_left(self._sorted, key)
    return index < len(self._sorted) and self._sorted[index].startswith(key)


def unreferenced_keys(object_graph_proto, stored_keys):
  """The stored keys no attribute of the object graph names, sorted.

  A key counts as named when an attribute names it or a prefix of it (the
  keys of a legacy saveable's tensors). The object graph's own key is not
  listed.
  """
  named = sorted({
      attribute.checkpoint_key
      for node in object_graph_proto.nodes
      for attribute in node.attributes
  })
  unreferenced = []
  for key in sorted(stored_keys):
    index = bisect.bisect_right(named, key)
    if key != tf_base.OBJECT_GRAPH_PROTO_KEY and not (index and key.startswith(
        named[index - 1])):
      unreferenced.append(key)
  return unreferenced


class GraphIndex:
  """What a restore looks up in an object graph, gathered as it is checked.

  Reading a field of a node costs far more than a dict lookup, so the one
  pass that checks the graph (`check_object_graph`) also keeps what the
  restore walk, its coordinator and its report read of every node.

  Attributes:
    plain_keys: `{node id: checkpoint key}` of the nodes that hold one
      variable's value and nothing else (no children, no slot variables).
    valued_node_ids: The ids of the nodes with attributes, in order.
    slot_variables: `(optimizer node id, SlotVariableReference)` of every
      slot variable, in node order.
    children: `{node id: (child ids, local names)}` of the nodes with
      children, in order.
    child_names: Every local name of a child, in the graph.
  """

  __slots__ = ("plain_keys", "valued_node_ids", "slot_variables", "children",
               "child_names")

  def __init__(self):
    self.plain_keys = {}
    self.valued_node_ids = []
    self.slot_variables = []
    self.children = {}
    self.child_names = set()


def check_object_graph(object_graph_proto, save_path, stored_keys):
  """Raises unless every reference of the object graph points at something.

  Returns:
    The graph's `GraphIndex`.

  Raises:
    DataLossError: Naming the checkpoint and each faulty node (by its path,
      and its id): children or slots referring to missing nodes, slots
      referring to the root or to nodes that hold no variable, two children
      of one node under one name referring to different nodes, attributes
      with an empty key or naming keys the checkpoint does not hold.
  """
  index, fits = _index(object_graph_proto, stored_keys)
  if fits:
    return index
  problems = []
  for problem in object_graph_problems(object_graph_proto, stored_keys):
    problems.append(problem)
    if len(problems) > _MAX_PROBLEMS_IN_MESSAGE:
      break
  if problems:
    raise damaged_graph_error(object_graph_proto, save_path, problems)
  return index


def _index(object_graph_proto, stored_keys):
  """The graph's `GraphIndex`, and whether it surely has no fault.

  One pass over the nodes, checking whole lists at once; a graph it does
  not find sound is examined node by node (`object_graph_problems`).
  """
  index = GraphIndex()
  nodes = object_graph_proto.nodes
  count = len(nodes)
  plain_keys, valued = index.plain_keys, index.valued_node_ids
  keys, referred = [], []
  variable_value = trackable_utils.VARIABLE_VALUE_KEY
  fits = count > 0
  for node_id, node in enumerate(nodes):
    attributes, children = node.attributes, node.children
    slot_variables = node.slot_variables
    if len(attributes) == 1:
      valued.append(node_id)
      attribute = attributes[0]
      key = attribute.checkpoint_key
      keys.append(key)
      if (not children and not slot_variables and
          attribute.name == variable_value):
        plain_keys[node_id] = key
    elif attributes:
      valued.append(node_id)
      keys.extend(attribute.checkpoint_key for attribute in attributes)
    if children:
      children = list(children)
      child_ids = [child.node_id for child in children]
      child_names = [child.local_name for child in children]
      index.children[node_id] = (child_ids, child_names)
      referred.extend(child_ids)
      index.child_names.update(child_names)
      fits = fits and len(set(child_names)) == len(child_names)
    if slot_variables:
      index.slot_variables.extend((node_id, slot) for slot in slot_variables)
  fits = (fits and (not referred or
                    (min(referred) >= 0 and max(referred) < count)) and
          all(keys) and all(map(stored_keys.__contains__, keys)) and all(
              _slot_fits(slot, nodes, plain_keys)
              for _, slot in index.slot_variables))
  return index, fits


def _slot_fits(slot, nodes, plain_keys):
  """Whether a slot refers to a variable and a slot variable."""
  return all(0 < node_id < len(nodes) and
             (node_id in plain_keys or _is_variable(nodes[node_id]))
             for node_id in (slot.original_variable_node_id,
                             slot.slot_variable_node_id))


def damaged_graph_error(object_graph_proto, save_path, problems):
  """A `DataLossError` naming the checkpoint and each `(node id, problem)`."""
  names = NodePaths(object_graph_proto)
  shown = problems[:_MAX_PROBLEMS_IN_MESSAGE]
  lines = "\n  ".join(f"node {node_id} ({names[node_id]}): {problem}"
                      for node_id, problem in shown)
  more = "\n  ..." if len(problems) > len(shown) else ""
  return errors.DataLossError(
      None, None,
      f"The object graph of checkpoint {save_path!r} is damaged; nothing was "
      f"restored:\n  {lines}{more}")
