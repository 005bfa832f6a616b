"""Describes walked objects as a `TrackableObjectGraph`, with their saveables.

What a save writes of the objects a walk gathered (`graph_walk`): each
object's attributes and their checkpoint keys, slot variables, registered
savers and which nodes have values, as the proto TensorFlow writes for the
same objects; and the saveables that read the values, in the order
TensorFlow writes them. A `Serialization` keeps, for one view, what later
saves of an unchanged object graph reuse.
"""

import collections
import typing
import weakref

from tensorflow.core.protobuf import trackable_object_graph_pb2
from tensorflow.python.framework import constant_op
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import ops
from tensorflow.python.trackable import python_state

from tf_objckpt.engine import registered_savers
from tf_objckpt.engine import saveable_objects
from tf_objckpt.engine import variable_saveables
from tf_objckpt.foundation import checkpoint_keys
from tf_objckpt.foundation import identity_containers
from tf_objckpt.foundation import module_names
from tf_objckpt.objects import trackable
from tf_objckpt.restoring import named_saveables
from tf_objckpt.restoring import trackable_saveables


def full_name_for_variable(obj) -> str:
  """The global (name-based) name of a variable, or "" for other objects."""
  if not trackable_saveables.is_variable(obj):
    return ""
  slice_info = getattr(obj, "_save_slice_info", None)
  if slice_info is not None:
    return slice_info.full_name
  return obj._shared_name  # pylint: disable=protected-access


class Serialization:
  """Serializes one view's object graph, keeping what later saves reuse.

  The saveables cache (graph building) keeps each object's saveables, so
  that repeated saves and restores reuse their ops; the last serialization
  is kept while the object graph stays the same.
  """

  def __init__(self, cache_saveables=False):
    self.saveables_cache = None
    self._last = None  # The `_Serialized` of the last save.
    if cache_saveables:
      self.cache_saveables()

  def cache_saveables(self):
    """Keeps each object's saveables across saves; keyed weakly by object."""
    if self.saveables_cache is None:
      self.saveables_cache = (
          identity_containers.ObjectIdentityWeakKeyDictionary())

  def serialize(self, gathered, saveables_cache=None):
    """Describes the objects `gathered` and what each object saves.

    An object graph unchanged since the last call keeps its proto, and its
    stock variables keep their saveables (which read the variables when
    saving); graph building, all saveables are kept (in the saveables
    cache), eagerly the state of other objects is gathered anew.

    Args:
      gathered: The objects of a walk (`graph_walk`), in node order, with
        their names, children and slot variables.
      saveables_cache: Optional `{trackable: {attribute name: saveables}}`
        to keep saveables in for this call, in place of the own cache.

    Returns:
      A tuple (saveables to write, the `TrackableObjectGraph` proto, a feed
      dict of Python state: empty unless caching saveables).
    """
    if saveables_cache is None:
      return self._serialize(gathered)
    own_cache, own_last = self.saveables_cache, self._last
    self.saveables_cache, self._last = saveables_cache, None
    try:
      return self._serialize(gathered)
    finally:
      self.saveables_cache, self._last = own_cache, own_last

  def _serialize(self, gathered):
    freeze = self.saveables_cache is None
    last = self._last
    node_saveables = None
    if last is not None and last.describes(gathered):
      node_saveables = self._current_saveables(gathered, last, freeze)
    if node_saveables is None:
      # Eagerly, variables' saveables are kept for later saves: they must
      # not keep the variables alive.
      registered = _registered_nodes(gathered)
      node_saveables, attributes = self._node_saveables(gathered,
                                                        freeze,
                                                        weak=freeze,
                                                        registered=registered)
      last = self._last = _Serialized(gathered,
                                      node_saveables,
                                      attributes,
                                      _object_graph_proto(
                                          gathered, attributes, registered),
                                      keep_all=not freeze,
                                      registered=registered)
    saveables = _in_write_order(node_saveables, last.python_state_nodes)
    saveables.extend(_registered_saves(gathered, last.registered))
    feed_additions = {}
    if not freeze:
      for saveable in saveables:
        if isinstance(saveable, saveable_objects.PythonStateSaveable):
          feed_additions.update(saveable.feed_dict_additions())
    return saveables, last.proto, feed_additions

  def frozen_saveables(self,
                       gathered,
                       object_map=None,
                       call_with_mapped_captures=None):
    """Saveables of `gathered` for a static save, the object graph included.

    Python state is baked in at its current value. Built in the default
    graph. See `ObjectGraphView.frozen_saveable_objects` for the arguments.
    """
    saving = _Saving(
        identity_containers.ObjectIdentityDictionary()
        if object_map is None else object_map, call_with_mapped_captures)
    registered = _registered_nodes(gathered)
    node_saveables, attributes = self._node_saveables(gathered,
                                                      freeze=True,
                                                      registered=registered,
                                                      saving=saving)
    proto = _object_graph_proto(gathered, attributes, registered)
    with ops.device("/cpu:0"):
      proto_tensor = constant_op.constant(proto.SerializeToString(),
                                          dtype=dtypes.string)
    return [saveable for per_node in node_saveables for saveable in per_node
           ] + _registered_saves(gathered, registered, saving.object_map) + [
               saveable_objects.NoRestoreSaveable(
                   tensor=proto_tensor, name=trackable.OBJECT_GRAPH_PROTO_KEY)
           ]

  def saveables_by_object(self, gathered):
    """`(object, its saveables)` for each object of `gathered`, in node order.

    Python state is frozen at its current value; objects a registered saver
    writes have none.
    """
    node_saveables, _ = self._node_saveables(
        gathered, freeze=True, registered=_registered_nodes(gathered))
    return list(zip(gathered.objects, node_saveables))

  def _node_saveables(self,
                      gathered,
                      freeze,
                      weak=False,
                      registered=(),
                      saving=None):
    """Each node's saveables, and its attributes (as SerializedTensor dicts).

    Objects of a registered saver (node ids in `registered`) have none.
    `saving` is an optional `_Saving` (see `frozen_saveables`).
    """
    node_saveables, attributes = [], []
    for node_id, obj in enumerate(gathered.objects):
      node_attributes = []
      if node_id in registered:
        node_saveables.append([])
        attributes.append(node_attributes)
        continue
      node_saveables.append(
          self._object_saveables(obj, gathered.names[node_id], node_attributes,
                                 freeze, weak, saving))
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
      if kept is not None and (not kept or
                               trackable_saveables.has_default_variable_saving(
                                   objects[node_id])):
        node_saveables.append(kept)
        continue
      node_attributes = []
      node_saveables.append(
          self._object_saveables(objects[node_id],
                                 gathered.names[node_id],
                                 node_attributes,
                                 freeze,
                                 weak=True))
      if node_attributes != last.attributes[node_id]:
        return None
    return node_saveables

  def _object_saveables(self,
                        obj,
                        object_name,
                        node_attributes,
                        freeze,
                        weak=False,
                        saving=None):
    """The saveables of `obj`; Python state frozen if `freeze`."""
    saveables = []
    for attribute_saveables in self._attribute_saveables(
        obj, object_name, node_attributes, weak, saving):
      if freeze and isinstance(attribute_saveables[0],
                               saveable_objects.PythonStateSaveable):
        attribute_saveables = tuple(s.freeze() for s in attribute_saveables)
      saveables.extend(attribute_saveables)
    return saveables

  def _attribute_saveables(self,
                           obj,
                           object_name,
                           node_attributes,
                           weak=False,
                           saving=None):
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
    variable = (trackable_saveables.stock_variable(obj)
                if self.saveables_cache is None else None)
    if variable is not None:
      # The common case, kept short: saves walk every variable.
      saveable = variable_saveables.VariableSaveable(
          weakref.proxy(variable) if weak else variable,
          checkpoint_keys.checkpoint_key(
              object_name, checkpoint_keys.SERIALIZE_TO_TENSORS_NAME))
      node_attributes.append(
          dict(name=trackable.VARIABLE_VALUE_KEY,
               checkpoint_key=saveable.specs[0].name,
               full_name=full_name))
      return [(saveable,)]
    factories = trackable_saveables.saveable_objects_from_trackable(obj)
    if not factories:
      return []
    cache = None
    if self.saveables_cache is not None:
      cache = self.saveables_cache.setdefault(obj, {})
    result = []
    for name, factory in factories.items():
      key = checkpoint_keys.checkpoint_key(object_name, name)
      saveables = cache.get(name) if cache is not None else None
      if saveables is None or any(key not in s.name for s in saveables):
        saveables = named_saveables.saveables_for_attribute(
            factory, key, name, mapped_captures)
        if cache is not None:
          cache[name] = saveables
      names_and_keys = getattr(saveables[0],
                               "get_proto_names_and_checkpoint_keys", None)
      for local_name, local_key in (names_and_keys()
                                    if names_and_keys else [(name, key)]):
        node_attributes.append(
            dict(name=local_name, checkpoint_key=local_key,
                 full_name=full_name))
      result.append(saveables)
    return result


