"""Walks an object graph and describes it as a `TrackableObjectGraph` proto.

Node ids are assigned in breadth-first order from the root, children in
the order their parent lists them, then slot variables; each object's name
is its escaped path from the root. Both orders are part of the checkpoint
format: they decide the proto TensorFlow writes for the same objects.
"""

import collections
import contextlib
import copy
import typing
import weakref

from tensorflow.core.protobuf import trackable_object_graph_pb2
from tensorflow.python.framework import constant_op
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import ops
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.trackable import python_state

from tf_objckpt.engine import registered_savers
from tf_objckpt.foundation import checkpoint_keys
from tf_objckpt.foundation import identity_containers
from tf_objckpt.objects import trackable
from tf_objckpt import saveable_object
from tf_objckpt import saveable_object_util

_TrackableObject = trackable_object_graph_pb2.TrackableObjectGraph.TrackableObject


def full_name_for_variable(obj) -> str:
  """The global (name-based) name of a variable, or "" for other objects."""
  if not saveable_object_util.is_variable(obj):
    return ""
  slice_info = getattr(obj, "_save_slice_info", None)
  if slice_info is not None:
    return slice_info.full_name
  return obj._shared_name  # pylint: disable=protected-access


class WeakTrackableReference(tf_base.WeakTrackableReference):
  """A named edge to an attached object, which it does not keep alive.

  `Checkpoint(root=...)` holds its attached objects itself; its graph view
  refers to them weakly, so that restores waiting in the root's deferred
  dependencies do not close a reference cycle through them.
  """

  __slots__ = ()

  def __deepcopy__(self, memo):
    """A weak reference to the copy of the referent (made through `memo`)."""
    referent = self.ref
    if referent is None:
      return self
    return type(self)(self.name, copy.deepcopy(referent, memo))


