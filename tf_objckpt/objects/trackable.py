"""The core of object-based checkpointing: `Trackable`.

A `Trackable` names its dependencies (other trackables) and its own state
(saveables). Checkpoints store that graph of objects, so restoring matches
objects by their paths of local names rather than by global variable names.
When a restore is waiting for a dependency that does not exist yet, tracking
it restores it ("restore-on-create"). A trackable restores through the
position it is handed (`restore_positions`); the walk is the layer above
(`restoring/restore_walk`).

Our `Trackable` subclasses TensorFlow's, so that TensorFlow's containers
(Keras layers, `tf.Module`) track our objects, and TensorFlow's trackables
keep our checkpoint positions in their deferred-dependency queues.
TensorFlow's name for this module is `base`, which re-exports it.
"""

import contextlib
import functools
from typing import Any, NamedTuple

from tensorflow.python.eager import context
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import ops
from tensorflow.python.trackable import base as tf_base

from tf_objckpt.foundation import checkpoint_keys
from tf_objckpt.foundation import module_names
from tf_objckpt.objects import restore_positions

# The checkpoint key of the serialized TrackableObjectGraph: TensorFlow's
# own, so that either library finds the other's object graph.
OBJECT_GRAPH_PROTO_KEY = tf_base.OBJECT_GRAPH_PROTO_KEY
VARIABLE_VALUE_KEY = checkpoint_keys.VARIABLE_VALUE_KEY
# The attribute name of an object's JSON configuration (Keras uses it).
OBJECT_CONFIG_JSON_KEY = "OBJECT_CONFIG_JSON"

# TensorFlow's: a weak named edge, and a checkpointed slice's description.
WeakTrackableReference = tf_base.WeakTrackableReference
ShardInfo = tf_base.ShardInfo


class TrackableReference(NamedTuple):
  """A named edge from a trackable to one of its dependencies."""
  name: str
  ref: Any


@contextlib.contextmanager
def _attribute_set_to_false(obj, name):
  """Sets boolean attribute `name` of `obj` to False for a scope."""
  previous = getattr(obj, name, True)
  setattr(obj, name, False)
  try:
    yield
  finally:
    setattr(obj, name, previous)


def no_automatic_dependency_tracking(method):
  """Decorates a method so attribute assignments in it add no dependencies."""

  @functools.wraps(method)
  def wrapper(self, *args, **kwargs):
    with _attribute_set_to_false(self, "_self_setattr_tracking"):
      return method(self, *args, **kwargs)

  return wrapper


def no_manual_dependency_tracking_scope(obj):
  """A scope in which `obj._track_trackable` records nothing."""
  return _attribute_set_to_false(obj, "_manual_tracking")


def no_automatic_dependency_tracking_scope(obj):
  """A scope in which attribute assignments on `obj` add no dependencies."""
  return _attribute_set_to_false(obj, "_setattr_tracking")


