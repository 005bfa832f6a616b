"""What a restore returns: load statuses, to check the match and run restores.

`CheckpointLoadStatus` answers for an object-based restore (and, graph
building, runs its restore ops); `NameBasedSaverStatus` for a name-based
checkpoint restored by variable names; `InitializationOnlyStatus` for
`restore(None)`.
"""

import abc

from tensorflow.python.checkpoint import checkpoint as tf_checkpoint_lib
from tensorflow.python.eager import context
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import errors
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor_shape
from tensorflow.python.trackable import data_structures as tf_data_structures

from tf_objckpt.api import named_restores
from tf_objckpt.engine import reads
from tf_objckpt.foundation import identity_containers as object_identity
from tf_objckpt.objects import graph_walk
from tf_objckpt.objects import structure_base
from tf_objckpt.restoring import name_based
from tf_objckpt.restoring import object_graph_check
from tf_objckpt.restoring import restore_report
from tf_objckpt import saveable_object_util


def default_session(session, action):
  """`session`, else the default session (or the one Keras provides).

  Raises:
    RuntimeError: If there is no session to `action` in.
  """
  if session is None:
    session = tf_checkpoint_lib.get_session()
  if session is None:
    raise RuntimeError(
        f"Unable to {action} in graph mode without a default session. Pass "
        "`session=`, or use `with tf.compat.v1.Session() as session:`.")
  return session


class _LoadStatus(abc.ABC):
  """What a restore returns: assertions about the match, and restore ops."""

  @abc.abstractmethod
  def assert_consumed(self):
    """Raises unless every checkpointed value and object was matched."""

  @abc.abstractmethod
  def assert_existing_objects_matched(self):
    """Raises unless every existing Python object got a value."""

  @abc.abstractmethod
  def assert_nontrivial_match(self):
    """Raises if nothing beyond the root object matched."""

  @abc.abstractmethod
  def run_restore_ops(self, session=None):
    """Runs the restore ops (graph mode); requires a checkpoint."""

  @abc.abstractmethod
  def initialize_or_restore(self, session=None):
    """Restores what the checkpoint has and initializes everything else."""

  def expect_partial(self):
    """Silences the warning about values left unrestored."""
    return self

  @abc.abstractmethod
  def report(self):
    """A `RestoreReport`: what was restored, left over, and left without."""

  def restored_shapes_and_dtypes(self):
    """`(shape, dtype)` of each value restored so far, for the transfer log.

    What `report().restored` lists, without naming the objects.
    """
    return [(value.shape, value.dtype) for value in self.report().restored]


def _objects_with_values(objects):
  """The objects that save values of their own (not only dependencies)."""
  return [obj for obj in objects
          if saveable_object_util.saveable_objects_from_trackable(obj)]


def _describe_objects(graph_view, objects):
  """Each object as "path (shape) dtype" (its program path), one per item."""
  paths = object_identity.ObjectIdentityDictionary()
  for obj, path in graph_view.objects_with_paths():
    paths[obj] = path
  described = []
  for obj in objects:
    path = paths.get(obj)
    text = (path or "(root)") if path is not None else repr(obj)
    shape, dtype = getattr(obj, "shape", None), getattr(obj, "dtype", None)
    if shape is not None:
      dims = _known_dims(shape)
      if dims is not None:
        text += " " + restore_report.shape_text(dims)
    if dtype is not None:
      text += f" {_dtype_name(dtype)}"
    described.append(text)
  return described


def _known_dims(shape):
  """The dimensions of a TensorShape or a tuple (Keras 3), or None."""
  try:
    return list(tensor_shape.TensorShape(shape).as_list())
  except ValueError:  # Unknown rank.
    return None


def _dtype_name(dtype):
  """"float32" for a DType or a dtype name (Keras 3 variables hold names)."""
  try:
    return dtypes.as_dtype(dtype).name
  except TypeError:
    return str(dtype)


