"""`TrackableDataStructure`: the common base of the trackable containers.

It tracks each value a container is given (through
`wrapping.sticky_attribute_assignment`, so nested containers are wrapped
too) and exposes the Keras-style variable collections of the contents
(`trainable_weights`, `variables`, `layers`, ...).
"""

from tensorflow.python.trackable import base as tf_base

from tf_objckpt.foundation import module_names
from tf_objckpt.objects import trackable
from tf_objckpt.objects import wrapping


class _UntrackableError(ValueError):
  """A strict container was given a value that is not trackable."""

  def __init__(self, value):  # pylint: disable=super-init-not-called
    self._value = value

  def __str__(self):
    return (f"Only trackable objects (such as Layers or Optimizers) may be "
            f"stored in a List object. Got {self._value!r}, which does not "
            f"inherit from Trackable (List and Mapping hold only trackables: "
            f"variables, layers, optimizers, ...).")


class TrackableDataStructure(trackable.Trackable):
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
    value = wrapping.sticky_attribute_assignment(self, name, value)
    if isinstance(value, variables.Variable):
      self._self_extra_variables.append(value)
    if not isinstance(value, tf_base.Trackable):
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
    return [
        value for value in self._values
        if _is_layer(value) or _has_weights(value)
    ]

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
      if isinstance(value, tf_base.Trackable) and hasattr(value, attribute):
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
    return [
        loss for layer in self.layers for loss in getattr(layer, "losses", [])
    ]

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
          hasattr(cls, "non_trainable_weights") and not isinstance(value, type))


def is_class_property(proxy, name):
  """Whether `name` is a property of the proxy's own class.

  The dict and tuple wrappers are `wrapt.ObjectProxy`s, which would look
  such a name up on the wrapped object instead.
  """
  return isinstance(getattr(type(proxy), name, None), property)


module_names.keep_module_name("tf_objckpt.data_structures",
                              TrackableDataStructure)
