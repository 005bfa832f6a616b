"""Trackable containers: the list, dict and tuple wrappers.

When a plain `list`, `dict` or `tuple` is assigned to an attribute of an
`AutoTrackable`, it is replaced by a wrapper from this module. The wrapper
behaves like the original container, and in addition declares a checkpoint
dependency on every trackable it holds: list and tuple elements are named by
their index ("0", "1", ...), dict values by their key, namedtuple elements by
both field name and index. These are the names TensorFlow gives, so the
checkpoints of both libraries have the same keys.

Restoring into an object graph relies on the same names pointing at the same
objects when the graph is rebuilt. A container mutated in a way that breaks
this (replacing, removing or reordering trackable elements, changing the
wrapped container behind the wrapper's back, using non-string dict keys for
trackables) still works as a container, but refuses to be saved with a
`ValueError`.
"""

import collections
import collections.abc
import copy
import sys

import wrapt
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.trackable import data_structures as tf_data_structures

from tf_objckpt import base

# Everything TensorFlow considers trackable, ours included (our base class
# derives from TensorFlow's).
_TrackableBase = tf_base.Trackable

_CHECKPOINT = "checkpoint"


# TensorFlow's `NoDependency` is honoured too: ours derives from it.
_AnyNoDependency = tf_data_structures.NoDependency


class NoDependency(_AnyNoDependency):
  """Marks a value to be stored on a trackable without a dependency.

  `obj.attr = NoDependency(value)` stores the bare `value` (a list stays a
  plain list) and adds no checkpoint dependency, which is how a user keeps
  an object or container out of the checkpoint. TensorFlow's containers
  honour it as their own.
  """

  __slots__ = ()


def _is_plain_container(value):
  """True for exactly `list`, `dict` and `OrderedDict` (not subclasses).

  Subclasses such as `collections.Counter` carry their own logic, which a
  wrapper would break, so they are stored untouched.
  """
  return type(value) in (list, dict, collections.OrderedDict)


def _tuple_needs_wrapper(values):
  """Whether a tuple holds anything that tracking would have to change."""
  for element in values:
    if isinstance(element, (_AnyNoDependency, _TrackableBase)):
      return True
    if _is_plain_container(element):
      return True
    if isinstance(element, tuple) and _tuple_needs_wrapper(element):
      return True
  # Immutable and nothing to track: it can be stored as it is.
  return False


def wrap_or_unwrap(value):
  """Converts a value into the form stored on a trackable object.

  Args:
    value: Any value.

  Returns:
    The payload of a `NoDependency`; a trackable unchanged; a tracked wrapper
    for a plain list, dict or a tuple with trackable content; anything else
    unchanged.
  """
  if isinstance(value, _AnyNoDependency):
    return value.value
  if isinstance(value, _TrackableBase):
    return value
  if type(value) is list:  # pylint: disable=unidiomatic-typecheck
    return ListWrapper(value)
  if _is_plain_container(value):
    return _DictWrapper(value)
  if isinstance(value, tuple) and _tuple_needs_wrapper(value):
    return _TupleWrapper(value)
  return value


def sticky_attribute_assignment(trackable, name, value):
  """Tracks `value` on `trackable` under `name`, as attribute assignment does.

  Containers are wrapped and `NoDependency` is unwrapped (without adding a
  dependency). A trackable result replaces any dependency already held under
  `name`, since re-assigning an attribute is ordinary Python.

  Args:
    trackable: The object receiving the value.
    name: The dependency's local name (usually the attribute's name).
    value: The value being assigned.

  Returns:
    The value to actually store.
  """
  wants_dependency = not isinstance(value, _AnyNoDependency)
  value = wrap_or_unwrap(value)
  if wants_dependency and isinstance(value, _TrackableBase):
    trackable._track_trackable(value, name=name, overwrite=True)  # pylint: disable=protected-access
  return value


