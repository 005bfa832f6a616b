"""What a name-based restore returns: `NameBasedSaverStatus`.

A checkpoint without an object graph (written by a v1 `Saver`) is
restored by variable names: `restore_by_names` starts the restore
(`restoring.name_based` matches the names), eagerly at once, graph
building through a v1 `Saver` when the status runs its restore ops.
"""

import functools

from tensorflow.python.eager import context
from tensorflow.python.framework import ops
from tensorflow.python.trackable import data_structures as tf_data_structures

from tf_objckpt.api import load_status
from tf_objckpt.api import sessions
from tf_objckpt.engine import reads
from tf_objckpt.foundation import identity_containers
from tf_objckpt.foundation import tensorflow_internals
from tf_objckpt.foundation.type_hints import Session
from tf_objckpt.objects import graph_walk
from tf_objckpt.restoring import name_based
from tf_objckpt.restoring import object_maps
from tf_objckpt.restoring import restore_report


def _reached(obj, restore_uid):
  """Whether a restore reached `obj`, or every object a container holds."""
  if tensorflow_internals.last_restore(obj) >= restore_uid:
    return True
  return (isinstance(obj, tf_data_structures.TrackableDataStructure) and all(
      tensorflow_internals.last_restore(child) >= restore_uid
      for child in tensorflow_internals.children(obj).values()))


class NameBasedSaverStatus(load_status.LoadStatus):
  """The status of restoring a name-based checkpoint by variable names."""

  def __init__(self, checkpoint, graph_view, object_map=None):
    self._checkpoint = checkpoint
    self._graph_view = graph_view
    # The checkpoint scopes an object map restores, "" for all of it.
    self._mapped_scopes = [
        scope + "/" if scope else "" for scope in (object_map or {}).values()
    ]
    self._optionally_restored = identity_containers.ObjectIdentitySet()
    self._root = graph_view.root

  def add_to_optionally_restored(self, var):
    """Ignores `var` in assertions (e.g. a save counter the Saver lacks)."""
    self._optionally_restored.add(var)

  def assert_consumed(self) -> "NameBasedSaverStatus":
    """Raises if an object, or a v1 optimizer value, found no home by name.

    Checkpoint values with no object are not errors, as in TensorFlow; but
    the v1 optimizer values (slots, beta powers) of variables a Keras 3
    optimizer trains are, as that optimizer was meant to take them, and so
    are the values in the scopes an object map restores.
    """
    self.assert_existing_objects_matched()
    if self._mapped_scopes:
      self._assert_mapped_scopes_consumed()
    optimizers = self._checkpoint.optimizers
    if not optimizers.seen():
      return self
    report = self.report()
    leftover = optimizers.leftover_keys(
        {value.key for value in report.restored})
    if leftover:
      raise AssertionError(
          restore_report.listing(
              f"{restore_report.count_text(len(leftover), 'v1 optimizer value')}"
              f" in checkpoint {self._checkpoint.save_path!r} found no Keras 3 "
              "optimizer variable:",
              [value for value in report.unmatched if value.key in leftover]))
    return self

  def _assert_mapped_scopes_consumed(self):
    """Raises if a value in an object map's scope found no variable."""
    report = self.report()
    left = [
        value for value in report.unmatched if any(
            value.key.startswith(scope) for scope in self._mapped_scopes)
    ]
    if left:
      raise AssertionError(
          restore_report.listing(
              f"{restore_report.count_text(len(left), 'value')} of checkpoint "
              f"{self._checkpoint.save_path!r} in the object map's scopes "
              f"({', '.join(map(repr, self._mapped_scopes))}) found no "
              "variable:", left))

  def assert_existing_objects_matched(self) -> "NameBasedSaverStatus":
    """Raises if an attribute or object found no value by name."""
    unused = self._unused_attributes()
    if unused:
      described = load_status.describe_objects(self._graph_view,
                                               [obj for obj, _ in unused])
      raise AssertionError(
          restore_report.listing(
              "Some objects had attributes which were not restored: "
              f"{restore_report.count_text(len(unused), 'object')} found no "
              f"value in checkpoint "
              f"{self._checkpoint.save_path!r} for these names:", [
                  f"{text}: {', '.join(attributes)}"
                  for text, (_, attributes) in zip(described, unused)
              ]))
    not_restored = self._objects_not_restored()
    if not_restored:
      raise AssertionError(
          restore_report.listing(
              "Object not restored: "
              f"{restore_report.count_text(len(not_restored), 'object')} got no "
              "value "
              f"from checkpoint {self._checkpoint.save_path!r}:",
              load_status.describe_objects(self._graph_view, not_restored)))
    return self

  def _unused_attributes(self):
    return [(obj, attributes)
            for obj, attributes in self._checkpoint.unused_attributes.items()
            if obj not in self._optionally_restored]

  def _objects_not_restored(self):
    """Objects no restore reached, but for containers of restored objects.

    A Keras 3 object may replace a list of its variables when it is built
    after `restore()` (an optimizer's `_trainable_variables`): the new list
    holds no values, and its variables were restored.
    """
    not_restored = []
    for obj in self._graph_view.list_objects():
      tensorflow_internals.initialize(obj)
      if not _reached(obj, self._checkpoint.restore_uid):
        not_restored.append(obj)
    return not_restored

  def report(self) -> restore_report.RestoreReport:
    """What this restore matched so far, as a `RestoreReport`."""
    checkpoint = self._checkpoint
    values = checkpoint.values()
    restored: list = []
    for obj, path in self._graph_view.objects_with_paths():
      if tensorflow_internals.last_restore_or(obj, -1) < checkpoint.restore_uid:
        continue
      for saveable in checkpoint.globally_named_object_attributes(
          obj, record_unused=False):
        notes = getattr(saveable, "notes", {})
        restored.extend(
            restore_report.ReportedValue(path or "(root)",
                                         spec.name,
                                         values.shapes.get(spec.name),
                                         values.dtypes[spec.name].name,
                                         note=notes.get(spec.name))
            for spec in saveable.specs
            if spec.name in values.dtypes)
    restored_keys = {value.key for value in restored}
    unplaced = checkpoint.optimizers.unplaced
    unmatched = [
        restore_report.ReportedValue(key,
                                     key,
                                     values.shapes[key],
                                     values.dtypes[key].name,
                                     note=unplaced.get(key))
        for key in sorted(values.dtypes)
        if key not in restored_keys
    ]
    without = [obj for obj, _ in self._unused_attributes()]
    listed = identity_containers.ObjectIdentitySet(without)
    without += [
        obj
        for obj in load_status.objects_with_values(self._objects_not_restored())
        if obj not in listed and obj not in self._optionally_restored
    ]
    return restore_report.RestoreReport(
        checkpoint.save_path, tuple(restored), tuple(unmatched),
        tuple(load_status.describe_objects(self._graph_view, without)))

  def assert_nontrivial_match(self) -> "NameBasedSaverStatus":
    return self.assert_existing_objects_matched()

  def _gather_saveable_objects(self):
    """Globally named saveables of objects not yet restored by this call."""
    saveables = []
    for obj in self._graph_view.list_objects():
      if not self._checkpoint.mark_restored(obj):
        continue
      saveables.extend(self._checkpoint.globally_named_object_attributes(obj))
    return saveables

  def run_restore_ops(self, session: Session = None) -> None:
    """Restores by name with a v1 `Saver` (graph mode)."""
    if context.executing_eagerly():
      return
    from tf_objckpt.v1 import name_based_saver  # pylint: disable=g-import-not-at-top
    with ops.device("/cpu:0"):
      name_based_saver.Saver(self._gather_saveable_objects()).restore(
          sess=sessions.default_session(session, "restore by name"),
          save_path=self._checkpoint.save_path)

  def initialize_or_restore(self, session: Session = None) -> None:
    self.run_restore_ops(session=session)


