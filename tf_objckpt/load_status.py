"""What a restore returns: load statuses, to check the match and run restores.

`CheckpointLoadStatus` answers for an object-based restore (and, graph
building, runs its restore ops); `NameBasedSaverStatus` for a name-based
checkpoint restored by variable names; `InitializationOnlyStatus` for
`restore(None)`.
"""

import abc

from tensorflow.python.checkpoint import checkpoint as tf_checkpoint_lib
from tensorflow.python.eager import context
from tensorflow.python.framework import errors
from tensorflow.python.framework import ops
from tensorflow.python.util import deprecation

from tf_objckpt import data_structures
from tf_objckpt import functional_saver
from tf_objckpt import object_graph_check
from tf_objckpt import object_identity
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


def _objects_with_values(objects):
  """The objects that save values of their own (not only dependencies)."""
  return [obj for obj in objects
          if saveable_object_util.saveable_objects_from_trackable(obj)]


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
        "Streaming restore is not supported for name-based checkpoints.")
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
    names = object_graph_check.NodePaths(checkpoint.object_graph_proto)
    self.assert_existing_objects_matched()
    skipped = checkpoint.skipped_slot_node_ids()
    for node_id, node in enumerate(checkpoint.object_graph_proto.nodes):
      if (node.attributes and node_id not in skipped and
          checkpoint.objects_by_node_id.get(node_id) is None):
        raise AssertionError(
            f"Unresolved object in checkpoint {names[node_id]}: {node}")
    if checkpoint.slots_by_variable:
      raise AssertionError(
          f"Unresolved slot restorations: {checkpoint.slots_by_variable}")
    if checkpoint.unused_attributes:
      details = "\n".join(
          f"{names[node_id]} ({checkpoint.objects_by_node_id.get(node_id)}): "
          f"{attributes}"
          for node_id, attributes in checkpoint.unused_attributes.items())
      raise AssertionError(
          "Unused attributes in these objects (the attributes exist in the "
          f"checkpoint but were not restored):\n{details}")
    return self

  def assert_existing_objects_matched(self):
    """Asserts every existing object in the dependency graph got a value.

    Weaker than `assert_consumed`: checkpointed values whose objects do not
    exist yet (an unbuilt Keras layer, say) do not fail it. A value that
    did not fit an object created after `restore()` raises its error.
    """
    checkpoint = self._checkpoint
    checkpoint.raise_mismatch()
    for node_id, node in enumerate(checkpoint.object_graph_proto.nodes):
      trackable = checkpoint.objects_by_node_id.get(node_id)
      if (trackable is not None and
          trackable._update_uid < checkpoint.restore_uid):  # pylint: disable=protected-access
        raise AssertionError(
            f"Object {node} not assigned a value from checkpoint.")
    for obj in self._graph_view.list_objects(
        skip_slot_variables=checkpoint.skip_slot_variables):
      if (isinstance(obj, data_structures.TrackableDataStructure) and
          not obj._trackable_children()):  # pylint: disable=protected-access
        continue
      checkpoint.seen_objects.add(obj)
    unmatched = self._unmatched_objects()
    if unmatched:
      shown = unmatched[:10]
      raise AssertionError(
          f"Found {len(unmatched)} Python objects that were not bound to "
          "checkpointed values, likely due to changes in the Python program. "
          f"Showing {len(shown)} of {len(unmatched)} unmatched objects: "
          f"{shown}")
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
        raise AssertionError(
            "Only the root object matched the checkpoint: the checkpoint "
            "probably comes from another program. Objects without a "
            f"checkpointed value: {unmatched}")
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
      raise functional_saver.damage_named(
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

  def initialize_or_restore(self, session=None):
    """Runs the initializers of objects not restored by a later restore."""
    if context.executing_eagerly():
      return
    initializers = [
        obj.initializer for obj in self._graph_view.list_objects()
        if getattr(obj, "initializer", None) is not None and
        getattr(obj, "_update_uid", self._restore_uid - 1) < self._restore_uid]
    default_session(session, "initialize").run(initializers)


_DEPRECATED_RESTORE_INSTRUCTIONS = (
    "Restoring a name-based checkpoint with the object-based API matches "
    "variables by their global names, which is fragile, and adds restore ops "
    "on each call when graph building. Re-save the checkpoint with this "
    "object-based saver's save() and use the new checkpoint from now on.")


class NameBasedSaverStatus(_LoadStatus):
  """The status of restoring a name-based checkpoint by variable names."""

  @deprecation.deprecated(date=None,
                          instructions=_DEPRECATED_RESTORE_INSTRUCTIONS)
  def __init__(self, checkpoint, graph_view):
    self._checkpoint = checkpoint
    self._graph_view = graph_view
    self._optionally_restored = []
    self._root = graph_view.root

  def add_to_optionally_restored(self, var):
    """Ignores `var` in assertions (e.g. a save counter the Saver lacks)."""
    self._optionally_restored.append(var)

  def assert_consumed(self):
    """Raises if an attribute or object found no value by name."""
    unused = [(obj, attributes) for obj, attributes
              in self._checkpoint.unused_attributes.items()
              if all(obj is not x for x in self._optionally_restored)]
    if unused:
      details = "".join(f"\n    {obj}: {attributes}"
                        for obj, attributes in unused)
      raise AssertionError(
          f"Some objects had attributes which were not restored: {details}")
    for obj in self._graph_view.list_objects():
      obj._maybe_initialize_trackable()  # pylint: disable=protected-access
      if obj._update_uid < self._checkpoint.restore_uid:  # pylint: disable=protected-access
        raise AssertionError(f"Object not restored: {obj}")
    return self

  def assert_existing_objects_matched(self):
    return self.assert_consumed()

  def assert_nontrivial_match(self):
    return self.assert_consumed()

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
