"""Restoring name-based (v1 `Saver`) checkpoints through the object-based API.

A checkpoint without an object graph keys values by global variable names.
`Checkpoint.restore` matches them to the objects' variables by those names:
eagerly at once (every value checked before any is assigned) and again for
each object tracked later; when graph building, through a v1 `Saver` when the
status's restore ops run.
"""

from tensorflow.python.eager import context
from tensorflow.python.framework import ops

from tf_objckpt import functional_saver
from tf_objckpt import load_status
from tf_objckpt import object_identity
from tf_objckpt import restore_plan
from tf_objckpt import saveable_object_util


class NameBasedRestoreCoordinator:
  """The state of restoring a name-based (v1 `Saver`) checkpoint."""

  def __init__(self, save_path, values=None):
    """Restores `save_path`; `values` (eager only) reads it."""
    self.save_path = save_path
    self._values = values
    # Object -> attribute names that found no value, for assertions.
    self.unused_attributes = object_identity.ObjectIdentityWeakKeyDictionary()
    self.restore_uid = ops.uid()
    # Trackable -> its saveables, checked by `check` before any restore.
    self._checked = object_identity.ObjectIdentityDictionary()

  def values(self):
    """The checkpoint's dtypes and shapes (a `CheckpointValues`)."""
    if self._values is not None:
      return self._values
    return functional_saver.CheckpointValues(
        self.save_path, functional_saver.open_reader(self.save_path),
        self.save_path)

  def globally_named_object_attributes(self, trackable, record_unused=True):
    """Yields saveables named by global (variable) names for `trackable`.

    Attributes with no global name are recorded as unused (unless their
    restore is optional, or `record_unused` is False), so assertions fail
    for them.
    """
    factories = saveable_object_util.saveable_objects_from_trackable(
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
      named = saveable_object_util.op_list_to_dict(
          [saveable], convert_variable_to_tensor=False)
      for name, op in named.items():
        yield from saveable_object_util.saveable_objects_for_op(op, name)

  def check(self, trackables):
    """Raises unless the values the trackables find by name fit them.

    Values missing from the checkpoint are not errors: they are recorded as
    unused, for the assertions. The saveables found are kept for the
    trackables' `eager_restore`, so that they are made once.
    """
    gathered = [self._found_saveables(trackable) for trackable in trackables]
    self._check([saveable for found in gathered for saveable in found])
    for trackable, found in zip(trackables, gathered):
      self._checked[trackable] = found

  def forget_checked(self):
    """Drops the saveables `check` kept (they hold the variables)."""
    self._checked.clear()

  def eager_restore(self, trackable):
    """Restores `trackable`'s attributes immediately (eager mode only).

    Called by `Trackable._name_based_attribute_restore`; everything is
    checked before anything is assigned.
    """
    assert context.executing_eagerly()
    saveables = self._checked.pop(trackable, None)
    if saveables is None:  # Tracked after `restore()`: check it now.
      saveables = self._found_saveables(trackable)
      self._check(saveables)
    for saveable in saveables:
      specs = saveable.specs
      with ops.device("/cpu:0"):
        restored = functional_saver.restore_v2(
            self.save_path, [spec.name for spec in specs],
            [spec.slice_spec for spec in specs],
            [self._values.dtypes[spec.name] for spec in specs])
      saveable.restore(restored, None)

  def _found_saveables(self, trackable):
    """`trackable`'s saveables whose values the checkpoint holds.

    The others are recorded as unused.
    """
    found = []
    for saveable in self.globally_named_object_attributes(trackable):
      if self._found(saveable):
        found.append(saveable)
      else:
        self._record_unused(trackable, saveable.name)
    return found

  def _check(self, saveables):
    """Raises unless every value of `saveables` fits (see `restore_plan`)."""
    entries = []
    for saveable in saveables:
      shape = restore_plan.expected_shape(saveable)
      entries.extend(restore_plan.entry(spec.name, spec.slice_spec,
                                        spec.dtype, shape)
                     for spec in saveable.specs)
    restore_plan.check(restore_plan.RestorePlan(entries), self.save_path,
                       self._values.dtypes, self._values.shapes,
                       shape_error=ValueError)

  def _found(self, saveable):
    return all(spec.name in self._values.dtypes for spec in saveable.specs)

  def _record_unused(self, trackable, attribute):
    self.unused_attributes.setdefault(trackable, []).append(attribute)


def restore_by_names(save_path, reader, graph_view):
  """Starts a name-based restore of a checkpoint with no object graph.

  Returns:
    A `NameBasedSaverStatus`.

  Raises:
    NotFoundError, InvalidArgumentError, ValueError: Executing eagerly, if a
      value does not fit its variable; nothing is assigned then.
  """
  if not context.executing_eagerly():
    return load_status.NameBasedSaverStatus(
        NameBasedRestoreCoordinator(save_path), graph_view=graph_view)
  coordinator = NameBasedRestoreCoordinator(
      save_path, functional_saver.CheckpointValues(save_path, reader,
                                                   save_path))
  objects = graph_view.list_objects()
  for obj in objects:
    obj._maybe_initialize_trackable()  # pylint: disable=protected-access
  coordinator.check(objects)
  try:
    for obj in objects:
      obj._name_based_restores.add(coordinator)  # pylint: disable=protected-access
      obj._name_based_attribute_restore(coordinator)  # pylint: disable=protected-access
  finally:
    coordinator.forget_checked()
  return load_status.NameBasedSaverStatus(coordinator, graph_view=graph_view)