class _UntrackableError(ValueError):
  """A strict container was given a value that is not trackable."""

  def __init__(self, value):  # pylint: disable=super-init-not-called
    self._value = value

  def __str__(self):
    return (f"Only trackable objects (such as Layers or Optimizers) may be "
            f"stored in a List object. Got {self._value!r}, which does not "
            f"inherit from Trackable (List and Mapping hold only trackables: "
            f"variables, layers, optimizers, ...).")


class TrackableDataStructure(base.Trackable):
  """Common base of the trackable containers.

  Besides the dependency bookkeeping, it exposes the Keras-style variable
  collections of its contents (`trainable_weights`, `variables`, `layers`,
  ...), so a container of layers can stand in for them.

  Every instance attribute starts with `_self_`: `wrapt.ObjectProxy`
  subclasses store only such attributes on the proxy itself (others would
  be set on the wrapped dict or tuple).
  """

  # Containers that accept only trackable values raise for anything else.
  _only_trackables = True

  def __init__(self):
    self._self_trainable = True
    self._self_extra_variables = []

  def _track_value(self, value, name):
    """Adds a dependency on `value` (if it is trackable) and returns it."""
    # pylint: disable=g-import-not-at-top
    from tensorflow.python.ops import variables
    value = sticky_attribute_assignment(self, name, value)
    if isinstance(value, variables.Variable):
      self._self_extra_variables.append(value)
    if not isinstance(value, _TrackableBase):
      if self._only_trackables:
        raise _UntrackableError(value)
      return value
    if hasattr(value, "_use_resource_variables"):
      # Legacy `tf.layers` inside containers must use resource variables.
      value._use_resource_variables = True  # pylint: disable=protected-access
    return value

  @property
  def _values(self):
    """The contained values, in a deterministic order."""
    raise NotImplementedError("Subclasses provide _values.")

  @property
  def trainable(self):
    return self._self_trainable

  @trainable.setter
  def trainable(self, value):
    self._self_trainable = value

  @property
  def _layers(self):
    """Contained layers and containers, including empty ones."""
    return [value for value in self._values
            if _is_layer(value) or _has_weights(value)]

  @property
  def layers(self):
    """Contained layers, looking through nested containers (deduplicated)."""
    found, seen = [], set()
    pending = list(reversed(self._layers))
    while pending:
      item = pending.pop()
      if id(item) in seen:
        continue
      seen.add(id(item))
      if _is_layer(item):
        found.append(item)
      else:
        pending.extend(reversed(getattr(item, "layers", None) or []))
    return found

  def _collect(self, attribute):
    """Concatenates `attribute` over the contained trackables that have it."""
    collected = []
    for value in self._values:
      if isinstance(value, _TrackableBase) and hasattr(value, attribute):
        collected += getattr(value, attribute)
    return collected

  @property
  def trainable_weights(self):
    if not self._self_trainable:
      return []
    extra = [v for v in self._self_extra_variables if v.trainable]
    return self._collect("trainable_variables") + extra

  @property
  def non_trainable_weights(self):
    extra_trainable = [v for v in self._self_extra_variables if v.trainable]
    extra_frozen = [v for v in self._self_extra_variables if not v.trainable]
    frozen = self._collect("non_trainable_variables")
    if self._self_trainable:
      return frozen + extra_frozen
    # A frozen container reports everything, trainable variables first.
    return (self._collect("trainable_variables") + extra_trainable + frozen +
            extra_frozen)

  @property
  def weights(self):
    return self.trainable_weights + self.non_trainable_weights

  @property
  def trainable_variables(self):
    return self.trainable_weights

  @property
  def non_trainable_variables(self):
    return self.non_trainable_weights

  @property
  def variables(self):
    return self.weights

  @property
  def updates(self):
    """Updates of the contained layers."""
    return [u for layer in self.layers for u in getattr(layer, "updates", [])]

  @property
  def losses(self):
    """Losses of the contained layers."""
    return [l for layer in self.layers for l in getattr(layer, "losses", [])]

  def __hash__(self):
    # Identity hashing lets containers live in sets and dict keys.
    return id(self)

  def __eq__(self, other):
    return self is other