class ObjectGraphView:
  """Gathers the objects reachable from a root and their checkpoint values.

  The view holds the root weakly, and caches nothing that keeps an object
  alive: a checkpoint holds a program's objects no longer than the program
  does, and restores waiting in an object's deferred dependencies (which
  reach this view through their coordinator) form no reference cycle.
  """

  def __init__(self, root, attached_dependencies=None):
    """Creates a view of the objects reachable from `root`.

    Args:
      root: The root trackable, or a `weakref.ref` to it. Held weakly.
      attached_dependencies: References (`TrackableReference`, or
        `WeakTrackableReference` to avoid keeping them alive) to objects
        saved as children of the root without being its dependencies
        (`Checkpoint(root=...)`). Shared, not copied: the list may grow.
    """
    self._root_ref = (root if isinstance(root, weakref.ref)
                      else weakref.ref(root))
    self._saveables_cache = None
    self._attached_dependencies = (
        [] if attached_dependencies is None else attached_dependencies)
    self._last_serialized = None  # The `_Serialized` of the last save.

  def __deepcopy__(self, memo):
    """A view of a copy of the root, without this view's caches."""
    # pylint: disable=protected-access
    copied = type(self).__new__(type(self))
    memo[id(self)] = copied
    copied._saveables_cache = None
    if self._saveables_cache is not None:
      copied.cache_saveables()
    copied._last_serialized = None
    root = self.root
    copied._root_ref = (self._root_ref if root is None
                        else weakref.ref(copy.deepcopy(root, memo)))
    copied._attached_dependencies = copy.deepcopy(
        self._attached_dependencies, memo)
    return copied

  @property
  def attached_dependencies(self):
    return self._attached_dependencies

  @property
  def root(self):
    return self._root_ref()

  @property
  def saveables_cache(self):
    """Saveables kept per object (graph building), or None."""
    return self._saveables_cache

  def cache_saveables(self):
    """Keeps each object's saveables across saves and restores.

    For graph building: repeated saves and restores then reuse their ops.
    Keyed weakly by object.
    """
    if self._saveables_cache is None:
      self._saveables_cache = (
          identity_containers.ObjectIdentityWeakKeyDictionary())

  def _child_items(self, obj, save_type=tf_base.SaveType.CHECKPOINT,
                   **kwargs):
    """The dependencies of `obj`, as (local name, object) pairs."""
    if _is_plain_leaf(obj):
      return ()
    obj._maybe_initialize_trackable()  # pylint: disable=protected-access
    items = list(obj._trackable_children(save_type, **kwargs).items())  # pylint: disable=protected-access
    if self._attached_dependencies and obj is self.root:
      for reference in self._attached_dependencies:
        child = reference.ref
        if child is not None:  # Gone with the `Checkpoint` that held it.
          items.append((reference.name, child))
    return items

  def _breadth_first_traversal(self):
    """Walks the graph breadth first from the root.

    Returns:
      A `_Gathered` holding the objects in node-id order, their names and
      their children (slot variables not included yet).
    """
    gathered = _Gathered()
    gathered.add(self.root, "")
    node_ids = gathered.node_ids
    for node_id, current in enumerate(gathered.objects):
      items = self._child_items(current)
      if not items:  # Most objects (variables) are leaves.
        gathered.children.append([])
        continue
      children = []
      for local_name, child in items:
        child_id = node_ids.get(id(child))
        if child_id is None:
          if not isinstance(child, tf_base.Trackable):
            raise TypeError(
                f"{gathered.describe(node_id, local_name)} is a "
                f"{type(child).__name__}, not a trackable object; only "
                "trackables can be checkpointed.")
          child_id = gathered.add(
              child, checkpoint_keys.escape_local_name(local_name), node_id)
        children.append((child_id, local_name))
      gathered.children.append(children)
    return gathered

  def list_children(self, obj, save_type=tf_base.SaveType.CHECKPOINT,
                    **kwargs):
    """`TrackableReference`s to the children of `obj`, in their order.

    The root's attached dependencies (`Checkpoint(root=...)`) come last.
    `save_type` and `kwargs` are passed to `obj._trackable_children`.
    """
    return [tf_base.TrackableReference(name, child) for name, child
            in self._child_items(obj, save_type, **kwargs)]

  def children(self, obj, save_type=tf_base.SaveType.CHECKPOINT, **kwargs):
    """`{local name: child}` of `obj` (see `list_children`)."""
    return dict(self._child_items(obj, save_type, **kwargs))

  def descendants(self):
    """The objects reachable from the root, breadth first (no slots)."""
    return self._breadth_first_traversal().objects

  def breadth_first_traversal(self):
    """The objects reachable from the root, and the path to each.

    Returns:
      A tuple (objects in node-id order, without slot variables; an
      `ObjectIdentityDictionary` from each object to its path from the
      root, a tuple of `TrackableReference`s, the root's being empty).
    """
    gathered = self._breadth_first_traversal()
    objects = gathered.objects
    paths = [None] * len(objects)
    paths[0] = ()
    for node_id, children in enumerate(gathered.children):
      for child_id, local_name in children:
        if paths[child_id] is None:  # Its parent on a shortest path.
          paths[child_id] = paths[node_id] + (
              tf_base.TrackableReference(local_name, objects[child_id]),)
    node_paths = identity_containers.ObjectIdentityDictionary()
    for obj, path in zip(objects, paths):
      node_paths[obj] = path
    return objects, node_paths

  def list_objects(self, skip_slot_variables=False):
    """All objects reachable from the root, and optimizer slot variables."""
    if skip_slot_variables:
      return self._breadth_first_traversal().objects
    return self._gather().objects

  def objects_with_paths(self):
    """`(object, path)` of every object; paths as in checkpoint keys."""
    gathered = self._gather()
    return list(zip(gathered.objects, gathered.names))

  def _gather(self):
    gathered = self._breadth_first_traversal()
    _gather_slot_variables(gathered)
    return gathered

  def serialize_object_graph(self, saveables_cache=None):
    """Describes the current object graph and what each object saves.

    An object graph unchanged since the last call keeps its proto, and its
    stock variables keep their saveables (which read the variables when
    saving); graph building, all saveables are kept (in the saveables
    cache), eagerly the state of other objects is gathered anew.

    Args:
      saveables_cache: Optional `{trackable: {attribute name: saveables}}`
        to keep saveables in for this call (TensorFlow's argument), in
        place of the view's own cache (`cache_saveables`).

    Returns:
      A tuple (saveables to write, the `TrackableObjectGraph` proto, a feed
      dict of Python state: empty unless caching saveables).
    """
    if saveables_cache is None:
      return self._serialize_object_graph()
    own_cache, own_last = self._saveables_cache, self._last_serialized
    self._saveables_cache, self._last_serialized = saveables_cache, None
    try:
      return self._serialize_object_graph()
    finally:
      self._saveables_cache, self._last_serialized = own_cache, own_last

  def _serialize_object_graph(self):
    gathered = self._gather()
    freeze = self._saveables_cache is None
    last = self._last_serialized
    node_saveables = None
    if last is not None and last.describes(gathered):
      node_saveables = self._current_saveables(gathered, last, freeze)
    if node_saveables is None:
      # Eagerly, variables' saveables are kept for later saves: they must
      # not keep the variables alive.
      registered = _registered_nodes(gathered)
      node_saveables, attributes = self._node_saveables(
          gathered, freeze, weak=freeze, registered=registered)
      last = self._last_serialized = _Serialized(
          gathered, node_saveables, attributes,
          _object_graph_proto(gathered, attributes, registered),
          keep_all=not freeze, registered=registered)
    saveables = _in_write_order(node_saveables, last.python_state_nodes)
    saveables.extend(_registered_saves(gathered, last.registered))
    feed_additions = {}
    if not freeze:
      for saveable in saveables:
        if isinstance(saveable, saveable_object.PythonStateSaveable):
          feed_additions.update(saveable.feed_dict_additions())
    return saveables, last.proto, feed_additions

  def frozen_saveable_objects(self, object_map=None, to_graph=None,
                              call_with_mapped_captures=None):
    """Saveables for a static save, the object graph included as a constant.

    Python state is baked in at its current value, so the result needs no
    feed dict.

    Args:
      object_map: Optional `{trackable: copy}`: a copy saves in place of its
        original (a SavedModel's copies of resources in another graph);
        names and keys stay the original's.
      to_graph: Optional graph to build the saveables in.
      call_with_mapped_captures: Optional function calling a
        `ConcreteFunction` `_serialize_to_tensors` with its captures mapped
        into `to_graph`.
    """
    with to_graph.as_default() if to_graph else contextlib.nullcontext():
      gathered = self._gather()
      saving = _Saving(
          identity_containers.ObjectIdentityDictionary() if object_map is None
          else object_map, call_with_mapped_captures)
      registered = _registered_nodes(gathered)
      node_saveables, attributes = self._node_saveables(
          gathered, freeze=True, registered=registered, saving=saving)
      proto = _object_graph_proto(gathered, attributes, registered)
      with ops.device("/cpu:0"):
        proto_tensor = constant_op.constant(proto.SerializeToString(),
                                            dtype=dtypes.string)
      return [saveable for per_node in node_saveables
              for saveable in per_node] + _registered_saves(
                  gathered, registered, saving.object_map) + [
                      saveable_object.NoRestoreSaveable(
                          tensor=proto_tensor,
                          name=trackable.OBJECT_GRAPH_PROTO_KEY)]

  def _node_saveables(self, gathered, freeze, weak=False, registered=(),
                      saving=None):
    """Each node's saveables, and its attributes (as SerializedTensor dicts).

    Objects of a registered saver (node ids in `registered`) have none.
    `saving` is an optional `_Saving` (see `frozen_saveable_objects`).
    """
    node_saveables, attributes = [], []
    for node_id, obj in enumerate(gathered.objects):
      node_attributes = []
      if node_id in registered:
        node_saveables.append([])
        attributes.append(node_attributes)
        continue
      node_saveables.append(self._object_saveables(
          obj, gathered.names[node_id], node_attributes, freeze, weak,
          saving))
      attributes.append(node_attributes)
    return node_saveables, attributes

  def _current_saveables(self, gathered, last, freeze):
    """Each node's saveables, from `last` where they are still current.

    Returns:
      None if an object now saves other attributes than in `last`.
    """
    if not freeze:
      return last.node_saveables
    node_saveables = []
    objects = gathered.objects
    for node_id, kept in enumerate(last.node_saveables):
      # A variable may have set its own `_serialize_to_tensors` since.
      if kept is not None and (
          not kept or
          saveable_object_util.has_default_variable_saving(objects[node_id])):
        node_saveables.append(kept)
        continue
      node_attributes = []
      node_saveables.append(self._object_saveables(
          objects[node_id], gathered.names[node_id], node_attributes, freeze,
          weak=True))
      if node_attributes != last.attributes[node_id]:
        return None
    return node_saveables

  def _object_saveables(self, obj, object_name, node_attributes, freeze,
                        weak=False, saving=None):
    """The saveables of `obj`; Python state frozen if `freeze`."""
    saveables = []
    for attribute_saveables in self._attribute_saveables(
        obj, object_name, node_attributes, weak, saving):
      if freeze and isinstance(attribute_saveables[0],
                               saveable_object.PythonStateSaveable):
        attribute_saveables = tuple(s.freeze() for s in attribute_saveables)
      saveables.extend(attribute_saveables)
    return saveables

  def _attribute_saveables(self, obj, object_name, node_attributes,
                           weak=False, saving=None):
    """The saveables of each attribute of `obj`; fills `node_attributes`.

    Args:
      obj: A trackable.
      object_name: Its escaped path from the root.
      node_attributes: A list to append its attributes to.
      weak: Whether a stock variable's saveable refers to it through a weak
        proxy (to keep the saveable without keeping the variable alive).
      saving: Optional `_Saving`: the object saving in place of `obj`, and
        how to call its functions.

    Returns:
      A list with a tuple of saveables per attribute.
    """
    full_name = full_name_for_variable(obj)
    mapped_captures = None
    if saving is not None:
      obj = saving.object_map.get(obj, obj)
      mapped_captures = saving.call_with_mapped_captures
    variable = (saveable_object_util.stock_variable(obj)
                if self._saveables_cache is None else None)
    if variable is not None:
      # The common case, kept short: saves walk every variable.
      saveable = saveable_object_util.VariableSaveable(
          weakref.proxy(variable) if weak else variable,
          checkpoint_keys.checkpoint_key(
              object_name, checkpoint_keys.SERIALIZE_TO_TENSORS_NAME))
      node_attributes.append(dict(name=trackable.VARIABLE_VALUE_KEY,
                                  checkpoint_key=saveable.specs[0].name,
                                  full_name=full_name))
      return [(saveable,)]
    factories = saveable_object_util.saveable_objects_from_trackable(obj)
    if not factories:
      return []
    cache = None
    if self._saveables_cache is not None:
      cache = self._saveables_cache.setdefault(obj, {})
    result = []
    for name, factory in factories.items():
      key = checkpoint_keys.checkpoint_key(object_name, name)
      saveables = cache.get(name) if cache is not None else None
      if saveables is None or any(key not in s.name for s in saveables):
        saveables = saveable_object_util.saveables_for_attribute(
            factory, key, name, mapped_captures)
        if cache is not None:
          cache[name] = saveables
      names_and_keys = getattr(saveables[0],
                               "get_proto_names_and_checkpoint_keys", None)
      for local_name, local_key in (names_and_keys() if names_and_keys
                                    else [(name, key)]):
        node_attributes.append(dict(name=local_name, checkpoint_key=local_key,
                                    full_name=full_name))
      result.append(saveables)
    return result