class _Saving(typing.NamedTuple):
  """How a frozen save maps objects (see `Serialization.frozen_saveables`)."""
  object_map: dict
  call_with_mapped_captures: typing.Optional[typing.Callable]


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
        for saveables in node_saveables
    ]

  def describes(self, gathered):
    """Whether `gathered` has the same objects, names and edges."""
    refs = self._object_refs
    return (len(refs) == len(gathered.objects) and
            all(ref() is obj for ref, obj in zip(refs, gathered.objects)) and
            self.names == gathered.names and
            self.children == gathered.children and self.slots == gathered.slots)


def _in_write_order(node_saveables, python_state_nodes):
  """All nodes' saveables in the order TensorFlow writes their values.

  TensorFlow's object-based saves write the values of `PythonState`
  objects after all others (each group in graph order), and the data file
  holds values in the order they are written.
  """
  ordered = [
      saveable for node_id, per_node in enumerate(node_saveables)
      if node_id not in python_state_nodes for saveable in per_node
  ]
  ordered.extend(saveable for node_id in sorted(python_state_nodes)
                 for saveable in node_saveables[node_id])
  return ordered


def _only_variable_saveables(saveables):
  return all(
      isinstance(saveable, variable_saveables.VariableSaveable)
      for saveable in saveables)


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
    by_saver.setdefault(
        name, {})[gathered.names[node_id]] = (obj if object_map is None else
                                              object_map.get(obj, obj))
  return [
      registered_savers.RegisteredSave(name, trackables)
      for name, trackables in by_saver.items()
  ]


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
  with_values = {
      node_id for node_id, node_attributes in enumerate(attributes)
      if node_attributes or node_id in gathered.slots or node_id in registered
  }
  to_visit = list(with_values)
  while to_visit:
    for parent in parents.pop(to_visit.pop(), ()):
      if parent not in with_values:
        with_values.add(parent)
        to_visit.append(parent)
  return with_values


module_names.keep_module_name("tf_objckpt.graph_view", full_name_for_variable)
