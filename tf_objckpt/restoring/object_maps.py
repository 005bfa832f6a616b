"""Object maps: a sub-tree of a checkpoint restored into another object.

`CheckpointOptions(object_map={NEW_PATH: CHECKPOINT_PATH})` restores the
checkpoint's node at CHECKPOINT_PATH into the program's object at NEW_PATH,
and what is below each by the walk's usual matching of local names. Paths
are object paths as `tf-objckpt inspect` prints them ("model/encoder";
"" is the root). A restore resolves its map once (`resolve`) into an
`ObjectMap`: the pairs' nodes and objects, which the walk binds only
through their pair (it skips them when they come as another node's
children), and the scope of the restore: the checkpoint's nodes below the
pairs' nodes, with the optimizer slots of the variables among them. The
load status asks only about that scope, and names each side's path in the
other's words (`new_path_of`, `checkpoint_path_of`).
"""

import difflib
import typing
from typing import Any, Mapping, Optional

from tensorflow.python.framework import errors

from tf_objckpt.foundation import identity_containers
from tf_objckpt.foundation import tensorflow_internals
from tf_objckpt.restoring import object_graph_check

# At most this many near names are suggested for a path that is not there.
_SUGGESTED = 3
# Objects of the program listed at most when suggesting near names.
_PROGRAM_PATHS_LISTED = 20000


def normalized(object_map: Optional[Mapping]) -> Optional[dict]:
  """`{new path: checkpoint path}`, without outer slashes; or None.

  "(root)" names the root as "" does.

  Raises:
    TypeError: Unless `object_map` is None or a mapping of strings.
  """
  if object_map is None:
    return None
  if not isinstance(object_map, Mapping):
    raise TypeError("object_map must be a dict {NEW_PATH: CHECKPOINT_PATH} of "
                    f"object paths, got {type(object_map).__name__}.")
  pairs = {}
  for new_path, source_path in object_map.items():
    if not (isinstance(new_path, str) and isinstance(source_path, str)):
      raise TypeError("object_map maps object paths (strings) to object "
                      f"paths, got {new_path!r}: {source_path!r}.")
    pairs[_clean(new_path)] = _clean(source_path)
  return pairs


def _clean(object_path):
  object_path = object_path.strip("/")
  return "" if object_path == "(root)" else object_path


def _parts(object_path):
  return object_path.split("/") if object_path else []


def join(object_path, rest):
  """`object_path` then `rest`, object paths ("" is the root)."""
  return "/".join(part for part in (object_path, rest) if part)


def _below(object_path, parent_path):
  """The rest of `object_path` below `parent_path` ("" for itself), or None."""
  if not parent_path:
    return object_path
  if object_path == parent_path:
    return ""
  if object_path.startswith(parent_path + "/"):
    return object_path[len(parent_path) + 1:]
  return None


class MappedPair(typing.NamedTuple):
  """One pair of an object map, resolved."""
  new_path: str
  source_path: str
  node_id: int
  trackable: Any


class ObjectMap:
  """The resolved object map of one restore (see the module docstring)."""

  def __init__(self, pairs, object_graph_proto, graph_index, slot_lists):
    self.pairs = tuple(pairs)
    self.node_ids = frozenset(pair.node_id for pair in self.pairs)
    self.objects = identity_containers.ObjectIdentitySet(
        pair.trackable for pair in self.pairs)
    self.covers_root = any(not pair.new_path for pair in self.pairs)
    self._paths = {pair.node_id: pair.source_path for pair in self.pairs}
    self.scope = frozenset(
        _scope(object_graph_proto, graph_index, slot_lists, self._paths))

  def takes_elsewhere(self, node_id, trackable):
    """Whether the walk leaves this child to a pair: its node or object is
    one a pair names."""
    return node_id in self.node_ids or (trackable is not None and
                                        trackable in self.objects)

  def node_path(self, node_id, node_paths):
    """Node `node_id`'s checkpoint path, by a pair's path if one reaches it.

    A node may be reached by several paths (a Keras 3 variable, through its
    optimizer too): within the scope, it is named below its pair's path.
    `node_paths`: the checkpoint's `NodePaths` for the others.
    """
    found = self._paths.get(node_id)
    return found if found is not None else node_paths[node_id]

  def checkpoint_path_of(self, new_path):
    """Where the checkpoint holds the value of the program's `new_path`.

    By the deepest pair covering it; None if no pair does.
    """
    return self._translate(new_path, lambda pair:
                           (pair.new_path, pair.source_path))

  def new_path_of(self, source_path):
    """The program's path that the checkpoint's `source_path` restores
    into, by the deepest pair covering it; None if no pair does."""
    return self._translate(source_path, lambda pair:
                           (pair.source_path, pair.new_path))

  def _translate(self, object_path, sides):
    found, depth = None, -1
    for pair in self.pairs:
      source, target = sides(pair)
      rest = _below(object_path, source)
      if rest is not None and len(_parts(source)) > depth:
        found, depth = join(target, rest), len(_parts(source))
    return found


