"""`tf-objckpt inspect`: what a checkpoint holds, as a tree, a key list or JSON.

An object-based checkpoint is shown as its object graph, each object under
its local name with the class that saved it (where recorded) and each value
with its dtype, shape and size; a name-based one as the tree of its variable
names. Totals (values, bytes, shards) end the listing.

A damaged checkpoint shows what its index holds: values in a missing or
truncated data file are marked, and `verify`'s line for each such file
ends the listing; an object graph that cannot be read is said so, and the
values are shown by key. The exit code is then 1, as `verify`'s.
"""

import functools
import json

from tf_objckpt.inspection import checkpoint_listing
from tf_objckpt.inspection import verify_checkpoint

_VALUE_ATTRIBUTE = "VARIABLE_VALUE"
_INDENT = "  "
_UNREADABLE = " (cannot be read)"


def totals(listing):
  """`(values, bytes, shards)`; the object graph counts in bytes only."""
  stored = listing.stored_values()
  all_bytes = sum(value.bytes for value in listing.values.values())
  return len(stored), all_bytes, listing.num_shards


def totals_line(listing):
  count, size, shards = totals(listing)
  return (f"Total: {count} value{'s' * (count != 1)}, "
          f"{checkpoint_listing.format_bytes(size)}, "
          f"{shards} shard{'s' * (shards != 1)}")


def key_lines(listing):
  """The checkpoint keys of the values, one per line."""
  return [value.key for value in listing.stored_values()]


def tree_lines(listing):
  """The object graph (or the name tree) as indented lines."""
  if listing.object_based:
    return _object_tree(listing)
  return _name_tree(listing)


def _object_tree(listing):
  """Each object under its shortest path; other paths to it point there.

  Objects that hold nothing and have no children are left out.
  """
  nodes = listing.object_graph.nodes
  paths = listing.node_paths
  lines = ["(root)" + _class_suffix(listing, 0)]
  _attribute_lines(listing, 0, 1, lines)
  _slot_lines(listing, 0, 1, lines)
  stack = [(child, 1, "") for child in reversed(nodes[0].children)]
  while stack:
    child, depth, parent_path = stack.pop()
    node_id = child.node_id
    path = parent_path + child.local_name
    pad = _INDENT * depth
    if node_id == 0 or paths[node_id] != path:
      lines.append(f"{pad}{child.local_name} -> {paths[node_id]}")
      continue
    node = nodes[node_id]
    if not (node.children or node.attributes or node.slot_variables):
      continue  # An empty container or a stateless object: nothing to show.
    value = _single_value(listing, node_id)
    lines.append(pad + child.local_name + _class_suffix(listing, node_id) +
                 value)
    if not value:
      _attribute_lines(listing, node_id, depth + 1, lines)
    _slot_lines(listing, node_id, depth + 1, lines)
    stack.extend((grandchild, depth + 1, path + "/")
                 for grandchild in reversed(nodes[node_id].children))
  return lines


def _class_suffix(listing, node_id):
  python_class = listing.python_class(node_id)
  return f" [{python_class}]" if python_class else ""


def _single_value(listing, node_id):
  """": float32 (3,) 12 B" for a node holding one variable's value."""
  attributes = listing.object_graph.nodes[node_id].attributes
  if len(attributes) == 1 and attributes[0].name == _VALUE_ATTRIBUTE:
    value = listing.values.get(attributes[0].checkpoint_key)
    if value is not None:
      return ": " + _describe(listing, value)
  return ""


def _describe(listing, value):
  """A value's dtype, shape and size, marked if its bytes cannot be read."""
  lost = value.key in _unreadable_keys(listing)
  return value.describe() + (_UNREADABLE if lost else "")


def _attribute_lines(listing, node_id, depth, lines):
  for attribute in listing.object_graph.nodes[node_id].attributes:
    value = listing.values.get(attribute.checkpoint_key)
    described = _describe(listing, value) if value else "(missing)"
    lines.append(f"{_INDENT * depth}.{attribute.name}: {described}")


def _slot_lines(listing, node_id, depth, lines):
  for slot in listing.object_graph.nodes[node_id].slot_variables:
    slot_id = slot.slot_variable_node_id
    variable = listing.node_paths[slot.original_variable_node_id]
    lines.append(f"{_INDENT * depth}slot {slot.slot_name!r} for {variable}" +
                 _single_value(listing, slot_id))


