"""TensorFlow's private names that tf_objckpt reaches for, in one place.

TensorFlow's trackables, variables and checkpoints talk through names that
TensorFlow keeps private: a trackable's `_update_uid` (the restore that
last assigned it), its `_deferred_dependencies` (restores waiting for a
dependency not tracked yet), `_serialize_to_tensors`, ... Our classes
implement them where TensorFlow's code calls them on ours, and our restores
call them on TensorFlow's objects. Each name is listed below, by what it
belongs to; `tests/tools/private_names_test.py` holds every module to the
list: a module reaches no private name but these and its own, through no
`getattr` of a private name of ours, and at most 30 lines are marked
`protected-access`.

The trackable protocol and the variables' internals that several modules
use are reached only through the functions below; the other names, each
used in one place, are reached there, on lines marked `protected-access`.
"""

# pylint: disable=protected-access
# This module is where the names of `TRACKABLE_PROTOCOL` and
# `VARIABLE_INTERNALS` are reached: each access below is to one of them.

# TensorFlow's trackable protocol: methods and attributes of
# `tensorflow.python.trackable.base.Trackable` (and its Keras and tf_keras
# subclasses) that restores, saves and load statuses use.
TRACKABLE_PROTOCOL = frozenset({
    "_add_variable_with_custom_getter",
    "_checkpoint_dependencies",
    "_create_or_restore_slot_variable",
    "_deferred_dependencies",
    "_gather_saveables_for_checkpoint",
    "_handle_deferred_dependencies",
    "_lookup_dependency",
    "_manual_tracking",
    "_maybe_initialize_trackable",
    "_name_based_attribute_restore",
    "_name_based_restores",
    "_preload_simple_restoration",
    "_restore_from_checkpoint_position",
    "_restore_from_tensors",
    "_self_setattr_tracking",
    "_self_unconditional_checkpoint_dependencies",
    "_self_unconditional_dependency_names",
    "_serialize_to_tensors",
    "_setattr_tracking",
    "_track_trackable",
    "_trackable_children",
    "_update_uid",
})

# What TensorFlow's variables, their saveables and Keras' variables and
# optimizers keep privately, and our saveables mirror.
VARIABLE_INTERNALS = frozenset({
    "_deferred_initialize",  # Keras 3: a variable initialized after a trace.
    "_graph_element",
    "_in_graph_mode",
    "_initial_value",
    "_initializer",
    "_initializer_op",
    "_learning_rate",  # A Keras 3 optimizer's.
    "_local_names",  # TensorFlow's `TrackableSaveable`'s.
    "_save_slice_info",
    "_shared_name",
    "_trackable",  # TensorFlow's `TrackableSaveable`'s object.
    "_trainable_variables",  # A Keras 3 optimizer's.
    "_value",  # A Keras 3 variable's `tf.Variable`.
    "_var_shape",  # TensorFlow's `ResourceVariableSaveable`'s.
})

# Names of TensorFlow's data structures' flags, which our containers share
# with theirs.
DATA_STRUCTURE_FLAGS = frozenset({
    "_external_modification",
    "_is_layer",
    "_non_append_mutation",
    "_non_append_operation",
    "_self_external_modification",
    "_self_non_string_key",
    "_storage",  # A `ListWrapper`'s list.
    "_use_resource_variables",
})

# Private names of our classes that TensorFlow's own code or tests (and
# programs written against TensorFlow's classes) reach for: they keep
# TensorFlow's names.
REACHED_BY_TENSORFLOW = frozenset({
    "_build_internal",  # A `SaverBuilder`'s: TensorFlow's `Saver` calls it.
    "_checkpoint",  # A load status's coordinator.
    "_feed_dict",  # A load status's feeds (graph mode).
    "_graph_view",  # A `TrackableSaver`'s.
    "_saver",  # A `Checkpoint`'s `TrackableSaver`.
    "_write",  # `Checkpoint._write`: TensorFlow's manager writes with it.
})

# TensorFlow's other internals, each reached in one module.
OTHER_INTERNALS = frozenset({
    "_all_saveable_objects",  # variables: the v1 `Saver`'s default list.
    "_get_default_initializer",  # A variable store's.
    "_get_default_variable_store",  # variable_scope's.
    "_get_save_slice_info",  # A partitioned variable's slices.
    "_get_variable_list",  # A `PartitionedVariable`'s.
    "_GetVariableToDataTypeMap",  # A `CheckpointReader`'s.
    "_handle",  # The eager context's.
    "_is_function",  # A graph's.
    "_message",  # An `OpError`'s.
    "_proto_function_registry",  # ops: the collections' converters.
    "_registry",  # A registry's.
    "_restore_checkpoint",  # `SessionManager`'s.
    "_save",  # The op `SaveSlices` writes V1 checkpoints with (`writes`).
    "_vars",  # A variable store's.
})

PRIVATE_NAMES = (TRACKABLE_PROTOCOL | VARIABLE_INTERNALS |
                 DATA_STRUCTURE_FLAGS | REACHED_BY_TENSORFLOW | OTHER_INTERNALS)