def _is_layer(value):
  """Duck-typed Keras layer check (avoids importing Keras)."""
  return hasattr(value, "_is_layer") and not isinstance(value, type)


def _has_weights(value):
  """Whether `value` exposes weights like a layer (containers do too)."""
  cls = type(value)
  return (hasattr(cls, "trainable_weights") and
          hasattr(cls, "non_trainable_weights") and
          not isinstance(value, type))


class List(TrackableDataStructure, collections.abc.Sequence):
  """An append-only, trackable sequence of trackable objects.

  Element `i` is a checkpoint dependency named `str(i)`. Only appending is
  allowed, so a name always refers to the same element; use `ListWrapper`
  (what attribute assignment of a `list` gives) for a mutable list.
  """

  def __init__(self, *args, **kwargs):
    """Builds the list; arguments are those of `list()`."""
    super().__init__()
    self._storage = self._make_storage(*args, **kwargs)
    for index, element in enumerate(self._storage):
      self._storage[index] = self._track_value(element,
                                               self._name_element(index))

  def _make_storage(self, *args, **kwargs):
    """Returns the backing list."""
    return list(*args, **kwargs)

  def _name_element(self, index):
    return str(index)

  @property
  def _values(self):
    return self

  def copy(self):
    return type(self)(copy.copy(self._storage))

  def __copy__(self):
    return self.copy()

  def __deepcopy__(self, memo):
    return type(self)(copy.deepcopy(self._storage, memo))

  def append(self, value):
    """Appends `value`, tracked under its new index."""
    value = self._track_value(value, self._name_element(len(self._storage)))
    self._storage.append(value)

  def extend(self, values):
    """Appends each of `values`."""
    for value in values:
      self.append(value)

  def __iadd__(self, values):
    self.extend(values)
    return self

  def __add__(self, other):
    return self._storage + getattr(other, "_storage", other)

  def __radd__(self, other):
    return other + self._storage

  def __imul__(self, times):
    if times <= 0:
      raise ValueError(
          f"List only supports append, multiplying in place by {times} "
          f"removes elements: {self!r} would lose them. Multiply a copy, "
          f"or use a positive number.")
    original = list(self._storage)
    for _ in range(times - 1):
      self.extend(original)
    return self

  def __mul__(self, times):
    return self._storage * times

  def __rmul__(self, times):
    return self * times

  def __getitem__(self, key):
    return self._storage[key]

  def __len__(self):
    return len(self._storage)

  def __repr__(self):
    return f"List({self._storage!r})"

  def __sizeof__(self):
    return super().__sizeof__() + sys.getsizeof(self._storage)


def _replaced(now, before):
  """Whether slice assignment put a new value at a position.

  Trackables are compared by identity (comparing variables with `!=` builds
  a tensor); other values by equality, as a list would.
  """
  if now is before:
    return False
  if isinstance(now, _TrackableBase) or isinstance(before, _TrackableBase):
    return True
  try:
    return bool(now != before)
  except Exception:  # pylint: disable=broad-except
    return True


# The start of the errors of unsaveable list wrappers: TensorFlow's phrase.
_UNABLE_TO_SAVE_LIST = ("Unable to save the object {!r} (a list wrapper "
                        "constructed to track trackable TensorFlow objects).")