def name_scopes(object_map, root, attached_dependencies=()):
  """`{trackable: checkpoint scope}` of a name-based checkpoint's object map.

  Each pair maps the objects from NEW_PATH down to a variable scope of the
  checkpoint ("bert/encoder/"); an object below two pairs takes the
  deeper's.

  Raises:
    ValueError: If a new path is not in the program.
  """
  scopes = identity_containers.ObjectIdentityDictionary()
  for new_path in sorted(object_map,
                         key=lambda object_path: len(_parts(object_path))):
    scope = object_map[new_path]
    scope = scope + "/" if scope else ""
    trackable = object_at(new_path, root, attached_dependencies)
    scopes[trackable] = scope
    for _, below_it in objects_below(trackable):
      scopes[below_it] = scope
  return scopes


def _scope(object_graph_proto, graph_index, slot_lists, paths):
  """The node ids under the pinned nodes, with the slots of their variables.

  `paths`: `{node id: checkpoint path}` of the pinned nodes; the nodes below
  them are added, named on the way.

  Below a pair's node, the walk goes by children, but not into another
  pair's node (its own pair's scope) nor through a Keras 3 optimizer's
  trainable variable list or its slots (the model's variables and their
  slots, in scope only as the model's are). Then a slot is in scope when
  its optimizer and its variable are.
  """
  children = graph_index.children
  slot_ids = slot_lists.slot_ids
  scope = set(paths)
  queue = list(paths)
  for node_id in queue:
    if slot_lists.is_trainable_list(node_id):
      continue
    for child_id, name in zip(*children.get(node_id, ((), ()))):
      if child_id not in scope and child_id not in slot_ids:
        scope.add(child_id)
        queue.append(child_id)
        paths[child_id] = join(paths[node_id], name)
  for optimizer_id, slot in graph_index.slot_variables:
    if (optimizer_id in scope and slot.original_variable_node_id in scope):
      scope.add(slot.slot_variable_node_id)
  for optimizer_id, slot_id, variable_ids in slot_lists.slots_and_variables(
      object_graph_proto):
    if optimizer_id in scope and all(
        variable_id in scope for variable_id in variable_ids):
      scope.add(slot_id)
  return scope


