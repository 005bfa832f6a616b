"""The trackable mappings: append-only `Mapping` and `_DictWrapper`.

Each value is a checkpoint dependency named by its key. `_DictWrapper` is
what assigning a plain `dict` or `OrderedDict` to a trackable's attribute
gives (`wrapping.wrap_or_unwrap`); it registers itself as their wrapper.
"""

import collections
import collections.abc
import copy

import wrapt
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.trackable import data_structures as tf_data_structures

from tf_objckpt.foundation import module_names
from tf_objckpt.objects import structure_base
from tf_objckpt.objects import wrapping


class Mapping(structure_base.TrackableDataStructure, collections.abc.Mapping):
  """An append-only, trackable mapping from strings to trackables.

  Each value is a checkpoint dependency named by its key. Keys can be added
  but never removed or rebound, so a name always refers to the same object.
  """

  def __init__(self, *args, **kwargs):
    """Builds the mapping; arguments are those of `dict()`."""
    super().__init__()
    self._storage = self._make_storage(*args, **kwargs)
    tracked = {
        key: self._track_value(value, self._name_element(key))
        for key, value in self._storage.items()
    }
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


# Dependency name TensorFlow gives a trackable stored under a non-string key
# when a dict is first wrapped (the wrapper is unsaveable anyway).
_NON_STRING_KEY_NAME = "-non_string_key"

# The start of the errors of unsaveable dict wrappers: TensorFlow's phrase.
_UNABLE_TO_SAVE_DICT = ("Unable to save the object {!r} (a dictionary "
                        "wrapper constructed automatically on attribute "
                        "assignment).")


@wrapping.wrapper_for(dict, collections.OrderedDict)
class _DictWrapper(structure_base.TrackableDataStructure, wrapt.ObjectProxy):
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
    structure_base.TrackableDataStructure.__init__(self)
    self._self_non_string_key = False
    self._self_external_modification = False
    tracked = {
        key: self._track_value(value, key)
        for key, value in self.__wrapped__.items()
    }
    self.__wrapped__.update(tracked)
    self._update_snapshot()

  def __getattribute__(self, name):
    if name == "__dict__":
      # The proxy's own attribute dict; a dict has none to forward to.
      try:
        return object.__getattribute__(self, "__dict__")
      except (AttributeError, TypeError):
        return {}
    if structure_base.is_class_property(self, name):
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
    return self._with_flags(_DictWrapper(copy.deepcopy(self.__wrapped__, memo)))

  def _with_flags(self, copied):
    """Gives `copied` this wrapper's saveability flags; returns it."""
    copied._self_external_modification = self._self_external_modification
    copied._self_non_string_key = self._self_non_string_key
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

  def _trackable_children(self, save_type="checkpoint", cache=None, **kwargs):
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
    opted_out = isinstance(value, tf_data_structures.NoDependency)
    value = super()._track_value(value, _NON_STRING_KEY_NAME)
    if isinstance(value, tf_base.Trackable) and not opted_out:
      self._self_non_string_key = True
    return value

  def __setitem__(self, key, value):
    """Stores any key and value; may make the wrapper unsaveable."""
    self._check_self_external_modification()
    self._maybe_initialize_trackable()
    if isinstance(key, str):
      value = self._track_value(value, key)
    else:
      opted_out = isinstance(value, tf_data_structures.NoDependency)
      value = wrapping.wrap_or_unwrap(value)
      if isinstance(value, tf_base.Trackable) and not opted_out:
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


module_names.keep_module_name("tf_objckpt.data_structures", _DictWrapper,
                              Mapping)