class ListWrapper(List, collections.abc.MutableSequence, list):
  """A tracked view of a user's `list`, mutable like the list itself.

  The user's list object is kept as the storage. Every list operation works,
  but a mutation that makes an index name a different trackable than before
  (replacing, deleting, inserting before or reordering trackable elements),
  or a change made to the wrapped list directly, is remembered: saving then
  raises `ValueError`, since restore-on-create could not be correct.

  It derives from `list` only so that `isinstance(x, list)` holds; the
  inherited list storage is never used.
  """

  _only_trackables = False

  def __init__(self, wrapped_list):
    """Wraps (without copying) `wrapped_list`.

    Args:
      wrapped_list: The list to wrap. Later changes made to it directly,
        rather than through the wrapper, make the wrapper unsaveable.
    """
    self._non_append_mutation = False
    # The first operation that set `_non_append_mutation`, for its error.
    self._non_append_operation = None
    self._external_modification = False
    super().__init__(wrapped_list)
    self._last_wrapped_list_snapshot = list(self._storage)

  def _make_storage(self, wrapped_list):
    return wrapped_list

  @property
  def _object_identifier(self):
    # TensorFlow's identifier: SavedModels revive this as a list wrapper.
    return "trackable_list_wrapper"

  def __copy__(self):
    copied = super().__copy__()
    self._copy_flags_to(copied)
    return copied

  def __deepcopy__(self, memo):
    copied = super().__deepcopy__(memo)
    self._copy_flags_to(copied)
    return copied

  def _copy_flags_to(self, other):
    other._non_append_mutation = self._non_append_mutation  # pylint: disable=protected-access
    other._non_append_operation = self._non_append_operation  # pylint: disable=protected-access
    other._external_modification = self._external_modification  # pylint: disable=protected-access

  def __reduce_ex__(self, protocol):
    return (self.__class__, (self._storage,))

  @property
  def _dirty(self):
    return self._non_append_mutation or self._external_modification

  def _check_external_modification(self):
    """Flags changes made to the wrapped list without going through us."""
    if self._dirty:
      return
    if self._storage != self._last_wrapped_list_snapshot:
      self._external_modification = True
      self._last_wrapped_list_snapshot = None

  def _update_snapshot(self):
    """Records the current content as the expected one."""
    if not self._dirty:
      self._last_wrapped_list_snapshot = list(self._storage)

  def _holds_trackable_or_mutated(self):
    """Whether a reordering mutation would break saving."""
    return self._non_append_mutation or any(
        isinstance(element, _TrackableBase) for element in self._storage)

  def _trackable_children(self, save_type=_CHECKPOINT, cache=None, **kwargs):
    """Returns the children, or raises ValueError if unsaveable."""
    self._check_external_modification()
    if self._non_append_mutation:
      raise ValueError(
          f"{_UNABLE_TO_SAVE_LIST.format(self)} A list element was replaced "
          f"(__setitem__, __setslice__), deleted (__delitem__, __delslice__), "
          f"or moved (sort): here by {self._non_append_operation}. Its "
          f"indices no longer name the objects they named, which "
          f"restore-on-create relies on; only appending keeps them. To keep "
          f"this list out of the checkpoint, wrap it in NoDependency or a "
          f"non-trackable object.")
    if self._external_modification:
      raise ValueError(
          f"{_UNABLE_TO_SAVE_LIST.format(self)} The wrapped list was "
          f"modified outside the wrapper: it now holds {self._storage!r}, "
          f"not what it held when last changed through the wrapper, so its "
          f"dependencies are out of date. To keep this list out of the "
          f"checkpoint, wrap it in NoDependency.")
    return super()._trackable_children(save_type, cache=cache, **kwargs)

  def append(self, value):
    """Appends `value`, tracked under its new index."""
    self._check_external_modification()
    super().append(value)
    self._update_snapshot()

  def extend(self, values):
    """Appends each of `values`."""
    self._check_external_modification()
    super().extend(values)
    self._update_snapshot()

  def _flag_non_append(self, operation):
    """Remembers that `operation` (its name) made the list unsaveable."""
    if not self._non_append_mutation:
      self._non_append_mutation = True
      self._non_append_operation = operation

  def _mutate(self, name, operation, mutates=None):
    """Runs a non-append `operation` on the storage, flagging if unsafe."""
    self._check_external_modification()
    if mutates is None:
      mutates = self._holds_trackable_or_mutated()
    if mutates:
      self._flag_non_append(name)
    result = operation(self._storage)
    self._update_snapshot()
    return result

  def __delitem__(self, key):
    def delete(storage):
      del storage[key]
    self._mutate("__delitem__", delete)

  def pop(self, index=-1):
    return self._mutate("pop", lambda storage: storage.pop(index))

  def remove(self, value):
    self._mutate("remove", lambda storage: storage.remove(value))

  def clear(self):
    self._mutate("clear", lambda storage: storage.clear())

  def reverse(self):
    self._mutate("reverse", lambda storage: storage.reverse())

  def insert(self, index, obj):
    def insert(storage):
      storage.insert(index, obj)
    unsafe = (self._holds_trackable_or_mutated() or
              isinstance(obj, _TrackableBase))
    self._mutate("insert", insert, mutates=unsafe)

  def sort(self, *, key=None, reverse=False):
    self._mutate("sort", lambda storage: storage.sort(key=key, reverse=reverse))

  def __imul__(self, times):
    if times > 0:
      return super().__imul__(times)  # Appends, which updates the snapshot.
    def clear(storage):
      storage *= times
    self._mutate(f"*= {times}", clear)
    return self

  def __setitem__(self, key, value):
    self._check_external_modification()
    if isinstance(key, slice):
      self._set_slice(key, value)
    else:
      if isinstance(self._storage[key], _TrackableBase):
        self._flag_non_append(f"__setitem__ at index {key}")
      self._storage[key] = self._track_value(value, self._name_element(key))
    self._update_snapshot()

  def _set_slice(self, key, values):
    """Slice assignment: flags replaced trackables, tracks new values."""
    before = list(self._storage)
    self._storage[key] = values
    after = self._storage
    for index in range(max(len(before), len(after))):
      old = before[index] if index < len(before) else None
      new = after[index] if index < len(after) else None
      if isinstance(old, _TrackableBase):
        self._flag_non_append("__setitem__ of a slice")
      if new is not None and _replaced(new, old):
        after[index] = self._track_value(new, self._name_element(index))

  def __eq__(self, other):
    return self._storage == getattr(other, "_storage", other)

  def __ne__(self, other):
    return self._storage != getattr(other, "_storage", other)

  def __lt__(self, other):
    return self._storage < getattr(other, "_storage", other)

  def __le__(self, other):
    return self._storage <= getattr(other, "_storage", other)

  def __gt__(self, other):
    return self._storage > getattr(other, "_storage", other)

  def __ge__(self, other):
    return self._storage >= getattr(other, "_storage", other)

  def __hash__(self):
    # Compares like a list, so it is unhashable like one.
    raise TypeError("unhashable type: 'ListWrapper'")

  def __repr__(self):
    return f"ListWrapper({self._storage!r})"


