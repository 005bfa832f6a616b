"""Restoring name-based (v1 `Saver`) checkpoints through the object-based API.

A checkpoint without an object graph keys values by global variable names.
`Checkpoint.restore` matches them to the objects' variables by those names:
eagerly at once (every value checked before any is assigned) and again for
each object tracked later; when graph building, through a v1 `Saver` when the
status's restore ops run.

Names are matched by `name_matching`: a variable's own name first; a Keras 3
variable, named by its `path`, also without the model's name; then the
`assignment_map` of `CheckpointOptions`, if any. A Keras 3 optimizer's
slots and `iterations` take the v1 optimizer's values (`v1_optimizer_state`).

The first such restore of a process logs, at INFO, that `tf-objckpt
convert` rewrites the checkpoint as an object-based one (where TensorFlow
logs that this way of restoring is deprecated).
"""

import threading

from tensorflow.python.eager import context
from tensorflow.python.framework import ops
from tensorflow.python.ops import variables
from tensorflow.python.platform import tf_logging as logging

from tf_objckpt.engine import read_plan
from tf_objckpt.engine import checkpoint_opening
from tf_objckpt.engine import reads
from tf_objckpt.foundation import identity_containers as object_identity
from tf_objckpt.foundation import tensorflow_internals
from tf_objckpt.restoring import initial_values
from tf_objckpt.restoring import name_matching
from tf_objckpt.restoring import restore_plan
from tf_objckpt.restoring import v1_optimizer_state
from tf_objckpt.saveables import named_saveables
from tf_objckpt.saveables import trackable_saveables
from tf_objckpt.saveables import v1_optimizer_saveables


class _ConversionHint:
  """Says once per process how to make a name-based checkpoint object-based."""

  def __init__(self):
    self._lock = threading.Lock()
    self.logged = False

  def log_once(self, save_path):
    with self._lock:
      if self.logged:
        return
      self.logged = True
    logging.info(
        "Restoring %r by variable names: it is a name-based checkpoint. "
        "`tf-objckpt convert` rewrites it as an object-based checkpoint, "
        "restored by object.", save_path)


conversion_hint = _ConversionHint()


