"""How a value assigned to a trackable becomes the value it stores.

`wrap_or_unwrap` replaces a plain `list`, `dict` or `tuple` by its tracked
wrapper and a `NoDependency` by its payload; `sticky_attribute_assignment`
does that and adds the dependency, as attribute assignment does.

The wrappers and `wrap_or_unwrap` need each other: a wrapper wraps its
nested containers through `wrap_or_unwrap`, which builds wrappers. So that
this module need not import the wrappers, each wrapper class registers the
container types it wraps with the `@wrapper_for(...)` class decorator
(`lists`, `dicts` and `tuples` do). `auto_trackable`, where attribute
assignment tracks values, imports all of them, and so does
`data_structures`; a container whose wrapper is not registered raises
`KeyError`.
"""

import collections

from tensorflow.python.trackable import base as tf_base
from tensorflow.python.trackable import data_structures as tf_data_structures

from tf_objckpt.foundation import module_names
from tf_objckpt.foundation import tensorflow_internals

# The types wrapped exactly (not their subclasses, such as
# `collections.Counter`, which carry logic a wrapper would break).
_PLAIN_CONTAINERS = (list, dict, collections.OrderedDict)

# The wrapper class of each of `_PLAIN_CONTAINERS` and of `tuple`, as
# registered by `wrapper_for`.
_WRAPPERS: dict[type, type] = {}


class NoDependency(tf_data_structures.NoDependency):
  """Marks a value to be stored on a trackable without a dependency.

  `obj.attr = NoDependency(value)` stores the bare `value` (a list stays a
  plain list) and adds no checkpoint dependency, which is how a user keeps
  an object or container out of the checkpoint. TensorFlow's containers
  honour it as their own, and ours honour TensorFlow's: this library checks
  for `tf_data_structures.NoDependency`, which ours derives from.
  """

  __slots__ = ()


def wrapper_for(*container_types):
  """Class decorator: `wrap_or_unwrap` wraps `container_types` in the class.

  Args:
    *container_types: Exact types from `list`, `dict`, `OrderedDict`, or
      `tuple` (which covers namedtuples).

  Returns:
    A decorator that registers the class and returns it unchanged.
  """

  def register(wrapper_class):
    for container_type in container_types:
      _WRAPPERS[container_type] = wrapper_class
    return wrapper_class

  return register


def _is_plain_container(value):
  """True for exactly `list`, `dict` and `OrderedDict` (not subclasses)."""
  return type(value) in _PLAIN_CONTAINERS


def _tuple_needs_wrapper(values):
  """Whether a tuple holds anything that tracking would have to change."""
  for element in values:
    if isinstance(element,
                  (tf_data_structures.NoDependency, tf_base.Trackable)):
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
  if isinstance(value, tf_data_structures.NoDependency):
    return value.value
  if isinstance(value, tf_base.Trackable):
    return value
  if _is_plain_container(value):
    return _WRAPPERS[type(value)](value)
  if isinstance(value, tuple) and _tuple_needs_wrapper(value):
    return _WRAPPERS[tuple](value)
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
  wants_dependency = not isinstance(value, tf_data_structures.NoDependency)
  value = wrap_or_unwrap(value)
  if wants_dependency and isinstance(value, tf_base.Trackable):
    tensorflow_internals.track(trackable, value, name=name, overwrite=True)
  return value


module_names.keep_module_name("tf_objckpt.data_structures", NoDependency,
                              sticky_attribute_assignment, wrap_or_unwrap)