def _name_tree(listing):
  """Variable names (or keys) split at "/" into a tree."""
  lines = []
  if listing.object_graph_error is None:
    lines.append("(name-based checkpoint: variables by name)")
  previous = []
  for value in listing.stored_values():
    parts = value.key.split("/")
    common = 0
    while (common < min(len(previous),
                        len(parts) - 1) and previous[common] == parts[common]):
      common += 1
    for depth in range(common, len(parts) - 1):
      lines.append(_INDENT * depth + parts[depth])
    lines.append(_INDENT * (len(parts) - 1) + parts[-1] + ": " +
                 _describe(listing, value))
    previous = parts[:-1]
  return lines


def as_json(listing):
  """The checkpoint as a JSON-serializable dict."""
  count, size, shards = totals(listing)
  result = {
      "checkpoint": listing.path,
      "format": "object-based" if listing.object_based else "name-based",
      "values": [
          dict(value._asdict(), shape=list(value.shape))
          for value in listing.stored_values()
      ],
      "totals": {
          "values": count,
          "bytes": size,
          "shards": shards
      },
  }
  if listing.object_based:
    result["objects"] = [
        _object_json(listing, node_id, node)
        for node_id, node in enumerate(listing.object_graph.nodes)
    ]
  problems = _damage_lines(listing)
  if problems:
    result["problems"] = problems
    result["unreadable"] = sorted(_unreadable_keys(listing))
  return result


def _object_json(listing, node_id, node):
  return {
      "node_id":
          node_id,
      "path":
          listing.node_paths[node_id],
      "class":
          listing.python_class(node_id),
      "children": [{
          "name": child.local_name,
          "node_id": child.node_id
      } for child in node.children],
      "attributes": [{
          "name": attribute.name,
          "key": attribute.checkpoint_key
      } for attribute in node.attributes],
      "slot_variables": [{
          "slot_name": slot.slot_name,
          "variable_node_id": slot.original_variable_node_id,
          "slot_node_id": slot.slot_variable_node_id
      } for slot in node.slot_variables],
  }


def value_lines(listing, names):
  """Each named value (a key or an object path), summarised if large.

  Raises:
    KeyError: If a name matches no value.
  """
  lines = []
  for name in names:
    key = listing.find_key(name)
    value = listing.values[key]
    lines.append(f"{key} {value.describe()}")
    summary = checkpoint_listing.summarize(listing.read_numpy(key))
    lines.append(_INDENT + summary.replace("\n", "\n" + _INDENT))
  return lines


def _damage_problems(listing):
  """`verify`'s problems found without reading values: an object graph
  that cannot be read (unless a data file's problem covers it), then
  missing and truncated data files."""
  problems = verify_checkpoint.file_problems(listing)
  lost = {key for problem in problems for key in problem.covers or ()}
  if (listing.object_graph_error is not None and
      checkpoint_listing.OBJECT_GRAPH_KEY not in lost):
    problems.insert(
        0,
        verify_checkpoint.Problem(
            listing.path, checkpoint_listing.OBJECT_GRAPH_KEY,
            verify_checkpoint.op_error_text(listing.object_graph_error)))
  return problems


def _damage_lines(listing):
  return [str(problem) for problem in _damage_problems(listing)]


@functools.lru_cache(maxsize=4)
def _unreadable_keys(listing):
  """The keys of the values in missing or truncated data files.

  Kept per listing: each value line asks.
  """
  return frozenset(key for problem in verify_checkpoint.file_problems(listing)
                   for key in problem.covers or ())


def _heading(listing):
  if listing.object_graph_error is not None:
    return (f"Checkpoint {listing.path} (object-based; its object graph "
            "cannot be read, see below: its values by key)")
  kind = "object-based" if listing.object_based else "name-based"
  return f"Checkpoint {listing.path} ({kind})"


def run(listing, keys=False, as_json_output=False, values=None):
  """The text `inspect` prints, and its exit code.

  0, 1 for a damaged checkpoint (what can be shown is), 2 for a bad key.
  """
  code = 1 if _damage_problems(listing) else 0
  if as_json_output:
    return json.dumps(as_json(listing), indent=1), code
  if values:
    try:
      return "\n".join(value_lines(listing, values)), 0
    except KeyError as e:
      return e.args[0], 2
  if keys:
    return "\n".join(key_lines(listing)), code
  return "\n".join([_heading(listing)] + tree_lines(listing) +
                   [totals_line(listing)] + _damage_lines(listing)), code