class _Saving(typing.NamedTuple):
  """How a frozen save maps objects (see `frozen_saveable_objects`)."""
  object_map: dict
  call_with_mapped_captures: typing.Optional[typing.Callable]


_STOCK_CHILDREN_BY_CLASS = {}


def _is_plain_leaf(obj):
  """Whether `obj` surely has no dependencies (a variable, typically).

  True when its class lists children the stock way (from the manual
  dependency list) and that list is empty. Saves, per variable, the cost of
  `_trackable_children()`, which dominates walking large graphs.
  """
  cls = type(obj)
  stock = _STOCK_CHILDREN_BY_CLASS.get(cls)
  if stock is None:
    stock = (cls._trackable_children is tf_base.Trackable._trackable_children  # pylint: disable=protected-access
             and cls._checkpoint_dependencies is  # pylint: disable=protected-access
             tf_base.Trackable._checkpoint_dependencies)  # pylint: disable=protected-access
    _STOCK_CHILDREN_BY_CLASS[cls] = stock
  return stock and not getattr(
      obj, "_self_unconditional_checkpoint_dependencies", None)


class _Gathered:
  """The objects of one traversal, indexed by node id.

  Objects are held in `objects`, so their `id()`s stay valid keys for the
  duration of the traversal.
  """

  def __init__(self):
    self.objects = []
    # Per node: (parent node id, escaped local name), or (None, full name).
    self._name_parts = []
    self._names = []
    self.children = []  # Per node: [(child node id, local name)].
    self.slots = {}  # Optimizer node id -> [SlotVariableReference].
    self.node_ids = {}  # id(object) -> node id.

  def add(self, obj, name, parent_id=None):
    """Adds `obj`, named `name` below `parent_id` (or in full); its id."""
    node_id = len(self.objects)
    self.objects.append(obj)
    self._name_parts.append((parent_id, name))
    self.node_ids[id(obj)] = node_id
    return node_id

  @property
  def names(self):
    """Escaped object paths, as used in checkpoint keys.

    Built when first asked for: listing objects needs none, and the paths
    of a deep graph take memory quadratic in its depth.
    """
    names = self._names
    for parent_id, name in self._name_parts[len(names):]:
      if parent_id:
        name = names[parent_id] + "/" + name
      names.append(name)
    return names

  def describe(self, parent_id, local_name):
    """A readable path such as "root/model/layer" for error messages."""
    parent_name = self.names[parent_id]
    return "root/" + (f"{parent_name}/" if parent_id else "") + local_name