def restore_by_names(save_path,
                     reader,
                     graph_view,
                     assignment_map=None,
                     object_map=None):
  """Starts a name-based restore of a checkpoint with no object graph.

  `assignment_map` maps checkpoint names to the program's (see
  `name_matching`); `object_map`, objects to checkpoint scopes
  (`object_maps.name_scopes`).

  Returns:
    A `NameBasedSaverStatus`.

  Raises:
    NotFoundError, InvalidArgumentError, ValueError: Executing eagerly, if a
      value does not fit its variable; nothing is assigned then.
  """
  name_based.conversion_hint.log_once(save_path)
  keys = reader.get_variable_to_shape_map().keys()
  scopes = None
  if object_map:
    object_maps.name_scopes(object_map, graph_view.root,
                            graph_view.attached_dependencies)  # Checks paths.
    scopes = functools.partial(object_maps.name_scopes, object_map,
                               graph_view.root,
                               graph_view.attached_dependencies)
  if not context.executing_eagerly():
    return NameBasedSaverStatus(name_based.NameBasedRestoreCoordinator(
        save_path,
        keys,
        _objects_below,
        assignment_map=assignment_map,
        object_scopes=scopes),
                                graph_view=graph_view,
                                object_map=object_map)
  coordinator = name_based.NameBasedRestoreCoordinator(
      save_path, keys, _objects_below,
      reads.CheckpointValues(save_path, reader), assignment_map, scopes)
  objects = graph_view.list_objects()
  for obj in objects:
    tensorflow_internals.initialize(obj)
  coordinator.check(objects)
  try:
    for obj in objects:
      tensorflow_internals.restore_by_names(obj, coordinator)
  finally:
    coordinator.forget_checked()
  return NameBasedSaverStatus(coordinator,
                              graph_view=graph_view,
                              object_map=object_map)


def _objects_below(trackable):
  """The objects `trackable` depends on, directly or not, itself excluded."""
  return graph_walk.ObjectGraphView(trackable).list_objects()[1:]