class NameBasedRestoreCoordinator:
  """The state of restoring a name-based (v1 `Saver`) checkpoint."""

  def __init__(self,
               save_path,
               checkpoint_keys,
               objects_below,
               values=None,
               assignment_map=None,
               object_scopes=None):
    """Restores `save_path`.

    Args:
      save_path: The checkpoint's path.
      checkpoint_keys: The keys of its values.
      objects_below: Lists the objects a trackable depends on, directly or
        not (the object graph's walk, which is a layer above this one).
      values: Its `reads.CheckpointValues` (eager only).
      assignment_map: Optional, see `name_matching.NameMatcher`.
      object_scopes: Optional; gives `{trackable: checkpoint scope}` of the
        objects an object map places in a scope ("bert/encoder/"), their
        variables matched there only (`NameMatcher.match_in_scope`); called
        again for an object tracked after the restore.
    """
    self.save_path = save_path
    self._objects_below = objects_below
    self._values = values
    self._checkpoint_keys = frozenset(checkpoint_keys)
    self._matcher = name_matching.NameMatcher(self._checkpoint_keys,
                                              assignment_map)
    self._find_scopes = object_scopes
    self._object_scopes = (object_scopes() if object_scopes is not None else
                           object_identity.ObjectIdentityDictionary())
    # Object -> attribute names that found no value, for assertions.
    self.unused_attributes = object_identity.ObjectIdentityWeakKeyDictionary()
    self.restore_uid = ops.uid()
    # Trackable -> its saveables, checked by `check` before any restore.
    self._checked = object_identity.ObjectIdentityDictionary()
    self.optimizers = v1_optimizer_state.Keras3Optimizers(
        self._checkpoint_keys,
        lambda name: self._match(name, strip_model_name=True), self.values)

  def values(self):
    """The checkpoint's dtypes and shapes (a `CheckpointValues`)."""
    if self._values is not None:
      return self._values
    return reads.CheckpointValues(
        self.save_path, checkpoint_opening.open_reader(self.save_path))

  def globally_named_object_attributes(self, trackable, record_unused=True):
    """Yields saveables named by global (variable) names for `trackable`.

    Attributes with no global name are recorded as unused (unless their
    restore is optional, or `record_unused` is False), so assertions fail
    for them. Names are matched to checkpoint keys by `name_matching`.
    """
    self.optimizers.note(trackable)
    scope = self._scope_of(trackable)
    keras_variable = _keras3_variable_value(trackable)
    if keras_variable is not None:
      source = self._keras3_source(trackable, scope)
      if source:
        for saveable in named_saveables.saveable_objects_for_op(
            keras_variable, source.key):
          yield (saveable if source.scale is None else
                 v1_optimizer_saveables.ScaledSaveable(saveable, source))
        return
      count = self.optimizers.step_count(trackable)
      if count is not None:
        yield v1_optimizer_saveables.IterationsSaveable(keras_variable, count,
                                                        self.values().dtypes)
        return
    factories = trackable_saveables.saveable_objects_from_trackable(
        trackable, tf1_saver=True)
    for attribute, factory in factories.items():
      if callable(factory):
        try:
          saveable = factory()
        except TypeError:
          if record_unused and not getattr(factory(""), "optional_restore",
                                           False):
            self._record_unused(trackable, attribute)
          continue
      else:
        saveable = factory
      named = named_saveables.op_list_to_dict([saveable],
                                              convert_variable_to_tensor=False)
      for name, op in named.items():
        yield from self._saveables_named(name,
                                         op,
                                         strip_model_name=False,
                                         scope=scope)

  def _scope_of(self, trackable):
    """The object map's checkpoint scope of `trackable`, or None.

    An object tracked after the restore is looked for again below the
    mapped objects.
    """
    if self._find_scopes is None:
      return None
    if trackable not in self._object_scopes:
      self._object_scopes = self._find_scopes()
    return self._object_scopes.get(trackable)

  def _saveables_named(self, name, op, strip_model_name, scope=None):
    """Saveables of `op`, keyed by the checkpoint key `name` matches."""
    key = self._match(name, strip_model_name, scope) or name
    yield from named_saveables.saveable_objects_for_op(op, key)

  def _keras3_source(self, variable, scope=None):
    """A Keras 3 variable's `v1_optimizer_state.Source`: by path or v1 slot.

    None if it has none. `scope`: the object map's, if any.
    """
    key = self._match(variable.path, strip_model_name=True, scope=scope)
    if key:
      return v1_optimizer_state.Source(key)
    return self.optimizers.slot_source(variable)

  def _match(self, name, strip_model_name, scope=None):
    """The checkpoint key of `name` (in the object map's `scope`), or None."""
    if scope is not None:
      found = self._matcher.match_in_scope(name, scope)
    else:
      found = self._matcher.match(name, strip_model_name)
    return None if found is None else found.checkpoint_key

  def check(self, trackables):
    """Raises unless the values the trackables find by name fit them.

    Values missing from the checkpoint are not errors: they are recorded as
    unused, for the assertions. One plan is checked for all the
    trackables; each one's part is kept for its `eager_restore`, so that
    its saveables are made once and the plan is not checked again.
    """
    for trackable in trackables:  # Before their slots are matched.
      self.optimizers.note(trackable)
    plans = [
        restore_plan.plan_of(self._found_saveables(trackable))
        for trackable in trackables
    ]
    self._check(
        read_plan.ReadPlan(
            destination for plan in plans for destination in plan.destinations))
    for trackable, plan in zip(trackables, plans):
      self._checked[trackable] = plan

  def mark_restored(self, trackable):
    """Records that this restore assigns `trackable` now.

    Returns:
      False if this restore or a later one assigned it already.
    """
    return tensorflow_internals.mark_restored(trackable, self.restore_uid)

  def forget_checked(self):
    """Drops the plans `check` kept (they hold the variables)."""
    self._checked.clear()

  def eager_restore(self, trackable):
    """Restores `trackable`'s attributes immediately (eager mode only).

    Called by `Trackable._name_based_attribute_restore`, also for objects
    tracked while a function (a Keras 3 build) is traced: the values are
    assigned outside it. Everything is checked before anything is assigned.
    """
    with ops.init_scope():
      assert context.executing_eagerly()
      if initial_values.awaits_initialization(trackable):
        self._restore_on_initialization(trackable)
        return
      tracked_later = trackable not in self._checked
      self._restore_saveables(trackable)
      if tracked_later and _keras3_variable_value(trackable) is None:
        self._restore_keras3_variables_below(trackable)

  def _restore_keras3_variables_below(self, trackable):
    """Restores the objects below `trackable`, all or none, for Keras 3.

    A Keras 3 `Sequential` built after `restore()` tracks its (built)
    layers only then, so their variables were never offered a value.
    Objects without Keras 3 variables below them are left as TensorFlow
    leaves them.
    """
    below = [
        obj for obj in self._objects_below(trackable)
        if tensorflow_internals.last_restore(obj) < self.restore_uid
    ]
    if not any(_keras3_variable_value(obj) is not None for obj in below):
      return
    self.check(below)
    try:
      for obj in below:
        tensorflow_internals.queue_restore_by_names(obj, self)
        self._restore_saveables(obj)
        self.mark_restored(obj)
    finally:
      self.forget_checked()

  def _restore_saveables(self, trackable):
    """Restores `trackable`'s part of the checked plan through the engine."""
    plan = self._checked.pop(trackable, None)
    if plan is None:  # Tracked after `restore()`: check it now.
      plan = restore_plan.plan_of(self._found_saveables(trackable))
      self._check(plan)
    read_plan.execute_eagerly(plan, self.values())

  def _restore_on_initialization(self, variable):
    """Makes a Keras 3 variable of a symbolic build start with its value.

    As for object-based restores (`CheckpointPosition`): Keras
    initializes the variable once its trace ends, and builds again eagerly
    (restoring again, by name) if the trace fails.
    """
    source = self._keras3_source(variable, self._scope_of(variable))
    if source is None:
      self._record_unused(variable, variable.path)
      return
    key = source.key
    self._check(restore_plan.plan_of_initial_value(key, variable.dtype,
                                                   variable.shape),
                dtype_error=ValueError)

    def read_value(shape=None, dtype=None):
      del shape, dtype  # Checked above.
      with ops.device("/cpu:0"):
        value = reads.restore_v2(self.save_path, [key], [""],
                                 [self._values.dtypes[key]])[0]
      return value if source.scale is None else value * source.scale

    tensorflow_internals.set_initializer(variable, read_value)

  def _found_saveables(self, trackable):
    """`trackable`'s saveables whose values the checkpoint holds.

    The others are recorded as unused.
    """
    found = []
    for saveable in self.globally_named_object_attributes(trackable):
      if self._found(saveable):
        found.append(saveable)
      elif self.optimizers.is_learning_rate(trackable):
        continue
      elif _keras3_variable_value(trackable) is not None:
        reason = self.optimizers.missing_reason(trackable)
        self._record_unused(  # By its matched name.
            trackable,
            f"{trackable.path} ({reason})" if reason else trackable.path)
      else:
        self._record_unused(trackable, saveable.name)
    return found

  def _check(self, plan, **error_types):
    """Raises unless every value of `plan` fits (see `read_plan.check`)."""
    read_plan.check(plan, self.values(), shape_error=ValueError, **error_types)

  def _found(self, saveable):
    return all(spec.name in self._values.dtypes for spec in saveable.specs)

  def _record_unused(self, trackable, attribute):
    self.unused_attributes.setdefault(trackable, []).append(attribute)


def _keras3_variable_value(trackable):
  """The `tf.Variable` holding a Keras 3 variable's value, or None.

  Keras 3 variables wrap a `tf.Variable` named without its scopes; they are
  matched by their `path` instead.
  """
  value = getattr(trackable, "_value", None)
  if (isinstance(getattr(trackable, "path", None), str) and
      isinstance(value, variables.Variable)):
    return value
  return None