# ----------------------------------------------------------------------------
# The trackable protocol.
# ----------------------------------------------------------------------------


def initialize(trackable):
  """Makes `trackable`'s bookkeeping, if it has none yet (TensorFlow's)."""
  trackable._maybe_initialize_trackable()


def children(trackable, *args, **kwargs):
  """`{local name: dependency}` of `trackable` (`_trackable_children`)."""
  return trackable._trackable_children(*args, **kwargs)


def lookup_dependency(trackable, name, cached_dependencies=None):
  """The dependency `trackable` tracks as `name`, or None."""
  if cached_dependencies is None:
    return trackable._lookup_dependency(name)
  return trackable._lookup_dependency(name, cached_dependencies)


def deferred_dependencies(trackable):
  """`{local name: [positions]}`: restores waiting in `trackable`."""
  return trackable._deferred_dependencies


def track(trackable, dependency, name, overwrite=False):
  """Has `trackable` track `dependency` as `name`; returns `dependency`."""
  return trackable._track_trackable(dependency, name=name, overwrite=overwrite)


def add_variable_with_custom_getter(trackable, **kwargs):
  """Has `trackable` create (or restore) and track a variable."""
  return trackable._add_variable_with_custom_getter(**kwargs)


def last_restore(trackable):
  """The uid of the restore that last assigned `trackable` (made trackable
  first if it is not yet)."""
  try:
    return trackable._update_uid
  except AttributeError:
    trackable._maybe_initialize_trackable()
    return trackable._update_uid


def last_restore_or(obj, default):
  """`last_restore` of `obj`, or `default` if it has no bookkeeping."""
  return getattr(obj, "_update_uid", default)


def mark_restored(trackable, restore_uid):
  """Records that restore `restore_uid` assigns `trackable`, unless it or a
  later restore did already.

  Returns:
    True if the restore is to assign `trackable` now.
  """
  if restore_uid > last_restore(trackable):
    trackable._update_uid = restore_uid
    return True
  return False


def forget_restore(trackable, restore_uid):
  """Lets restore `restore_uid` assign `trackable` again, if it assigned it."""
  if trackable._update_uid == restore_uid:
    trackable._update_uid = restore_uid - 1


def restore_by_names(trackable, coordinator):
  """Queues a name-based restore in `trackable` and restores it now."""
  trackable._name_based_restores.add(coordinator)
  trackable._name_based_attribute_restore(coordinator)


def queue_restore_by_names(trackable, coordinator):
  """Queues a name-based restore in `trackable`, for what it tracks later."""
  trackable._name_based_restores.add(coordinator)


def serialize_to_tensors_function(trackable):
  """`trackable`'s `_serialize_to_tensors`: `() -> {name: tensor}`."""
  return trackable._serialize_to_tensors


def restore_from_tensors_function(trackable):
  """`trackable`'s `_restore_from_tensors`: `({name: tensor}) -> op`."""
  return trackable._restore_from_tensors


def gather_saveables(trackable):
  """`trackable`'s `_gather_saveables_for_checkpoint()` (its factories)."""
  return trackable._gather_saveables_for_checkpoint()


def create_or_restore_slot_variable(optimizer, **kwargs):
  """Has `optimizer` create (or find) a slot variable for a restore."""
  return optimizer._create_or_restore_slot_variable(**kwargs)


def overrides_none(cls, base, names):
  """Whether class `cls` keeps every method of `base` named in `names`.

  `names` are of `TRACKABLE_PROTOCOL`: a subclass that overrides none of
  them saves (or lists its children) the way `base` does.
  """
  return issubclass(cls, base) and all(
      getattr(cls, name) is getattr(base, name) for name in names)


# ----------------------------------------------------------------------------
# Variables' internals.
# ----------------------------------------------------------------------------


def save_slice_info(variable):
  """The `SaveSliceInfo` of a slice of a partitioned variable, or None."""
  return getattr(variable, "_save_slice_info", None)


def graph_element(variable):
  """The read a graph-mode variable made when created, or None."""
  return getattr(variable, "_graph_element", None)


def in_graph_mode(variable, default=False):
  """Whether `variable` was created while building a graph (`default` if
  it does not say)."""
  return getattr(variable, "_in_graph_mode", default)


def shared_name(variable):
  """The resource name of a variable (graph mode)."""
  return variable._shared_name


def set_initializer(variable, initializer):
  """Makes `initializer` what a Keras 3 variable is initialized by."""
  variable._initializer = initializer


def keras3_value(variable):
  """The `tf.Variable` a Keras 3 variable wraps (None: not initialized)."""
  return getattr(variable, "_value", None)


def trainable_variables(optimizer):
  """The variables a Keras 3 optimizer was built on, in its order."""
  return optimizer._trainable_variables


def delegate_of(trackable):
  """The trackable a `DelegatingTrackableMixin` forwards its methods to."""
  return trackable._trackable