class _Serialized:
  """An object graph as last serialized, to reuse while it stays the same.

  Holds its objects weakly: a dead object makes it stale rather than being
  kept alive.
  """

  def __init__(self, gathered, node_saveables, attributes, proto, keep_all,
               registered):
    """Records a serialization of `gathered`.

    Args:
      gathered: The `_Gathered` objects.
      node_saveables: Each node's saveables.
      attributes: Each node's attributes.
      proto: The `TrackableObjectGraph` proto.
      keep_all: Whether to keep every node's saveables (graph building: the
        saveables cache holds them anyway). Otherwise only the saveables of
        stock variables are kept (they hold their variables weakly); other
        nodes get None, to be asked again.
      registered: `{node id: registered saver name}` (`_registered_nodes`).
    """
    self.registered = registered
    self.python_state_nodes = frozenset(
        node_id for node_id, obj in enumerate(gathered.objects)
        if isinstance(obj, python_state.PythonState))
    self._object_refs = [weakref.ref(obj) for obj in gathered.objects]
    self.names = gathered.names
    self.children = gathered.children
    self.slots = gathered.slots
    self.attributes = attributes
    self.proto = proto
    self.node_saveables = node_saveables if keep_all else [
        saveables if _only_variable_saveables(saveables) else None
        for saveables in node_saveables]

  def describes(self, gathered):
    """Whether `gathered` has the same objects, names and edges."""
    refs = self._object_refs
    return (len(refs) == len(gathered.objects) and
            all(ref() is obj for ref, obj in zip(refs, gathered.objects)) and
            self.names == gathered.names and
            self.children == gathered.children and
            self.slots == gathered.slots)