def streaming_restore(status, session=None):
  """When graph building, runs restore ops as soon as they are created.

  Restore ops for dependencies added later (deferred restores) run in
  `session` as they are created. Nothing to do when executing eagerly.

  Raises:
    NotImplementedError: For name-based checkpoints.
  """
  if context.executing_eagerly():
    return
  session = default_session(session, "stream restore ops")
  if isinstance(status, NameBasedSaverStatus):
    raise NotImplementedError(
        "Streaming restore not supported from name-based checkpoints when "
        "graph building: restore the name-based checkpoint with "
        "`Checkpoint.restore()` (and run its restore ops), or eagerly.")
  status.run_restore_ops(session=session)
  # pylint: disable=protected-access
  feed_dict = status._feed_dict
  status._checkpoint.on_new_restore_ops = (
      lambda new_ops: session.run(new_ops, feed_dict=feed_dict))


class CheckpointLoadStatus(_LoadStatus):
  """The status of an object-based restore.

  Values for objects that do not exist yet are restored when the objects
  are created; the assertions tell how much has been matched so far. When
  graph building, `run_restore_ops` runs the restore ops created so far.
  """

  def __init__(self, coordinator, feed_dict, graph_view):
    self._checkpoint = coordinator
    self._feed_dict = feed_dict
    self._graph_view = graph_view
    self._root = graph_view.root  # The view may hold only a weak reference.

  def assert_consumed(self):
    """Asserts every checkpointed value and every object was matched.

    Raises:
      AssertionError: If a checkpointed object with values has no Python
        object, slot variables wait for restoring, an attribute in the
        checkpoint was not restored, or an existing object got no value.
    """
    checkpoint = self._checkpoint
    self.assert_existing_objects_matched()
    skipped = checkpoint.skipped_slot_node_ids()
    unresolved = [
        node_id for node_id, node in enumerate(
            checkpoint.object_graph_proto.nodes)
        if node.attributes and node_id not in skipped and
        checkpoint.objects_by_node_id.get(node_id) is None]
    if unresolved:
      values = self._values(unresolved)
      first = object_graph_check.NodePaths(checkpoint.object_graph_proto)[
          unresolved[0]]
      raise AssertionError(restore_report.listing(
          f"Unresolved object in checkpoint {first}: "
          f"{restore_report.count_text(len(values), 'value')} in checkpoint "
          f"{self._save_path!r} {'was' if len(values) == 1 else 'were'} not "
          "restored (no object of the program matched them):", values))
    if checkpoint.slots_by_variable:
      names = self._node_paths()
      slots = [f"{names[slot.slot_variable_id]}" for slot_list
               in checkpoint.slots_by_variable.values() for slot in slot_list]
      raise AssertionError(restore_report.listing(
          "Unresolved slot restorations: "
          f"{restore_report.count_text(len(slots), 'slot variable')} wait for "
          "their variable or optimizer:", slots))
    if checkpoint.unused_attributes:
      unused = checkpoint.unused_attributes
      names = object_graph_check.NodePaths(checkpoint.object_graph_proto)
      attributes = self._attributes(sorted(unused), only=unused)
      values = self._values(sorted(unused), only=unused)
      lines = [f"{names[node_id]}: {value}"  # "(root).v1: v1 .b () float32"
               for (node_id, _), value in zip(attributes, values)]
      raise AssertionError(restore_report.listing(
          "Unused attributes in these objects (the attributes exist in the "
          f"checkpoint but were not restored): in checkpoint "
          f"{self._save_path!r}, "
          f"{restore_report.count_text(len(lines), 'value')}:", lines))
    return self

  @property
  def _save_path(self):
    return self._checkpoint.values.save_path

  def _node_paths(self):
    return object_graph_check.NodePaths(self._checkpoint.object_graph_proto,
                                        separator="/")

  def _attributes(self, node_ids, only=None, excluding=None):
    """Yields `(node id, attribute)` for the nodes' checkpointed attributes.

    Args:
      node_ids: The nodes.
      only: Optional `{node id: attribute names}` to keep only those.
      excluding: Optional `{node id: attribute names}` to leave out.
    """
    nodes = self._checkpoint.object_graph_proto.nodes
    for node_id in node_ids:
      for attribute in nodes[node_id].attributes:
        if ((only is not None and attribute.name not in only[node_id]) or
            (excluding and attribute.name in excluding.get(node_id, ()))):
          continue
        yield node_id, attribute

  def _values(self, node_ids, only=None, excluding=None):
    """`ReportedValue`s of the nodes' attributes (see `_attributes`)."""
    checkpoint_values = self._checkpoint.values
    names = self._node_paths()
    values = []
    for node_id, attribute in self._attributes(node_ids, only, excluding):
      key = attribute.checkpoint_key
      dtype = checkpoint_values.dtypes.get(key)
      values.append(restore_report.ReportedValue(
          names[node_id], key, checkpoint_values.shapes.get(key),
          dtype.name if dtype is not None else None, attribute.name))
    return values

  def _bound_node_ids(self):
    """The nodes matched to objects, but for slots skipped on purpose."""
    checkpoint = self._checkpoint
    return set(checkpoint.matched_node_ids) - checkpoint.skipped_slot_node_ids()

  def restored_shapes_and_dtypes(self):
    checkpoint_values = self._checkpoint.values
    keys = [attribute.checkpoint_key for _, attribute in self._attributes(
        self._bound_node_ids(), excluding=self._checkpoint.unused_attributes)]
    return [(checkpoint_values.shapes.get(key), checkpoint_values.dtypes[key])
            for key in keys if key in checkpoint_values.dtypes]

  def report(self):
    """What this restore matched so far, as a `RestoreReport`."""
    checkpoint = self._checkpoint
    skipped = checkpoint.skipped_slot_node_ids()
    bound = self._bound_node_ids()
    unused = checkpoint.unused_attributes
    restored = self._values(sorted(bound), excluding=unused)
    unmatched = self._values(
        [node_id for node_id in range(len(checkpoint.object_graph_proto.nodes))
         if node_id not in bound and node_id not in skipped])
    unmatched += self._values(sorted(unused), only=unused)
    self._see_objects()
    return restore_report.RestoreReport(
        self._save_path, tuple(restored),
        tuple(sorted(unmatched, key=lambda value: value.key)),
        tuple(_describe_objects(self._graph_view, self._unmatched_objects())))

  def _see_objects(self):
    """Records the objects that exist now, for the unmatched-object checks."""
    checkpoint = self._checkpoint
    for obj in self._graph_view.list_objects(
        skip_slot_variables=checkpoint.skip_slot_variables):
      if (isinstance(obj, structure_base.TrackableDataStructure) and
          not obj._trackable_children()):  # pylint: disable=protected-access
        continue
      checkpoint.seen_objects.add(obj)

  def assert_existing_objects_matched(self):
    """Asserts every existing object in the dependency graph got a value.

    Weaker than `assert_consumed`: checkpointed values whose objects do not
    exist yet (an unbuilt Keras layer, say) do not fail it. A value that
    did not fit an object created after `restore()` raises its error.
    """
    checkpoint = self._checkpoint
    checkpoint.raise_mismatch()
    not_assigned = [
        node_id for node_id, trackable in checkpoint.objects_by_node_id.items()
        if trackable._update_uid < checkpoint.restore_uid]  # pylint: disable=protected-access
    if not_assigned:
      names = self._node_paths()
      raise AssertionError(restore_report.listing(
          f"Object {names[min(not_assigned)]} not assigned a value from "
          f"checkpoint {self._save_path!r}; objects not assigned:",
          [names[node_id] for node_id in sorted(not_assigned)]))
    self._see_objects()
    unmatched = self._unmatched_objects()
    if unmatched:
      raise AssertionError(restore_report.listing(
          f"Found {len(unmatched)} Python objects that were not bound to "
          "checkpointed values, likely due to changes in the Python program "
          f"(checkpoint {self._save_path!r}):",
          _describe_objects(self._graph_view, unmatched)))
    return self

  def _unmatched_objects(self):
    bound = object_identity.ObjectIdentitySet(
        self._checkpoint.objects_by_node_id.values())
    return [obj for obj in _objects_with_values(
        self._checkpoint.seen_objects) if obj not in bound]

  def assert_nontrivial_match(self):
    """Asserts that something besides the root object matched."""
    self._checkpoint.raise_mismatch()
    for obj in self._graph_view.list_objects(
        skip_slot_variables=self._checkpoint.skip_slot_variables):
      self._checkpoint.seen_objects.add(obj)
    if len(self._checkpoint.objects_by_node_id) <= 1:
      unmatched = self._unmatched_objects()
      if unmatched:
        raise AssertionError(restore_report.listing(
            "Nothing except the root object matched a checkpointed value. "
            "Typically this means that the checkpoint does not match the "
            f"Python program: checkpoint {self._save_path!r} probably comes "
            "from another program. Objects without a checkpointed value:",
            _describe_objects(self._graph_view, unmatched)))
      raise AssertionError(
          "Nothing to load. No dependencies have been added to "
          f"{self._graph_view.root} yet.")
    return self

  def run_restore_ops(self, session=None):
    """Runs the restore ops created so far (graph mode).

    Raises:
      NotFoundError, InvalidArgumentError, ValueError: If a value of an
        object created after `restore()` does not fit it; nothing runs.
    """
    if context.executing_eagerly():
      return
    self._checkpoint.raise_mismatch()
    session = default_session(session, "run restore ops")
    try:
      self._run_restore_ops(session)
    except (errors.DataLossError, errors.OutOfRangeError) as e:
      raise named_restores.damage_named(
          self._checkpoint.values.save_path, e) from e

  def _run_restore_ops(self, session):
    try:
      session.run(self._checkpoint.restore_ops_to_run(),
                  feed_dict=self._feed_dict)
    except errors.CancelledError:
      # Restore ops run side by side; one that fails cancels the others, and
      # the session may report a cancellation rather than the failure. One
      # at a time, the failing op raises its own error.
      for restore_op in self._checkpoint.restore_ops:
        session.run(restore_op, feed_dict=self._feed_dict)

  def initialize_or_restore(self, session=None):
    """Restores matched objects and initializes the others (graph mode).

    Objects restored by this or a later `restore()` are not initialized.
    """
    if context.executing_eagerly():
      return
    session = default_session(session, "initialize or restore")
    restore_uid = self._checkpoint.restore_uid
    bound = object_identity.ObjectIdentitySet(
        self._checkpoint.objects_by_node_id.values())
    initializers = [
        obj.initializer for obj in self._graph_view.list_objects()
        if hasattr(obj, "initializer") and obj not in bound and
        getattr(obj, "_update_uid", restore_uid - 1) < restore_uid]
    self.run_restore_ops(session=session)
    session.run(initializers)

  def expect_partial(self):
    self._checkpoint.expect_partial = True
    return self