class Mapping(TrackableDataStructure, collections.abc.Mapping):
  """An append-only, trackable mapping from strings to trackables.

  Each value is a checkpoint dependency named by its key. Keys can be added
  but never removed or rebound, so a name always refers to the same object.
  """

  def __init__(self, *args, **kwargs):
    """Builds the mapping; arguments are those of `dict()`."""
    super().__init__()
    self._storage = self._make_storage(*args, **kwargs)
    tracked = {key: self._track_value(value, self._name_element(key))
               for key, value in self._storage.items()}
    self._storage.update(tracked)

  def _make_storage(self, *args, **kwargs):
    return dict(*args, **kwargs)

  def __copy__(self):
    return type(self)(copy.copy(self._storage))

  def __deepcopy__(self, memo):
    return type(self)(copy.deepcopy(self._storage, memo))

  @property
  def _values(self):
    return _values_sorted_by_key(self)

  def _name_element(self, key):
    if not isinstance(key, str):
      raise TypeError(f"Mapping accepts only string keys, but got a key "
                      f"{key!r}: its keys name checkpoint dependencies.")
    return key

  def __setitem__(self, key, value):
    value = self._track_value(value, self._name_element(key))
    current = self._storage.setdefault(key, value)
    if current is not value:
      raise ValueError(
          f"Mappings are an append-only data structure. Tried to overwrite "
          f"the key '{key}' with value {value!r}, but it already contains "
          f"{current!r}.")

  def update(self, *args, **kwargs):
    for key, value in dict(*args, **kwargs).items():
      self[key] = value

  def __getitem__(self, key):
    return self._storage[key]

  def __len__(self):
    return len(self._storage)

  def __iter__(self):
    return iter(self._storage)

  def __repr__(self):
    return f"Mapping({self._storage!r})"