def _in_write_order(node_saveables, python_state_nodes):
  """All nodes' saveables in the order TensorFlow writes their values.

  TensorFlow's object-based saves write the values of `PythonState`
  objects after all others (each group in graph order), and the data file
  holds values in the order they are written.
  """
  ordered = [saveable for node_id, per_node in enumerate(node_saveables)
             if node_id not in python_state_nodes for saveable in per_node]
  ordered.extend(saveable for node_id in sorted(python_state_nodes)
                 for saveable in node_saveables[node_id])
  return ordered


def _only_variable_saveables(saveables):
  return all(isinstance(saveable, saveable_object_util.VariableSaveable)
             for saveable in saveables)


def _gather_slot_variables(gathered):
  """Appends optimizer slot variables to `gathered` and names them."""
  non_slot_objects = list(gathered.objects)
  for optimizer_id, optimizer in enumerate(non_slot_objects):
    # Looked up on the class: some objects' __getattr__ has side effects.
    if not hasattr(type(optimizer), "get_slot_names"):
      continue
    for slot_name in optimizer.get_slot_names():
      for variable_id, variable in enumerate(non_slot_objects):
        try:
          slot = optimizer.get_slot(variable, slot_name)
        except (AttributeError, KeyError):
          slot = None
        if slot is None:
          continue
        _check_slot_variable(slot, gathered.node_ids)
        slot_id = gathered.add(slot, checkpoint_keys.slot_variable_key(
            variable_path=gathered.names[variable_id],
            optimizer_path=gathered.names[optimizer_id],
            slot_name=slot_name))
        gathered.children.append([])
        gathered.slots.setdefault(optimizer_id, []).append(
            _TrackableObject.SlotVariableReference(
                slot_name=slot_name, original_variable_node_id=variable_id,
                slot_variable_node_id=slot_id))


