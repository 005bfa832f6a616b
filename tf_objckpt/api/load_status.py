"""What an object-based restore returns: load statuses.

`CheckpointLoadStatus` answers for an object-based restore (and, graph
building, runs its restore ops); `InitializationOnlyStatus` for
`restore(None)`. Their base, `LoadStatus`, is shared with the status of a
name-based restore (`name_based_status`), and so is the description of
objects left without a value.
"""

import abc

from tensorflow.python.eager import context
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import errors
from tensorflow.python.framework import tensor_shape

from tf_objckpt.api import named_restores
from tf_objckpt.api import sessions
from tf_objckpt.foundation import identity_containers
from tf_objckpt.foundation import tensorflow_internals
from tf_objckpt.foundation.type_hints import Session
from tf_objckpt.objects import structure_base
from tf_objckpt.restoring import object_graph_check
from tf_objckpt.restoring import restore_report
from tf_objckpt.saveables import trackable_saveables


class LoadStatus(abc.ABC):
  """What a restore returns: assertions about the match, and restore ops."""

  @abc.abstractmethod
  def assert_consumed(self) -> "LoadStatus":
    """Raises unless every checkpointed value and object was matched."""

  @abc.abstractmethod
  def assert_existing_objects_matched(self) -> "LoadStatus":
    """Raises unless every existing Python object got a value."""

  @abc.abstractmethod
  def assert_nontrivial_match(self) -> "LoadStatus":
    """Raises if nothing beyond the root object matched."""

  @abc.abstractmethod
  def run_restore_ops(self, session: Session = None) -> None:
    """Runs the restore ops (graph mode); requires a checkpoint."""

  @abc.abstractmethod
  def initialize_or_restore(self, session: Session = None) -> None:
    """Restores what the checkpoint has and initializes everything else."""

  def expect_partial(self) -> "LoadStatus":
    """Silences the warning about values left unrestored."""
    return self

  @abc.abstractmethod
  def report(self) -> restore_report.RestoreReport:
    """A `RestoreReport`: what was restored, left over, and left without."""

  def restored_shapes_and_dtypes(self):
    """`(shape, dtype)` of each value restored so far, for the transfer log.

    What `report().restored` lists, without naming the objects.
    """
    return [(value.shape, value.dtype) for value in self.report().restored]


def objects_with_values(objects):
  """The objects that save values of their own (not only dependencies)."""
  return [
      obj for obj in objects
      if trackable_saveables.saveable_objects_from_trackable(obj)
  ]


def describe_objects(graph_view, objects, object_map=None):
  """Each object as "path (shape) dtype" (its program path), one per item.

  With an object map (`object_maps.ObjectMap`), an object a pair covers is
  "path has no value at checkpoint path (shape dtype)".
  """
  paths = identity_containers.ObjectIdentityDictionary()
  for obj, path in graph_view.objects_with_paths():
    paths[obj] = path
  described = []
  for obj in objects:
    path = paths.get(obj)
    text = (path or "(root)") if path is not None else repr(obj)
    value = []
    shape, dtype = getattr(obj, "shape", None), getattr(obj, "dtype", None)
    if shape is not None:
      dims = _known_dims(shape)
      if dims is not None:
        value.append(restore_report.shape_text(dims))
    if dtype is not None:
      value.append(_dtype_name(dtype))
    source = (object_map.checkpoint_path_of(path)
              if object_map is not None and path is not None else None)
    if source is not None:
      text += f" has no value at {source or '(root)'}"
      text += f" ({' '.join(value)})" if value else ""
    elif value:
      text += " " + " ".join(value)
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


def _mapped_note(target, name, unmatched):
  """Where an object map puts a value: "no object at ...", "into ..."."""
  if target is None or (target == name and not unmatched):
    return None
  return f"{'no object at' if unmatched else 'into'} {target or '(root)'}"


