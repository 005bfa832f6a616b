"""Walks an object graph: the objects reachable from a root, in node order.

Node ids are assigned in breadth-first order from the root, children in
the order their parent lists them, then slot variables; each object's name
is its escaped path from the root. Both orders are part of the checkpoint
format: they decide the proto TensorFlow writes for the same objects.
`graph_serialization` describes the objects walked as that proto, and
gathers their saveables. TensorFlow's name for this module is
`graph_view`, which re-exports it.
"""

import contextlib
import copy
from typing import Any, List
import weakref

from tensorflow.core.protobuf import trackable_object_graph_pb2
from tensorflow.python.trackable import base as tf_base

from tf_objckpt.foundation import checkpoint_keys
from tf_objckpt.foundation import identity_containers
from tf_objckpt.foundation import module_names
from tf_objckpt.objects import graph_serialization

_TrackableObject = trackable_object_graph_pb2.TrackableObjectGraph.TrackableObject


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
    self._root_ref = (root
                      if isinstance(root, weakref.ref) else weakref.ref(root))
    self._attached_dependencies = ([] if attached_dependencies is None else
                                   attached_dependencies)
    self._serialization = graph_serialization.Serialization()

  def __deepcopy__(self, memo):
    """A view of a copy of the root, without this view's caches."""
    # pylint: disable=protected-access
    copied = type(self).__new__(type(self))
    memo[id(self)] = copied
    copied._serialization = graph_serialization.Serialization(
        cache_saveables=self.saveables_cache is not None)
    root = self.root
    copied._root_ref = (self._root_ref if root is None else weakref.ref(
        copy.deepcopy(root, memo)))
    copied._attached_dependencies = copy.deepcopy(self._attached_dependencies,
                                                  memo)
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
    return self._serialization.saveables_cache

  def cache_saveables(self):
    """Keeps each object's saveables across saves and restores.

    For graph building: repeated saves and restores then reuse their ops.
    Keyed weakly by object.
    """
    self._serialization.cache_saveables()

  def _child_items(self, obj, save_type=tf_base.SaveType.CHECKPOINT, **kwargs):
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
          child_id = gathered.add(child,
                                  checkpoint_keys.escape_local_name(local_name),
                                  node_id)
        children.append((child_id, local_name))
      gathered.children.append(children)
    return gathered

  def list_children(self, obj, save_type=tf_base.SaveType.CHECKPOINT, **kwargs):
    """`TrackableReference`s to the children of `obj`, in their order.

    The root's attached dependencies (`Checkpoint(root=...)`) come last.
    `save_type` and `kwargs` are passed to `obj._trackable_children`.
    """
    return [
        tf_base.TrackableReference(name, child)
        for name, child in self._child_items(obj, save_type, **kwargs)
    ]

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
          paths[child_id] = paths[node_id] + (tf_base.TrackableReference(
              local_name, objects[child_id]),)
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

    See `graph_serialization.Serialization.serialize`.

    Args:
      saveables_cache: Optional `{trackable: {attribute name: saveables}}`
        to keep saveables in for this call (TensorFlow's argument), in
        place of the view's own cache (`cache_saveables`).

    Returns:
      A tuple (saveables to write, the `TrackableObjectGraph` proto, a feed
      dict of Python state: empty unless caching saveables).
    """
    return self._serialization.serialize(self._gather(), saveables_cache)

  def saveables_by_object(self):
    """`(object, its saveables)` for every object, in node order.

    See `graph_serialization.Serialization.saveables_by_object`.
    """
    return self._serialization.saveables_by_object(self._gather())

  def frozen_saveable_objects(self,
                              object_map=None,
                              to_graph=None,
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
      return self._serialization.frozen_saveables(self._gather(), object_map,
                                                  call_with_mapped_captures)


_STOCK_CHILDREN_BY_CLASS: dict[type, bool] = {}


def _is_plain_leaf(obj):
  """Whether `obj` surely has no dependencies (a variable, typically).

  True when its class lists children the stock way (from the manual
  dependency list) and that list is empty. Saves, per variable, the cost of
  `_trackable_children()`, which dominates walking large graphs.
  """
  cls = type(obj)
  stock = _STOCK_CHILDREN_BY_CLASS.get(cls)
  if stock is None:
    stock = (
        cls._trackable_children is tf_base.Trackable._trackable_children  # pylint: disable=protected-access
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
        slot_id = gathered.add(
            slot,
            checkpoint_keys.slot_variable_key(
                variable_path=gathered.names[variable_id],
                optimizer_path=gathered.names[optimizer_id],
                slot_name=slot_name))
        gathered.children.append([])
        gathered.slots.setdefault(optimizer_id, []).append(
            _TrackableObject.SlotVariableReference(
                slot_name=slot_name,
                original_variable_node_id=variable_id,
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


def list_objects(root_trackable: Any) -> List[Any]:
  """Every object saved with `root_trackable`, slot variables included."""
  return ObjectGraphView(root_trackable).list_objects()


def gather_initializers(root_trackable: Any) -> List[Any]:
  """The initializers of every object saved with `root_trackable`."""
  return [
      obj.initializer
      for obj in list_objects(root_trackable)
      if getattr(obj, "initializer", None) is not None
  ]


module_names.keep_module_name("tf_objckpt.graph_view", WeakTrackableReference,
                              ObjectGraphView)
module_names.keep_module_name("tf_objckpt.checkpoint", list_objects,
                              gather_initializers)
