"""`_TupleWrapper`: the tracked proxy of a tuple or namedtuple.

Assigning a tuple that holds trackables (or containers to wrap) to a
trackable's attribute gives one (`wrapping.wrap_or_unwrap`); it registers
itself as the wrapper of `tuple`.
"""

import copy

import wrapt
from tensorflow.python.trackable import data_structures as tf_data_structures

from tf_objckpt.foundation import module_names
from tf_objckpt.objects import structure_base
from tf_objckpt.objects import wrapping


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


@wrapping.wrapper_for(tuple)
class _TupleWrapper(structure_base.TrackableDataStructure, wrapt.ObjectProxy):
  """A tracked proxy for a tuple or namedtuple holding trackables.

  Element `i` is a dependency named `str(i)`; a namedtuple's elements are
  also dependencies named by field (field names first). Elements wrapped in
  `NoDependency` are stored bare and not tracked.
  """

  _only_trackables = False

  def __init__(self, original_wrapped_tuple=()):
    tracked = [
        not isinstance(element, tf_data_structures.NoDependency)
        for element in original_wrapped_tuple
    ]
    elements = [
        wrapping.wrap_or_unwrap(element) for element in original_wrapped_tuple
    ]
    fields = _namedtuple_fields(original_wrapped_tuple)
    rebuilt = _rebuild_tuple(original_wrapped_tuple, elements, fields)
    if rebuilt is None:
      # A namedtuple whose __new__ does not take its fields: keep it as it
      # is and refuse to save it.
      wrapt.ObjectProxy.__init__(self, original_wrapped_tuple)
      structure_base.TrackableDataStructure.__init__(self)
      self._self_tuple_is_constructable = False
      return
    wrapt.ObjectProxy.__init__(self, rebuilt)
    structure_base.TrackableDataStructure.__init__(self)
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

  def _trackable_children(self, save_type="checkpoint", cache=None, **kwargs):
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
    if structure_base.is_class_property(self, name):
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


module_names.keep_module_name("tf_objckpt.data_structures", _TupleWrapper)