class CheckpointLoadStatus(LoadStatus):
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

  def assert_consumed(self) -> "CheckpointLoadStatus":
    """Asserts every checkpointed value and every object was matched.

    Raises:
      AssertionError: If a checkpointed object with values has no Python
        object, slot variables wait for restoring, an attribute in the
        checkpoint was not restored, or an existing object got no value.
    """
    checkpoint = self._checkpoint
    self.assert_existing_objects_matched()
    ignored = checkpoint.ignored_node_ids()
    bound = checkpoint.bound_objects
    unresolved = [
        node_id
        for node_id, node in enumerate(checkpoint.object_graph_proto.nodes)
        if node.attributes and node_id not in ignored and
        bound.get(node_id) is None
    ]
    if unresolved:
      values = self._values(unresolved)
      first = object_graph_check.NodePaths(
          checkpoint.object_graph_proto)[unresolved[0]]
      raise AssertionError(
          restore_report.listing(
              f"Unresolved object in checkpoint {first}: "
              f"{restore_report.count_text(len(values), 'value')} in checkpoint "
              f"{self._save_path!r} {'was' if len(values) == 1 else 'were'} not "
              "restored (no object of the program matched them):", values))
    waiting_slots = [
        slot_id for slot_id in checkpoint.waiting_slot_ids()
        if slot_id not in ignored
    ]
    if waiting_slots:
      names = self._node_paths()
      slots = [f"{names[slot_id]}" for slot_id in waiting_slots]
      raise AssertionError(
          restore_report.listing(
              "Unresolved slot restorations: "
              f"{restore_report.count_text(len(slots), 'slot variable')} wait for "
              "their variable or optimizer:", slots))
    unused = {
        node_id: names
        for node_id, names in checkpoint.unused_attributes.items()
        if node_id not in ignored
    }
    if unused:
      names = object_graph_check.NodePaths(checkpoint.object_graph_proto)
      attributes = self._attributes(sorted(unused), only=unused)
      values = self._values(sorted(unused), only=unused)
      lines = [
          f"{names[node_id]}: {value}"  # "(root).v1: v1 .b () float32"
          for (node_id, _), value in zip(attributes, values)
      ]
      raise AssertionError(
          restore_report.listing(
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

  def _values(self, node_ids, only=None, excluding=None, unmatched=False):
    """`ReportedValue`s of the nodes' attributes (see `_attributes`).

    `unmatched` values a pair of the object map covers say where their
    object would be.
    """
    checkpoint_values = self._checkpoint.values
    object_map = self._checkpoint.object_map
    node_paths = self._node_paths()
    values = []
    for node_id, attribute in self._attributes(node_ids, only, excluding):
      key = attribute.checkpoint_key
      dtype = checkpoint_values.dtypes.get(key)
      note, name = None, node_paths[node_id]
      if object_map is not None:
        name = object_map.node_path(node_id, node_paths)
        note = _mapped_note(object_map.new_path_of(name), name, unmatched)
      values.append(
          restore_report.ReportedValue(
              name, key, checkpoint_values.shapes.get(key),
              dtype.name if dtype is not None else None, attribute.name, note))
    return values

  def _bound_node_ids(self):
    """The nodes matched to objects, but for slots skipped on purpose."""
    checkpoint = self._checkpoint
    return set(checkpoint.matched_node_ids) - checkpoint.skipped_slot_node_ids()

  def restored_shapes_and_dtypes(self):
    checkpoint_values = self._checkpoint.values
    keys = [
        attribute.checkpoint_key for _, attribute in self._attributes(
            self._bound_node_ids(),
            excluding=self._checkpoint.unused_attributes)
    ]
    return [(checkpoint_values.shapes.get(key), checkpoint_values.dtypes[key])
            for key in keys
            if key in checkpoint_values.dtypes]

  def report(self) -> restore_report.RestoreReport:
    """What this restore matched so far, as a `RestoreReport`."""
    checkpoint = self._checkpoint
    ignored = checkpoint.ignored_node_ids()
    bound = self._bound_node_ids()
    unused = checkpoint.unused_attributes
    restored = self._values(sorted(bound), excluding=unused)
    unmatched = self._values([
        node_id for node_id in range(len(checkpoint.object_graph_proto.nodes))
        if node_id not in bound and node_id not in ignored
    ],
                             unmatched=True)
    unused = {
        node_id: names
        for node_id, names in unused.items()
        if node_id not in ignored
    }
    unmatched += self._values(sorted(unused), only=unused)
    self._see_objects()
    return restore_report.RestoreReport(
        self._save_path, tuple(restored),
        tuple(sorted(unmatched, key=lambda value: value.key)),
        tuple(
            describe_objects(self._graph_view, self._unmatched_objects(),
                             checkpoint.object_map)))

  def _see_objects(self):
    """Records the objects that exist now, for the unmatched-object checks."""
    checkpoint = self._checkpoint
    for obj in self._graph_view.list_objects(
        skip_slot_variables=checkpoint.skip_slot_variables):
      if (isinstance(obj, structure_base.TrackableDataStructure) and
          not tensorflow_internals.children(obj)):
        continue
      checkpoint.see(obj)

  def assert_existing_objects_matched(self) -> "CheckpointLoadStatus":
    """Asserts every existing object in the dependency graph got a value.

    Weaker than `assert_consumed`: checkpointed values whose objects do not
    exist yet (an unbuilt Keras layer, say) do not fail it. A value that
    did not fit an object created after `restore()` raises its error.
    """
    checkpoint = self._checkpoint
    checkpoint.raise_mismatch()
    not_assigned = checkpoint.unassigned_node_ids()
    if not_assigned:
      names = self._node_paths()
      raise AssertionError(
          restore_report.listing(
              f"Object {names[min(not_assigned)]} not assigned a value from "
              f"checkpoint {self._save_path!r}; objects not assigned:",
              [names[node_id] for node_id in sorted(not_assigned)]))
    self._see_objects()
    unmatched = self._unmatched_objects()
    if unmatched:
      raise AssertionError(
          restore_report.listing(
              f"Found {len(unmatched)} Python objects that were not bound to "
              "checkpointed values, likely due to changes in the Python program "
              f"(checkpoint {self._save_path!r}):",
              describe_objects(self._graph_view, unmatched,
                               checkpoint.object_map)))
    return self

  def _unmatched_objects(self):
    bound = identity_containers.ObjectIdentitySet(
        self._checkpoint.bound_objects.values())
    return [
        obj for obj in objects_with_values(self._checkpoint.seen_objects)
        if obj not in bound
    ]

  def assert_nontrivial_match(self) -> "CheckpointLoadStatus":
    """Asserts that something besides the root object matched."""
    self._checkpoint.raise_mismatch()
    for obj in self._graph_view.list_objects(
        skip_slot_variables=self._checkpoint.skip_slot_variables):
      self._checkpoint.see(obj)
    if len(self._checkpoint.bound_objects) <= 1:
      unmatched = self._unmatched_objects()
      if unmatched:
        raise AssertionError(
            restore_report.listing(
                "Nothing except the root object matched a checkpointed value. "
                "Typically this means that the checkpoint does not match the "
                f"Python program: checkpoint {self._save_path!r} probably comes "
                "from another program. Objects without a checkpointed value:",
                describe_objects(self._graph_view, unmatched)))
      raise AssertionError(
          "Nothing to load. No dependencies have been added to "
          f"{self._graph_view.root} yet.")
    return self

  def run_restore_ops(self, session: Session = None) -> None:
    """Runs the restore ops created so far (graph mode).

    Raises:
      NotFoundError, InvalidArgumentError, ValueError: If a value of an
        object created after `restore()` does not fit it; nothing runs.
    """
    if context.executing_eagerly():
      return
    self._checkpoint.raise_mismatch()
    session = sessions.default_session(session, "run restore ops")
    try:
      self._run_restore_ops(session)
    except (errors.DataLossError, errors.OutOfRangeError) as e:
      raise named_restores.damage_named(self._checkpoint.values.save_path,
                                        e) from e

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

  def initialize_or_restore(self, session: Session = None) -> None:
    """Restores matched objects and initializes the others (graph mode).

    Objects restored by this or a later `restore()` are not initialized.
    """
    if context.executing_eagerly():
      return
    session = sessions.default_session(session, "initialize or restore")
    restore_uid = self._checkpoint.restore_uid
    bound = identity_containers.ObjectIdentitySet(
        self._checkpoint.bound_objects.values())
    initializers = [
        obj.initializer
        for obj in self._graph_view.list_objects()
        if hasattr(obj, "initializer") and obj not in bound and
        tensorflow_internals.last_restore_or(obj, restore_uid - 1) < restore_uid
    ]
    self.run_restore_ops(session=session)
    session.run(initializers)

  def expect_partial(self) -> "CheckpointLoadStatus":
    self._checkpoint.expect_partial = True
    return self

  def stream_restore_ops(self, session: Session = None) -> None:
    """Runs the restore ops in `session` now, and each later one as it is
    created (graph mode; see `streaming_restore`)."""
    if context.executing_eagerly():
      return
    session = sessions.default_session(session, "stream restore ops")
    self.run_restore_ops(session=session)
    feed_dict = self._feed_dict
    self._checkpoint.run_new_restore_ops_with(
        lambda new_ops: session.run(new_ops, feed_dict=feed_dict))


_NO_CHECKPOINT = ("No checkpoint specified (save_path=None); nothing is "
                  "being restored.")


class InitializationOnlyStatus(LoadStatus):
  """The status of `restore(None)`: there is nothing to restore.

  Its assertions always fail; `initialize_or_restore` initializes the
  variables (graph mode).
  """

  def __init__(self, graph_view, restore_uid):
    self._graph_view = graph_view
    self._restore_uid = restore_uid
    self._root = graph_view.root

  def assert_consumed(self) -> "InitializationOnlyStatus":
    raise AssertionError(_NO_CHECKPOINT)

  def assert_existing_objects_matched(self) -> "InitializationOnlyStatus":
    raise AssertionError(_NO_CHECKPOINT)

  def assert_nontrivial_match(self) -> "InitializationOnlyStatus":
    raise AssertionError(_NO_CHECKPOINT)

  def run_restore_ops(self, session: Session = None) -> None:
    raise AssertionError(
        "No checkpoint specified, so no restore ops are available "
        "(save_path=None to Saver.restore).")

  def report(self) -> restore_report.RestoreReport:
    """Nothing restored: every object with state is without a value."""
    objects = objects_with_values(self._graph_view.list_objects())
    return restore_report.RestoreReport(
        None, (), (), tuple(describe_objects(self._graph_view, objects)))

  def initialize_or_restore(self, session: Session = None) -> None:
    """Runs the initializers of objects not restored by a later restore."""
    if context.executing_eagerly():
      return
    initializers = [
        obj.initializer
        for obj in self._graph_view.list_objects()
        if getattr(obj, "initializer", None) is not None and
        tensorflow_internals.last_restore_or(obj, self._restore_uid -
                                             1) < self._restore_uid
    ]
    sessions.default_session(session, "initialize").run(initializers)