def _values_sorted_by_key(mapping):
  """The mapping's values ordered by key, for deterministic collections."""
  return [value for _, value in sorted(mapping.items(), key=lambda kv: kv[0])]


def _bypass_proxy_for_properties(proxy, name):
  """Whether `name` is a property of the proxy's own class."""
  return isinstance(getattr(type(proxy), name, None), property)


# Dependency name TensorFlow gives a trackable stored under a non-string key
# when a dict is first wrapped (the wrapper is unsaveable anyway).
_NON_STRING_KEY_NAME = "-non_string_key"


# The start of the errors of unsaveable dict wrappers: TensorFlow's phrase.
_UNABLE_TO_SAVE_DICT = ("Unable to save the object {!r} (a dictionary "
                        "wrapper constructed automatically on attribute "
                        "assignment).")


class _DictWrapper(TrackableDataStructure, wrapt.ObjectProxy):
  """A tracked proxy for a user's `dict`; `isinstance(x, dict)` holds.

  String keys name the dependencies on trackable values. Any key, value or
  mutation is accepted, but the wrapper becomes unsaveable (`ValueError`
  on save) when a trackable is stored under a non-string key or when the
  wrapped dict is changed directly (including via methods, such as `pop`,
  which the proxy forwards to it).
  """

  _only_trackables = False

  def __init__(self, wrapped_dict=None):
    if wrapped_dict is None:
      wrapped_dict = {}
    if not isinstance(wrapped_dict, collections.abc.Mapping):
      # E.g. a sequence of pairs, as tf.nest packs mappings.
      wrapped_dict = dict(wrapped_dict)
    wrapt.ObjectProxy.__init__(self, wrapped_dict)
    TrackableDataStructure.__init__(self)
    self._self_non_string_key = False
    self._self_external_modification = False
    tracked = {key: self._track_value(value, key)
               for key, value in self.__wrapped__.items()}
    self.__wrapped__.update(tracked)
    self._update_snapshot()

  def __getattribute__(self, name):
    if name == "__dict__":
      # The proxy's own attribute dict; a dict has none to forward to.
      try:
        return object.__getattribute__(self, "__dict__")
      except (AttributeError, TypeError):
        return {}
    if _bypass_proxy_for_properties(self, name):
      return object.__getattribute__(self, name)
    try:
      return super().__getattribute__(name)
    except TypeError as e:
      # Callers such as hasattr() expect AttributeError.
      raise AttributeError(name) from e

  def __reduce_ex__(self, protocol):
    return (self.__class__, (self.__wrapped__,))

  @property
  def _object_identifier(self):
    # TensorFlow's identifier: SavedModels revive this as a dict wrapper.
    return "trackable_dict_wrapper"

  def copy(self):
    return copy.copy(self)

  def __copy__(self):
    return self._with_flags(_DictWrapper(copy.copy(self.__wrapped__)))

  def __deepcopy__(self, memo):
    return self._with_flags(
        _DictWrapper(copy.deepcopy(self.__wrapped__, memo)))

  def _with_flags(self, copied):
    """Gives `copied` this wrapper's saveability flags; returns it."""
    copied._self_external_modification = self._self_external_modification  # pylint: disable=protected-access
    copied._self_non_string_key = self._self_non_string_key  # pylint: disable=protected-access
    return copied

  @property
  def _values(self):
    return _values_sorted_by_key(self)

  @property
  def _dirty(self):
    return self._self_external_modification or self._self_non_string_key

  def _check_self_external_modification(self):
    """Flags changes made to the wrapped dict without going through us."""
    if self._dirty:
      return
    if self.__wrapped__ != self._self_last_wrapped_dict_snapshot:
      self._self_external_modification = True
      self._self_last_wrapped_dict_snapshot = None

  def _update_snapshot(self):
    """Records the current content as the expected one."""
    if not self._dirty:
      self._self_last_wrapped_dict_snapshot = dict(self.__wrapped__)

  def _trackable_children(self, save_type=_CHECKPOINT, cache=None, **kwargs):
    """Returns the children, or raises ValueError if unsaveable."""
    self._check_self_external_modification()
    if self._self_non_string_key:
      raise ValueError(
          f"{_UNABLE_TO_SAVE_DICT.format(self)} The wrapped dictionary "
          f"contains a non-string key which maps to a trackable object or "
          f"mutable data structure; only string keys can name checkpoint "
          f"dependencies. To keep this dict out of the checkpoint, wrap it "
          f"in NoDependency or a non-trackable object.")
    if self._self_external_modification:
      raise ValueError(
          f"{_UNABLE_TO_SAVE_DICT.format(self)} The wrapped dictionary was "
          f"modified outside the wrapper, so its dependencies are out of "
          f"date. To keep this dict out of the checkpoint, wrap it in "
          f"NoDependency or a non-trackable object.")
    return super()._trackable_children(save_type, cache=cache, **kwargs)

  def _track_value(self, value, name):
    """Tracks under a string key; a trackable under another key poisons."""
    if isinstance(name, str):
      return super()._track_value(value, name)
    opted_out = isinstance(value, _AnyNoDependency)
    value = super()._track_value(value, _NON_STRING_KEY_NAME)
    if isinstance(value, _TrackableBase) and not opted_out:
      self._self_non_string_key = True
    return value

  def __setitem__(self, key, value):
    """Stores any key and value; may make the wrapper unsaveable."""
    self._check_self_external_modification()
    self._maybe_initialize_trackable()
    if isinstance(key, str):
      value = self._track_value(value, key)
    else:
      opted_out = isinstance(value, _AnyNoDependency)
      value = wrap_or_unwrap(value)
      if isinstance(value, _TrackableBase) and not opted_out:
        self._self_non_string_key = True
    self.__wrapped__[key] = value
    self._update_snapshot()

  def __delitem__(self, key):
    # The dependency stays, as in TensorFlow: it is still saved.
    self._check_self_external_modification()
    del self.__wrapped__[key]
    self._update_snapshot()

  def update(self, *args, **kwargs):
    for key, value in dict(*args, **kwargs).items():
      self[key] = value

  def __eq__(self, other):
    return self.__wrapped__ == other

  def __hash__(self):
    raise TypeError("unhashable type: 'DictWrapper'")

  def __repr__(self):
    return f"DictWrapper({self.__wrapped__!r})"