def resolve(object_map, object_graph_proto, graph_index, slot_lists, root,
            attached_dependencies, save_path):
  """The `ObjectMap` of `object_map` in one restore.

  Args:
    object_map: `{new path: checkpoint path}` (`normalized`).
    object_graph_proto: The checkpoint's checked TrackableObjectGraph.
    graph_index: Its `object_graph_check.GraphIndex`.
    slot_lists: Its `keras3_slots.SlotLists`.
    root: The program's root object.
    attached_dependencies: References of the objects saved as the root's
      children without being its dependencies.
    save_path: The checkpoint's path, for messages.

  Raises:
    NotFoundError: If a checkpoint path is not in the checkpoint.
    ValueError: If a new path is not in the program, or two pairs name one
      node or one object.
  """
  pairs = []
  nodes_seen, objects_seen = {}, identity_containers.ObjectIdentityDictionary()
  for new_path, source_path in sorted(object_map.items()):
    node_id = _node_at(source_path, object_graph_proto, graph_index, save_path)
    trackable = object_at(new_path, root, attached_dependencies)
    if node_id in nodes_seen:
      raise ValueError(
          f"object_map restores checkpoint path {source_path!r} into both "
          f"{nodes_seen[node_id]!r} and {new_path!r}: a checkpoint's object "
          "restores into one object.")
    if trackable in objects_seen:
      raise ValueError(
          f"object_map's new paths {objects_seen[trackable]!r} and "
          f"{new_path!r} are one object: it restores from one checkpoint path.")
    nodes_seen[node_id] = new_path
    objects_seen[trackable] = new_path
    pairs.append(MappedPair(new_path, source_path, node_id, trackable))
  return ObjectMap(pairs, object_graph_proto, graph_index, slot_lists)


def _node_at(source_path, object_graph_proto, graph_index, save_path):
  """The node id at `source_path`, by local names from the root."""
  node_id = 0
  for index, part in enumerate(_parts(source_path)):
    ids, names = graph_index.children.get(node_id, ((), ()))
    try:
      node_id = ids[names.index(part)]
    except ValueError:
      paths = object_graph_check.NodePaths(object_graph_proto, separator="/")
      near = _near(source_path, (paths[i] for i in range(len(paths))))
      raise errors.NotFoundError(
          None, None, f"object_map's checkpoint path {source_path!r} is not in "
          f"checkpoint {save_path!r}: no object {part!r} under "
          f"{_shown(_parent_path(source_path, index))}.{near}") from None
  return node_id


def object_at(new_path, root, attached_dependencies=()):
  """The program's object at `new_path`, by local names from the root."""
  trackable = root
  for index, part in enumerate(_parts(new_path)):
    found = None
    if index == 0:
      found = next((reference.ref
                    for reference in attached_dependencies
                    if reference.name == part), None)
    if found is None:
      tensorflow_internals.initialize(trackable)
      found = tensorflow_internals.lookup_dependency(trackable, part)
    if found is None:
      near = _near(new_path, program_paths(root, attached_dependencies))
      raise ValueError(
          f"object_map's new path {new_path!r} is not an object of the "
          f"program being restored: no object {part!r} under "
          f"{_shown(_parent_path(new_path, index))}.{near}")
    trackable = found
  return trackable


def _parent_path(object_path, index):
  return "/".join(_parts(object_path)[:index])


def _shown(object_path):
  return repr(object_path) if object_path else "the root"


def _near(object_path, candidates):
  """" Closest: a, b." for the candidates spelled most like `object_path`."""
  close = difflib.get_close_matches(object_path, [c for c in candidates if c],
                                    n=_SUGGESTED,
                                    cutoff=0.5)
  return " Closest: " + ", ".join(close) + "." if close else ""


def program_paths(root, attached_dependencies=()):
  """The object paths of (some of) the program's objects, breadth first."""
  return [
      object_path for object_path, _ in objects_below(
          root, attached_dependencies, _PROGRAM_PATHS_LISTED)
  ]


def objects_below(trackable, attached_dependencies=(), limit=None):
  """`(path below trackable, object)` of what it reaches, breadth first.

  Each object once, at its shortest path; at most `limit` of them.
  """
  found = []
  queue = [
      (reference.name, reference.ref) for reference in attached_dependencies
  ]
  queue.extend(_children(trackable))
  seen = identity_containers.ObjectIdentitySet([trackable])
  for object_path, child in queue:
    if child in seen:
      continue
    if limit is not None and len(found) >= limit:
      break
    seen.add(child)
    found.append((object_path, child))
    queue.extend((join(object_path, name), grandchild)
                 for name, grandchild in _children(child))
  return found


def _children(trackable):
  try:
    tensorflow_internals.initialize(trackable)
    return list(tensorflow_internals.children(trackable).items())
  except (AttributeError, TypeError):
    return []
