"""The trackable lists: append-only `List` and `ListWrapper`, its mutable kin.

Element `i` is a checkpoint dependency named `str(i)`. `ListWrapper` is
what assigning a plain `list` to a trackable's attribute gives
(`wrapping.wrap_or_unwrap`); it registers itself as the wrapper of `list`.
`set_list_item` and `set_tuple_item` put a child back at its index.
"""

import collections.abc
import copy
import sys

from tensorflow.python.trackable import base as tf_base

from tf_objckpt.foundation import module_names
from tf_objckpt.objects import structure_base
from tf_objckpt.objects import wrapping


def _unwrapped(value):
  """The list a list wrapper (ours or TensorFlow's) holds, or `value`."""
  return getattr(value, "_storage", value)


class List(structure_base.TrackableDataStructure, collections.abc.Sequence):
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
    return self._storage + _unwrapped(other)

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
  if any(isinstance(value, tf_base.Trackable) for value in (now, before)):
    return True
  try:
    return bool(now != before)
  except Exception:  # pylint: disable=broad-except
    return True


# The start of the errors of unsaveable list wrappers: TensorFlow's phrase.
_UNABLE_TO_SAVE_LIST = ("Unable to save the object {!r} (a list wrapper "
                        "constructed to track trackable TensorFlow objects).")


@wrapping.wrapper_for(list)
class ListWrapper(  # type: ignore[misc,metaclass]  # Valid at run time.
    List, collections.abc.MutableSequence, list):
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
    other._non_append_mutation = self._non_append_mutation
    other._non_append_operation = self._non_append_operation
    other._external_modification = self._external_modification

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
        isinstance(element, tf_base.Trackable) for element in self._storage)

  def _trackable_children(self, save_type="checkpoint", cache=None, **kwargs):
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
              isinstance(obj, tf_base.Trackable))
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
      if isinstance(self._storage[key], tf_base.Trackable):
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
      if isinstance(old, tf_base.Trackable):
        self._flag_non_append("__setitem__ of a slice")
      if new is not None and _replaced(new, old):
        after[index] = self._track_value(new, self._name_element(index))

  def __eq__(self, other):
    return self._storage == _unwrapped(other)

  def __ne__(self, other):
    return self._storage != _unwrapped(other)

  def __lt__(self, other):
    return self._storage < _unwrapped(other)

  def __le__(self, other):
    return self._storage <= _unwrapped(other)

  def __gt__(self, other):
    return self._storage > _unwrapped(other)

  def __ge__(self, other):
    return self._storage >= _unwrapped(other)

  def __hash__(self):
    # Compares like a list, so it is unhashable like one.
    raise TypeError("unhashable type: 'ListWrapper'")

  def __repr__(self):
    return f"ListWrapper({self._storage!r})"


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


module_names.keep_module_name("tf_objckpt.data_structures", List, ListWrapper,
                              set_list_item, set_tuple_item)