class Trackable(tf_base.Trackable):
  """An object whose state and dependencies can be checkpointed.

  Dependencies are declared explicitly with `_track_trackable` (see
  `tracking.AutoTrackable` for attribute-assignment tracking). Subclasses
  save their own state by overriding `_gather_saveables_for_checkpoint` (or
  TensorFlow's `_serialize_to_tensors`).
  """

  # TensorFlow's base class keeps the bookkeeping (its `_self_*`
  # attributes and the properties reading them); this class changes how
  # dependencies are tracked, looked up and restored.

  def _maybe_initialize_trackable(self):
    """Creates the bookkeeping lazily, so subclasses need not call __init__.

    Checks before calling TensorFlow's initializer, whose decorator costs
    more than the check on every call.
    """
    if not hasattr(self, "_self_unconditional_checkpoint_dependencies"):
      tf_base.Trackable._maybe_initialize_trackable(self)  # pylint: disable=protected-access

  @property
  def _tracking_metadata(self):
    """Extra metadata a subclass may attach to its object graph node."""
    return ""

  def _name_based_attribute_restore(self, coordinator):
    """Restores this object's values from a name-based checkpoint."""
    self._maybe_initialize_trackable()
    super()._name_based_attribute_restore(coordinator)

  def _trackable_children(self, save_type="checkpoint", cache=None, **kwargs):
    """Returns `{local name: dependency}` (TensorFlow's traversal API)."""
    del save_type, cache, kwargs  # Checkpoints and SavedModels agree here.
    self._maybe_initialize_trackable()
    return {name: ref for name, ref in self._checkpoint_dependencies}

  def _lookup_dependency(self, name, cached_dependencies=None):
    """Returns the dependency named `name`, or None."""
    if cached_dependencies is not None:
      return cached_dependencies.get(name)
    self._maybe_initialize_trackable()
    return self._self_unconditional_dependency_names.get(name)

  def _add_variable_with_custom_getter(self,
                                       name,
                                       shape=None,
                                       dtype=dtypes.float32,
                                       initializer=None,
                                       getter=None,
                                       overwrite=False,
                                       **kwargs_for_getter):
    """Creates a variable with `getter` and tracks it as `name`.

    When executing eagerly and a restore is waiting for `name`, the
    checkpointed value becomes the initial value (`initializer` is ignored),
    unless `initializer` itself comes from a newer restore.

    Raises:
      ValueError: If `name` is already a different dependency.
    """
    self._maybe_initialize_trackable()
    with ops.init_scope():
      if context.executing_eagerly():
        restored = self._preload_simple_restoration(name=name)
      else:
        restored = None
    if restored is not None and not (
        isinstance(initializer, tf_base.CheckpointInitialValueCallable) and
        initializer.restore_uid > restored.restore_uid):
      initializer = restored
    variable = getter(name=name,
                      shape=shape,
                      dtype=dtype,
                      initializer=initializer,
                      **kwargs_for_getter)
    if not overwrite or isinstance(variable, tf_base.Trackable):
      return self._track_trackable(variable, name=name, overwrite=overwrite)
    return variable

  def _preload_simple_restoration(self, name):
    """An initializer holding a queued restore of `name`, or None.

    The queued restore stays queued: if the initializer is not used (a
    custom getter may replace it), tracking the variable still restores it.
    None when nothing is queued or the value needs more than an initializer.
    """
    queued = self._deferred_dependencies.get(name, ())
    if not queued or not all(p.is_simple_variable() for p in queued):
      return None
    newest = max(queued, key=lambda position: position.restore_uid)
    if isinstance(newest, restore_positions.RestorePosition):
      return newest.initial_value_callable()
    return tf_base.CheckpointInitialValueCallable(newest)

  def _track_trackable(self, trackable, name, overwrite=False):
    """Declares `trackable` a dependency named `name`; returns it.

    Restores waiting for `name` are applied to `trackable`.

    Raises:
      TypeError: If `trackable` is not a trackable.
      ValueError: If another object is tracked as `name` and not
        `overwrite`.
    """
    self._maybe_initialize_trackable()
    if not isinstance(trackable, tf_base.Trackable):
      raise TypeError(
          "Trackable._track_trackable() can only be used to track objects of "
          f"type Trackable. Got type {type(trackable)}: {trackable!r}, for "
          f"the dependency {name!r}.")
    if not getattr(self, "_manual_tracking", True):
      return trackable
    reference = TrackableReference(name=name, ref=trackable)
    dependencies = self._self_unconditional_checkpoint_dependencies
    current = self._lookup_dependency(name)
    if current is not None and current is not trackable:
      if not overwrite:
        raise ValueError(
            f"Called Trackable._track_trackable() with name={name!r}, but a "
            "Trackable with this name is already declared as a dependency. "
            f"{type(self).__name__} tracks {current!r} as {name!r}, not "
            f"{trackable!r}; names must be unique (pass overwrite=True to "
            "replace it).")
      dependencies[:] = [
          reference if old.name == name else old for old in dependencies
      ]
    by_name = self._self_unconditional_dependency_names
    by_name[name] = trackable
    if current is None:
      # Tracked before restoring, so that a failed restore leaves it
      # tracked consistently.
      dependencies.append(reference)
      self._handle_deferred_dependencies(name, trackable)
    return trackable

  def _restore_from_checkpoint_position(self, position):
    """Restores this object and its dependencies; returns restore ops."""
    return position.restore_descendants()

  def _list_extra_dependencies_for_serialization(self, cache):
    """Dependencies saved only in SavedModels; none by default."""
    del cache
    return {}

  def _list_functions_for_serialization(self, cache):
    """Functions saved only in SavedModels; none by default."""
    del cache
    return {}


module_names.keep_module_name("tf_objckpt.base", TrackableReference, Trackable)