def _check_slot_variable(slot, node_ids):
  slot._maybe_initialize_trackable()  # pylint: disable=protected-access
  if slot._trackable_children():  # pylint: disable=protected-access
    raise NotImplementedError(
        "Currently only variables with no dependencies can be saved as slot "
        f"variables: {slot!r} has dependencies of its own.")
  if id(slot) in node_ids:
    raise NotImplementedError(
        "A slot variable was re-used as a dependency of a Trackable object: "
        f"{slot!r} is both an optimizer's slot and another object's "
        "dependency, which checkpoints cannot represent.")


def _registered_nodes(gathered):
  """`{node id: saver name}` of the objects that registered savers save."""
  registered = {}
  for node_id, obj in enumerate(gathered.objects):
    name = registered_savers.saver_name(obj)
    if name:
      registered[node_id] = name
  return registered


def _registered_saves(gathered, registered, object_map=None):
  """A `RegisteredSave` per saver of `registered`, in order of first node.

  An object with a copy in `object_map` is saved by its copy.
  """
  by_saver = {}
  for node_id, name in registered.items():
    obj = gathered.objects[node_id]
    by_saver.setdefault(name, {})[gathered.names[node_id]] = (
        obj if object_map is None else object_map.get(obj, obj))
  return [registered_savers.RegisteredSave(name, trackables)
          for name, trackables in by_saver.items()]


def _object_graph_proto(gathered, attributes, registered):
  """The `TrackableObjectGraph` of `gathered`, given each node's attributes."""
  with_values = _nodes_with_values(gathered, attributes, registered)
  proto = trackable_object_graph_pb2.TrackableObjectGraph()
  add_node = proto.nodes.add
  for node_id, children in enumerate(gathered.children):
    node = add_node()
    for child_id, local_name in children:
      node.children.add(node_id=child_id, local_name=local_name)
    for attribute in attributes[node_id]:
      node.attributes.add(**attribute)
    if node_id in gathered.slots:
      node.slot_variables.extend(gathered.slots[node_id])
    if node_id in registered:
      node.registered_saver.name = registered[node_id]
      node.registered_saver.object_name = gathered.names[node_id]
    node.has_checkpoint_values.value = node_id in with_values
  return proto


def _nodes_with_values(gathered, attributes, registered):
  """The ids of nodes with checkpointed values, their own or below them."""
  parents = collections.defaultdict(list)
  for node_id, children in enumerate(gathered.children):
    for child_id, _ in children:
      parents[child_id].append(node_id)
  with_values = {node_id for node_id, node_attributes in enumerate(attributes)
                 if node_attributes or node_id in gathered.slots or
                 node_id in registered}
  to_visit = list(with_values)
  while to_visit:
    for parent in parents.pop(to_visit.pop(), ()):
      if parent not in with_values:
        with_values.add(parent)
        to_visit.append(parent)
  return with_values