_NO_CHECKPOINT = ("No checkpoint specified (save_path=None); nothing is "
                  "being restored.")


class InitializationOnlyStatus(_LoadStatus):
  """The status of `restore(None)`: there is nothing to restore.

  Its assertions always fail; `initialize_or_restore` initializes the
  variables (graph mode).
  """

  def __init__(self, graph_view, restore_uid):
    self._graph_view = graph_view
    self._restore_uid = restore_uid
    self._root = graph_view.root

  def assert_consumed(self):
    raise AssertionError(_NO_CHECKPOINT)

  def assert_existing_objects_matched(self):
    raise AssertionError(_NO_CHECKPOINT)

  def assert_nontrivial_match(self):
    raise AssertionError(_NO_CHECKPOINT)

  def run_restore_ops(self, session=None):
    raise AssertionError(
        "No checkpoint specified, so no restore ops are available "
        "(save_path=None to Saver.restore).")

  def report(self):
    """Nothing restored: every object with state is without a value."""
    objects = _objects_with_values(self._graph_view.list_objects())
    return restore_report.RestoreReport(
        None, (), (), tuple(_describe_objects(self._graph_view, objects)))

  def initialize_or_restore(self, session=None):
    """Runs the initializers of objects not restored by a later restore."""
    if context.executing_eagerly():
      return
    initializers = [
        obj.initializer for obj in self._graph_view.list_objects()
        if getattr(obj, "initializer", None) is not None and
        getattr(obj, "_update_uid", self._restore_uid - 1) < self._restore_uid]
    default_session(session, "initialize").run(initializers)


