"""Containers keyed on object identity instead of `__eq__`/`__hash__`.

Variables and tensors overload `==` (it builds an op), so they cannot be
dictionary keys or set members directly. These containers wrap each key in a
small object that compares and hashes by `id()`; the weak variants hold keys
through `weakref`s so that tracking an object does not keep it alive.
TensorFlow's name for this module is `object_identity`, which re-exports it.
"""

import collections.abc
import weakref

from tf_objckpt.foundation import module_names


class _Identity:
  """Wraps an object so that equality and hashing use its identity."""

  __slots__ = ("_wrapped",)

  def __init__(self, wrapped):
    self._wrapped = wrapped

  @property
  def unwrapped(self):
    return self._wrapped

  def __eq__(self, other):
    return isinstance(other, _Identity) and self.unwrapped is other.unwrapped

  def __ne__(self, other):
    return not self.__eq__(other)

  def __hash__(self):
    return id(self._wrapped)

  def __repr__(self):
    return "<%s wrapping %r>" % (type(self).__name__, self._wrapped)


class _WeakIdentity(_Identity):
  """Like `_Identity`, but holds the object through a weak reference.

  The hash is computed once, while the object is alive, so the key stays
  findable (and removable) after the object dies.
  """

  __slots__ = ("_hash",)

  def __init__(self, wrapped):
    super().__init__(weakref.ref(wrapped))
    self._hash = id(wrapped)

  @property
  def unwrapped(self):
    return self._wrapped()

  def __eq__(self, other):
    if not isinstance(other, _Identity):
      return False
    mine = self.unwrapped
    return mine is not None and mine is other.unwrapped

  def __hash__(self):
    return self._hash


class ObjectIdentityDictionary(collections.abc.MutableMapping):
  """A dictionary whose keys are compared by identity."""

  _wrap = _Identity

  def __init__(self):
    self._storage = {}

  def __getitem__(self, key):
    return self._storage[self._wrap(key)]

  def __setitem__(self, key, value):
    self._storage[self._wrap(key)] = value

  def __delitem__(self, key):
    del self._storage[self._wrap(key)]

  def __contains__(self, key):
    return self._wrap(key) in self._storage

  def __len__(self):
    return len(self._storage)

  def __iter__(self):
    for wrapped in list(self._storage):
      yield wrapped.unwrapped

  def __repr__(self):
    return "%s(%r)" % (type(self).__name__, self._storage)


class ObjectIdentityWeakKeyDictionary(ObjectIdentityDictionary):
  """An identity dictionary that does not keep its keys alive.

  Entries whose key has been garbage collected are skipped when iterating.
  """

  _wrap = _WeakIdentity

  def __iter__(self):
    for wrapped in list(self._storage):
      key = wrapped.unwrapped
      if key is not None:
        yield key

  def __len__(self):
    return sum(1 for _ in self)


class ObjectIdentitySet(collections.abc.MutableSet):
  """A set whose members are compared by identity."""

  _wrap = _Identity

  def __init__(self, *args):
    self._storage = set(self._wrap(obj) for obj in list(*args))

  @staticmethod
  def _from_storage(storage):
    result = ObjectIdentitySet()
    result._storage = storage
    return result

  def __contains__(self, key):
    return self._wrap(key) in self._storage

  def add(self, key):
    self._storage.add(self._wrap(key))

  def discard(self, key):
    self._storage.discard(self._wrap(key))

  def update(self, items):
    self._storage.update(self._wrap(item) for item in items)

  def intersection(self, items):
    return self._from_storage(
        self._storage.intersection(self._wrap(item) for item in items))

  def difference(self, items):
    return self._from_storage(
        self._storage.difference(self._wrap(item) for item in items))

  def clear(self):
    self._storage.clear()

  def __len__(self):
    return len(self._storage)

  def __iter__(self):
    for wrapped in list(self._storage):
      obj = wrapped.unwrapped
      if obj is not None:
        yield obj


class ObjectIdentityWeakSet(ObjectIdentitySet):
  """An identity set that does not keep its members alive."""

  _wrap = _WeakIdentity

  def __len__(self):
    return sum(1 for _ in self)


module_names.keep_module_name("tf_objckpt.object_identity",
                              ObjectIdentityDictionary,
                              ObjectIdentityWeakKeyDictionary,
                              ObjectIdentitySet, ObjectIdentityWeakSet)