def _namedtuple_fields(value):
  """The `_fields` of a namedtuple, or None for a plain tuple."""
  return getattr(value, "_fields", None) if isinstance(value, tuple) else None


def _rebuild_tuple(original, elements, fields):
  """A tuple of the original's type holding `elements`, or None.

  None means a namedtuple type that cannot be built from its fields.
  """
  if fields is None:
    return type(original)(elements)
  try:
    return type(original)(**dict(zip(fields, elements)))
  except TypeError:
    return None


class _TupleWrapper(TrackableDataStructure, wrapt.ObjectProxy):
  """A tracked proxy for a tuple or namedtuple holding trackables.

  Element `i` is a dependency named `str(i)`; a namedtuple's elements are
  also dependencies named by field (field names first). Elements wrapped in
  `NoDependency` are stored bare and not tracked.
  """

  _only_trackables = False

  def __init__(self, original_wrapped_tuple=()):
    tracked = [not isinstance(element, _AnyNoDependency)
               for element in original_wrapped_tuple]
    elements = [wrap_or_unwrap(element) for element in original_wrapped_tuple]
    fields = _namedtuple_fields(original_wrapped_tuple)
    rebuilt = _rebuild_tuple(original_wrapped_tuple, elements, fields)
    if rebuilt is None:
      # A namedtuple whose __new__ does not take its fields: keep it as it
      # is and refuse to save it.
      wrapt.ObjectProxy.__init__(self, original_wrapped_tuple)
      TrackableDataStructure.__init__(self)
      self._self_tuple_is_constructable = False
      return
    wrapt.ObjectProxy.__init__(self, rebuilt)
    TrackableDataStructure.__init__(self)
    self._self_tuple_is_constructable = True
    names = [str(index) for index in range(len(elements))]
    if fields is not None:
      names = list(fields) + names
      tracked = tracked + tracked
      elements = list(rebuilt) + list(rebuilt)
    for name, keep, element in zip(names, tracked, elements):
      if keep:
        self._track_value(element, name)

  @property
  def _values(self):
    return self

  @property
  def _object_identifier(self):
    # TensorFlow's identifier: SavedModels revive this as a list wrapper.
    return "trackable_tuple_wrapper"

  def _trackable_children(self, save_type=_CHECKPOINT, cache=None, **kwargs):
    """Returns the children, or raises ValueError if unsaveable."""
    if not self._self_tuple_is_constructable:
      raise ValueError(
          f"Unable to save because the namedtuple {self.__wrapped__!r} is "
          f"not constructable from its _fields {self.__wrapped__._fields} "
          f"as keyword arguments (its __new__ is overridden). To keep it "
          f"out of the checkpoint, wrap it in NoDependency or a custom "
          f"object that is not a tuple.")
    return super()._trackable_children(save_type, cache=cache, **kwargs)

  def __getattribute__(self, name):
    if name != "__wrapped__" and hasattr(self.__wrapped__, name):
      # The tuple's own attributes (e.g. namedtuple fields) win.
      return getattr(self.__wrapped__, name)
    if _bypass_proxy_for_properties(self, name):
      return object.__getattribute__(self, name)
    return super().__getattribute__(name)

  @property
  def __dict__(self):
    # Forwarded, so that a missing __dict__ raises AttributeError.
    return self.__wrapped__.__dict__

  def __reduce_ex__(self, protocol):
    return (self.__class__, (self.__wrapped__,))

  def __copy__(self):
    return _TupleWrapper(copy.copy(self.__wrapped__))

  def __deepcopy__(self, memo):
    return _TupleWrapper(copy.deepcopy(self.__wrapped__, memo))

  # A tuple is immutable: in-place operators must return a new tuple rather
  # than change the wrapped one.
  def __iadd__(self, other):
    return self.__wrapped__ + other

  def __imul__(self, times):
    return self.__wrapped__ * times

  def __eq__(self, other):
    return self.__wrapped__ == other

  def __hash__(self):
    return hash(self.__wrapped__)

  def __repr__(self):
    return f"_TupleWrapper({self.__wrapped__!r})"


def set_list_item(list_object, index_string, value):
  """Puts `value` at index `int(index_string)`, growing the list with None."""
  index = int(index_string)
  missing = index + 1 - len(list_object)
  if missing > 0:
    list_object.extend([None] * missing)
  list_object[index] = value


def set_tuple_item(list_object, index_string, value):
  """`set_list_item`, skipping a namedtuple's children named by field."""
  try:
    set_list_item(list_object, index_string, value)
  except ValueError:  # Not an index.
    pass