def _reached(obj, restore_uid):
  """Whether a restore reached `obj`, or every object a container holds."""
  # pylint: disable=protected-access
  if obj._update_uid >= restore_uid:
    return True
  return (isinstance(obj, tf_data_structures.TrackableDataStructure) and
          all(child._update_uid >= restore_uid
              for child in obj._trackable_children().values()))


class NameBasedSaverStatus(_LoadStatus):
  """The status of restoring a name-based checkpoint by variable names."""

  def __init__(self, checkpoint, graph_view):
    self._checkpoint = checkpoint
    self._graph_view = graph_view
    self._optionally_restored = object_identity.ObjectIdentitySet()
    self._root = graph_view.root

  def add_to_optionally_restored(self, var):
    """Ignores `var` in assertions (e.g. a save counter the Saver lacks)."""
    self._optionally_restored.add(var)

  def assert_consumed(self):
    """Raises if an object, or a v1 optimizer value, found no home by name.

    Checkpoint values with no object are not errors, as in TensorFlow; but
    the v1 optimizer values (slots, beta powers) of variables a Keras 3
    optimizer trains are, as that optimizer was meant to take them.
    """
    self.assert_existing_objects_matched()
    optimizers = self._checkpoint.optimizers
    if not optimizers.seen():
      return self
    report = self.report()
    leftover = optimizers.leftover_keys(
        {value.key for value in report.restored})
    if leftover:
      raise AssertionError(restore_report.listing(
          f"{restore_report.count_text(len(leftover), 'v1 optimizer value')}"
          f" in checkpoint {self._checkpoint.save_path!r} found no Keras 3 "
          "optimizer variable:",
          [value for value in report.unmatched if value.key in leftover]))
    return self

  def assert_existing_objects_matched(self):
    """Raises if an attribute or object found no value by name."""
    unused = self._unused_attributes()
    if unused:
      described = _describe_objects(self._graph_view,
                                    [obj for obj, _ in unused])
      raise AssertionError(restore_report.listing(
          "Some objects had attributes which were not restored: "
          f"{restore_report.count_text(len(unused), 'object')} found no "
          f"value in checkpoint "
          f"{self._checkpoint.save_path!r} for these names:",
          [f"{text}: {', '.join(attributes)}"
           for text, (_, attributes) in zip(described, unused)]))
    not_restored = self._objects_not_restored()
    if not_restored:
      raise AssertionError(restore_report.listing(
          "Object not restored: "
          f"{restore_report.count_text(len(not_restored), 'object')} got no "
          "value "
          f"from checkpoint {self._checkpoint.save_path!r}:",
          _describe_objects(self._graph_view, not_restored)))
    return self

  def _unused_attributes(self):
    return [(obj, attributes) for obj, attributes
            in self._checkpoint.unused_attributes.items()
            if obj not in self._optionally_restored]

  def _objects_not_restored(self):
    """Objects no restore reached, but for containers of restored objects.

    A Keras 3 object may replace a list of its variables when it is built
    after `restore()` (an optimizer's `_trainable_variables`): the new list
    holds no values, and its variables were restored.
    """
    not_restored = []
    for obj in self._graph_view.list_objects():
      obj._maybe_initialize_trackable()  # pylint: disable=protected-access
      if not _reached(obj, self._checkpoint.restore_uid):
        not_restored.append(obj)
    return not_restored

  def report(self):
    """What this restore matched so far, as a `RestoreReport`."""
    checkpoint = self._checkpoint
    values = checkpoint.values()
    restored = []
    for obj, path in self._graph_view.objects_with_paths():
      if getattr(obj, "_update_uid", -1) < checkpoint.restore_uid:
        continue
      for saveable in checkpoint.globally_named_object_attributes(
          obj, record_unused=False):
        notes = getattr(saveable, "notes", {})
        restored.extend(restore_report.ReportedValue(
            path or "(root)", spec.name, values.shapes.get(spec.name),
            values.dtypes[spec.name].name, note=notes.get(spec.name))
                        for spec in saveable.specs
                        if spec.name in values.dtypes)
    restored_keys = {value.key for value in restored}
    unplaced = checkpoint.optimizers.unplaced
    unmatched = [restore_report.ReportedValue(
        key, key, values.shapes[key], values.dtypes[key].name,
        note=unplaced.get(key))
                 for key in sorted(values.dtypes) if key not in restored_keys]
    without = [obj for obj, _ in self._unused_attributes()]
    listed = object_identity.ObjectIdentitySet(without)
    without += [obj for obj in _objects_with_values(
        self._objects_not_restored())
                if obj not in listed and obj not in self._optionally_restored]
    return restore_report.RestoreReport(
        checkpoint.save_path, tuple(restored), tuple(unmatched),
        tuple(_describe_objects(self._graph_view, without)))

  def assert_nontrivial_match(self):
    return self.assert_existing_objects_matched()

  def _gather_saveable_objects(self):
    """Globally named saveables of objects not yet restored by this call."""
    saveables = []
    for obj in self._graph_view.list_objects():
      obj._maybe_initialize_trackable()  # pylint: disable=protected-access
      if obj._update_uid >= self._checkpoint.restore_uid:  # pylint: disable=protected-access
        continue
      obj._update_uid = self._checkpoint.restore_uid  # pylint: disable=protected-access
      saveables.extend(
          self._checkpoint.globally_named_object_attributes(obj))
    return saveables

  def run_restore_ops(self, session=None):
    """Restores by name with a v1 `Saver` (graph mode)."""
    if context.executing_eagerly():
      return
    from tf_objckpt import saver as v1_saver_lib  # pylint: disable=g-import-not-at-top
    with ops.device("/cpu:0"):
      saveables = self._gather_saveable_objects()
      v1_saver_lib.Saver(saveables).restore(
          sess=default_session(session, "restore by name"),
          save_path=self._checkpoint.save_path)

  def initialize_or_restore(self, session=None):
    self.run_restore_ops(session=session)


def restore_by_names(save_path, reader, graph_view, assignment_map=None):
  """Starts a name-based restore of a checkpoint with no object graph.

  `assignment_map` maps checkpoint names to the program's (see
  `name_matching`).

  Returns:
    A `NameBasedSaverStatus`.

  Raises:
    NotFoundError, InvalidArgumentError, ValueError: Executing eagerly, if a
      value does not fit its variable; nothing is assigned then.
  """
  name_based.conversion_hint.log_once(save_path)
  keys = reader.get_variable_to_shape_map().keys()
  if not context.executing_eagerly():
    return NameBasedSaverStatus(
        name_based.NameBasedRestoreCoordinator(
            save_path, keys, _objects_below, assignment_map=assignment_map),
        graph_view=graph_view)
  coordinator = name_based.NameBasedRestoreCoordinator(
      save_path, keys, _objects_below,
      reads.CheckpointValues(save_path, reader, save_path),
      assignment_map)
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
  return NameBasedSaverStatus(coordinator, graph_view=graph_view)


def _objects_below(trackable):
  """The objects `trackable` depends on, directly or not, itself excluded."""
  return graph_walk.ObjectGraphView(trackable).list_objects()[1:]
