"""Object-based saving and restoring: `Checkpoint`, `CheckpointV1` and friends.

`TrackableSaver` writes the object graph of a root trackable together with
its values, and restores a checkpoint by walking the checkpointed object
graph (`restore`). A restore returns a load status (`load_status`) to check
how well the checkpoint matched the program and, when graph building, to run
the restore ops. Checkpoints without an object graph (written by the v1
name-based `Saver`) are restored by variable names instead (`name_based`).
"""

import contextlib
import copy
import gc
import inspect
import os
import weakref

from tensorflow.python.checkpoint import checkpoint as tf_checkpoint_lib
from tensorflow.python.checkpoint import checkpoint_options
from tensorflow.python.client import session as session_lib
from tensorflow.python.eager import context
from tensorflow.python.eager import def_function
from tensorflow.python.framework import constant_op
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor_shape
from tensorflow.python.framework import tensor_util
from tensorflow.python.lib.io import file_io
from tensorflow.python.ops import array_ops
from tensorflow.python.ops import variable_scope
from tensorflow.python.ops import variable_v1
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.trackable import data_structures as tf_data_structures
from tensorflow.python.util import compat

from tf_objckpt import async_checkpoint
from tf_objckpt import base
from tf_objckpt import checkpoint_management
from tf_objckpt import commit
from tf_objckpt import data_structures
from tf_objckpt import functional_saver
from tf_objckpt import graph_view as graph_view_lib
from tf_objckpt import load_status
from tf_objckpt import name_based
from tf_objckpt import object_graph_check
from tf_objckpt import restore
from tf_objckpt import restore_coordinator
from tf_objckpt import sharding
from tf_objckpt import tf_compat
from tf_objckpt import tracking
from tf_objckpt import transfer_log
# Re-exported: the load statuses are part of this module's API, as in
# TensorFlow.
from tf_objckpt.load_status import CheckpointLoadStatus  # pylint: disable=unused-import
from tf_objckpt.load_status import InitializationOnlyStatus  # pylint: disable=unused-import
from tf_objckpt.load_status import NameBasedSaverStatus  # pylint: disable=unused-import
from tf_objckpt.load_status import streaming_restore  # pylint: disable=unused-import


def _new_resource_variable(name, shape, dtype, initializer=None,
                           partition_info=None, **kwargs):
  """Creates a resource variable, never reusing one (unlike get_variable)."""
  dtype = dtypes.as_dtype(dtype)
  shape_object = tensor_shape.as_shape(shape)
  if (type(initializer) is tf_base.CheckpointInitialValueCallable and  # pylint: disable=unidiomatic-typecheck
      isinstance(initializer.checkpoint_position, restore.CheckpointPosition)):
    # Our value, queued by a TensorFlow owner: check it as ours checks.
    initializer.checkpoint_position.check_initial_value(shape, dtype)
  with ops.init_scope():
    if initializer is None:
      store = variable_scope._get_default_variable_store()  # pylint: disable=protected-access
      initializer, from_value = store._get_default_initializer(  # pylint: disable=protected-access
          name=name, shape=shape_object, dtype=dtype)
    else:
      from_value = not callable(initializer)
    if from_value:
      if shape is not None:
        raise ValueError(
            f"Variable {name!r} was given both a constant initializer and a "
            "shape. If initializer is a constant, do not specify shape.")
      initial_value = initializer
    else:
      if inspect.isclass(initializer):  # An initializer class: make one.
        initializer = initializer(dtype=dtype)

      shape_list = None if shape is None else shape_object.as_list()
      kwargs_for_initializer = {"dtype": dtype}
      if "partition_info" in inspect.signature(initializer).parameters:
        kwargs_for_initializer["partition_info"] = partition_info

      def initial_value():
        return initializer(shape_list, **kwargs_for_initializer)

    # A full shape is passed on so that a restored initial value of another
    # shape is an error rather than a variable of the wrong shape.
    if shape is not None and shape_object.is_fully_defined():
      kwargs["shape"] = shape_object
    return variable_v1.VariableV1(initial_value=initial_value, name=name,
                                dtype=dtype.base_dtype, use_resource=True,
                                **kwargs)


# TensorFlow's session lookup, shared: tf_keras registers its provider there.
get_session = tf_checkpoint_lib.get_session
register_session_provider = tf_checkpoint_lib.register_session_provider


class ObjectGraphProtoPrettyPrinter:
  """Names the nodes of a `TrackableObjectGraph` as messages name objects.

  `node_names[node_id]` is "(root).model.kernel", or for a slot variable
  "(root).optimizer's state 'm' for (root).model.kernel". Built on first
  use.
  """

  def __init__(self, object_graph_proto):
    self._object_graph_proto = object_graph_proto
    self._node_names = None

  @property
  def node_names(self):
    """`{node id: name}` of the nodes reachable from the root."""
    if self._node_names is None:
      paths = object_graph_check.NodePaths(self._object_graph_proto)
      names = (paths[node_id] for node_id in range(len(paths)))
      self._node_names = {node_id: name for node_id, name in enumerate(names)
                          if not name.startswith("<unreachable")}
    return self._node_names


def add_variable(trackable, name, shape=None, dtype=dtypes.float32,
                 initializer=None, trainable=True):
  """Creates a variable tracked by `trackable` as `name`.

  Variable scopes do not influence it. If a restore is waiting for `name`,
  the variable starts with the checkpointed value and `initializer` is never
  called.
  """
  add_tracked = trackable._add_variable_with_custom_getter  # pylint: disable=protected-access
  return add_tracked(name=name, shape=shape, dtype=dtype,
                     initializer=initializer, getter=_new_resource_variable,
                     trainable=trainable)


def object_metadata(save_path):
  """Returns the parsed `TrackableObjectGraph` of a checkpoint.

  Raises:
    ValueError: If the checkpoint is name-based (has no object graph).
  """
  proto = functional_saver.read_object_graph(
      functional_saver.open_reader(save_path), save_path)
  if proto is None:
    raise ValueError(
        f"The specified checkpoint \"{save_path}\" does not appear to be "
        f"object-based (saved with TF2) since it is missing the key "
        f"\"{base.OBJECT_GRAPH_PROTO_KEY}\": it has no object graph, so it "
        "was probably written by a name-based (TF1) Saver.")
  return proto


def list_objects(root_trackable):
  """Every object saved with `root_trackable`, slot variables included."""
  view = graph_view_lib.ObjectGraphView(root_trackable)
  return view.list_objects()


def gather_initializers(root_trackable):
  """The initializers of every object saved with `root_trackable`."""
  return [obj.initializer for obj in list_objects(root_trackable)
          if getattr(obj, "initializer", None) is not None]


@contextlib.contextmanager
def capture_dependencies(template):
  """Tracks variables created in this scope as dependencies of `template`.

  Needs `template.variable_scope` to be active. A variable is tracked under
  its name relative to the template's scope; a nested template that
  captures its own variables becomes a dependency instead of them.
  """
  scope = template.variable_scope.name
  # Passed down to creators below this one, so that a nested template's
  # creator can tell this template to track it.
  this_template = (template, scope)

  def relative(name):
    return name[len(scope) + 1:]

  def creator(next_creator, name, initial_value, trackable_parent=None,
              **kwargs):
    kwargs["trackable_parent"] = this_template
    if name is None or not name.startswith(scope):
      return next_creator(name=name, initial_value=initial_value, **kwargs)
    if trackable_parent:  # Created in a nested template: track that one.
      nested, nested_scope = trackable_parent
      template._track_trackable(nested, name=relative(nested_scope),  # pylint: disable=protected-access
                                overwrite=True)
      return next_creator(name=name, initial_value=initial_value, **kwargs)

    def create_with_full_name(initializer, **inner_kwargs):
      inner_kwargs.pop("name")  # The scope-relative name; keep the full one.
      return next_creator(initial_value=initializer, name=name,
                          **inner_kwargs)

    add_tracked = template._add_variable_with_custom_getter  # pylint: disable=protected-access
    return add_tracked(initializer=initial_value, name=relative(name),
                       getter=create_with_full_name, overwrite=True,
                       **kwargs)

  with variable_scope.variable_creator_scope(creator):
    yield


@contextlib.contextmanager
def _garbage_collection_paused():
  """Pauses Python's cyclic garbage collector for one save or restore.

  A save or restore allocates a few small objects per variable; with the
  collector on, those allocations trigger full collections that walk the
  whole (large) TensorFlow heap, which costs more than the save itself.
  Nothing here creates reference cycles worth collecting early.
  """
  was_enabled = gc.isenabled()
  gc.disable()
  try:
    yield
  finally:
    if was_enabled:
      gc.enable()


class CheckpointOptions(checkpoint_options.CheckpointOptions):
  """`tf.train.CheckpointOptions`, with durable saves.

  With `durable=True`, a save flushes the checkpoint's files and directory
  to disk (fsync) before the state file lists it, and the state file
  before older checkpoints are deleted, so that a power loss cannot leave
  a listed checkpoint unreadable. Only for local paths: elsewhere the save
  raises `UnimplementedError` before writing anything. Accepted wherever
  TensorFlow's options are; TensorFlow's classes ignore `durable`.

  `assignment_map` maps names of a name-based (v1 `Saver`) checkpoint to the
  program's, as for `tf.compat.v1.train.init_from_checkpoint`, for names
  not matched otherwise (see `name_matching`).
  """

  __slots__ = ("durable", "assignment_map")

  def __init__(self, *args, durable=False, assignment_map=None, **kwargs):
    tf_compat.check_options_arguments(kwargs)
    super().__init__(*args, **kwargs)
    self.durable = durable
    self.assignment_map = assignment_map


class _SessionWithFeedDictAdditions(session_lib.SessionInterface):
  """A session wrapper that adds fixed feeds to every `run`."""

  def __init__(self, session, feed_additions):
    self._wrapped_session = session
    self._feed_additions = feed_additions

  def run(self, fetches, feed_dict=None, **kwargs):
    feed_dict = dict(feed_dict or {})
    feed_dict.update(self._feed_additions)
    return self._wrapped_session.run(fetches=fetches, feed_dict=feed_dict,
                                     **kwargs)


class TrackableSaver:
  """Saves and restores a root trackable and everything it depends on.

  Values are matched to objects by their paths of local names, so
  checkpoints survive renaming variables and moving code. When graph
  building, the save op is built once and rebuilt only if the object graph
  changes; the path, the object graph and Python state are fed, and restore
  ops are cached per checkpoint key, so repeated calls add no ops.

  Holds nothing that keeps the root's objects alive (see `ObjectGraphView`).
  """

  def __init__(self, graph_view):
    """Configures saving for `graph_view`'s root.

    Created while graph building, the saver keeps each object's saveables
    (in the view), so that its saves and restores reuse their ops.
    """
    if not context.executing_eagerly():
      graph_view.cache_saveables()
    self._graph_view = graph_view
    self._restore_path_tensor = None  # Fed with the path (graph mode).
    self._save_feeds = None  # (path tensor, object graph tensor), fed.
    self._last_save_key = None
    self._save_path_tensor = None  # The cached save's result.
    self._restore_op_cache = restore_coordinator.RestoreOpCache()

  def __deepcopy__(self, memo):
    """A saver of the copy of the root; ops and caches are not copied."""
    copied = TrackableSaver.__new__(TrackableSaver)
    memo[id(self)] = copied
    copied.__init__(copy.deepcopy(self._graph_view, memo))
    return copied

  def _gather_saveables(self, object_graph_tensor=None):
    """The saveables to write, the object graph's included."""
    saveables, graph_proto, feed_additions = (
        self._graph_view.serialize_object_graph())
    serialized = graph_proto.SerializeToString()
    if object_graph_tensor is not None:
      feed_additions[object_graph_tensor] = serialized
    else:
      with ops.device("/cpu:0"):
        object_graph_tensor = constant_op.constant(serialized)
    saveables.append(base.NoRestoreSaveable(
        tensor=object_graph_tensor, name=base.OBJECT_GRAPH_PROTO_KEY))
    return saveables, serialized, feed_additions

  def _save_cached_when_graph_building(self, file_prefix, object_graph_tensor,
                                       options, in_place=True):
    """Builds the save op, or reuses it while the object graph is unchanged.

    Args:
      file_prefix: The path prefix, a string tensor.
      object_graph_tensor: The tensor fed with the object graph (graph
        mode, with a session), or None.
      options: Optional `tf.train.CheckpointOptions`.
      in_place: False if the prefix's directory was not created here (the
        prefix is a tensor): a missing directory then fails the save, as in
        TensorFlow, rather than being made by an in-place write.

    Returns:
      (the path tensor, evaluating to `file_prefix` once written; the feed
      dict to run it with).
    """
    saveables, serialized_graph, feed_additions = self._gather_saveables(
        object_graph_tensor=object_graph_tensor)
    cache_key = (serialized_graph, functional_saver.io_device(options),
                 sharding.callback_key(options), in_place)
    if (self._last_save_key != cache_key or
        context.executing_eagerly() or ops.inside_function()):
      with ops.device("/cpu:0"):
        save_op = functional_saver.Saver(saveables).save(
            file_prefix, options, in_place=in_place)
        self._save_path_tensor = file_prefix
        if save_op is not None:  # Graph building: the path, once written.
          with ops.control_dependencies([save_op]):
            self._save_path_tensor = array_ops.identity(file_prefix)
      self._last_save_key = cache_key
    return self._save_path_tensor, feed_additions

  def _feed_tensors(self):
    """The graph-mode tensors fed with the file prefix and object graph."""
    if self._save_feeds is None:
      with ops.device("/cpu:0"):
        self._save_feeds = (constant_op.constant(b""),
                            constant_op.constant(b""))
    return self._save_feeds

  def build_save_ops(self, options=None):
    """Builds the graph-mode save ops now, without running them.

    A session sends its whole graph again at each run that finds new ops,
    so building everything a first save needs before running anything
    saves that cost.
    """
    with _garbage_collection_paused():
      self._save_cached_when_graph_building(*self._feed_tensors(), options)

  def save(self, file_prefix, checkpoint_number=None, session=None,
           options=None):
    """Writes a checkpoint of the root and its dependencies.

    Args:
      file_prefix: The path prefix of the checkpoint files.
      checkpoint_number: If given, appended to the prefix as "-N".
      session: The session to run the save in when graph building (default:
        the default session). Ignored eagerly.
      options: Optional `tf.train.CheckpointOptions`.

    Returns:
      The checkpoint path (a tensor inside a `tf.function`).

    Raises:
      RuntimeError: When graph building without a session to run in.
    """
    prefix, base = file_prefix, None
    if checkpoint_number:
      prefix, base = f"{file_prefix}-{checkpoint_number:d}", file_prefix
    started = transfer_log.start()
    with _garbage_collection_paused(), commit.saving(
        prefix, base=base, make_directory=True):
      path = self._save(file_prefix, checkpoint_number, session, options)
    transfer_log.saved(prefix, started)
    return path

  def _save(self, file_prefix, checkpoint_number, session, options):
    use_session = (not context.executing_eagerly() and
                   not ops.inside_function())
    if checkpoint_number:
      file_prefix = f"{file_prefix}-{checkpoint_number:d}"
    feed_dict = {}
    if use_session:
      session = load_status.default_session(
          session, f"save checkpoint to {file_prefix!r}")
      file_prefix_tensor, object_graph_tensor = self._feed_tensors()
      feed_dict[file_prefix_tensor] = file_prefix
    else:
      with ops.device("/cpu:0"):
        file_prefix_tensor = ops.convert_to_tensor(file_prefix,
                                                   dtype=dtypes.string)
      object_graph_tensor = None
    prefix_is_tensor = tensor_util.is_tf_type(file_prefix)
    if not prefix_is_tensor:
      file_io.recursive_create_dir(os.path.dirname(file_prefix))
    save_path, feed_additions = self._save_cached_when_graph_building(
        file_prefix_tensor, object_graph_tensor, options,
        in_place=not prefix_is_tensor)
    feed_dict.update(feed_additions)
    return session.run(save_path, feed_dict) if use_session else save_path

  def snapshot(self):
    """What a save would write now, read off the objects (eagerly).

    Returns:
      An `async_checkpoint.Snapshot`, to write later from any thread.
    """
    with _garbage_collection_paused():
      saveables, _, _ = self._gather_saveables()
      return async_checkpoint.Snapshot(saveables)

  def restore(self, save_path, options=None):
    """Restores a checkpoint into the root and its dependencies.

    Existing objects are restored now (eagerly) or get restore ops (graph
    building); objects added later are restored when they are tracked.
    Checkpoints without an object graph are restored by variable names.

    Args:
      save_path: A checkpoint path, or None to only initialize.
      options: Optional `tf.train.CheckpointOptions`.

    Returns:
      A `CheckpointLoadStatus`, `NameBasedSaverStatus`, or, for None, an
      `InitializationOnlyStatus`.
    """
    if save_path is None:
      return load_status.InitializationOnlyStatus(self._graph_view,
                                                  restore_uid=ops.uid())
    save_path = compat.as_str(os.fspath(save_path))
    started = transfer_log.start()
    with _garbage_collection_paused():
      status = self._restore(save_path, options)
    transfer_log.restored_status(save_path, started, status)
    return status

  def _restore(self, save_path, options):
    with checkpoint_management.explaining_directories(save_path):
      reader = functional_saver.open_reader(save_path)
    object_graph_proto = functional_saver.read_object_graph(reader, save_path)
    if object_graph_proto is None:
      return name_based.restore_by_names(
          save_path, reader, self._graph_view,
          getattr(options, "assignment_map", None))
    feed_dict = None
    if context.executing_eagerly():
      with ops.device("/cpu:0"):
        path_tensor = constant_op.constant(save_path)
    else:
      if self._restore_path_tensor is None:
        with ops.device("/cpu:0"):
          self._restore_path_tensor = constant_op.constant(b"")
      path_tensor = self._restore_path_tensor
      feed_dict = {path_tensor: save_path}
    values = functional_saver.CheckpointValues(save_path, reader,
                                               path_tensor, options)
    object_graph_check.check_object_graph(object_graph_proto, save_path,
                                          values.shapes)
    checkpoint = restore_coordinator.CheckpointRestoreCoordinator(
        object_graph_proto=object_graph_proto, values=values,
        restore_op_cache=self._restore_op_cache,
        graph_view=self._graph_view, options=options)
    restore.CheckpointPosition(checkpoint, 0).restore(self._graph_view.root)
    self._restore_attached_dependencies(checkpoint)
    checkpoint.raise_mismatch()
    if not context.executing_eagerly():
      checkpoint.group_built_restore_ops()
    return load_status.CheckpointLoadStatus(checkpoint, feed_dict=feed_dict,
                                            graph_view=self._graph_view)

  def _restore_attached_dependencies(self, checkpoint):
    """Restores objects attached to the root without being its dependencies."""
    root_children = {child.local_name: child.node_id for child
                     in checkpoint.object_graph_proto.nodes[0].children}
    for reference in self._graph_view.attached_dependencies:
      node_id = root_children.get(reference.name)
      if (reference.name != "root" and node_id is not None and
          node_id not in checkpoint.objects_by_node_id):
        restore.CheckpointPosition(checkpoint, node_id).restore(reference.ref)


def frozen_saver(root_trackable):
  """A saver of `root_trackable`'s objects as they are now.

  Later structural changes are not seen; restoring needs a checkpoint with
  exactly this object graph. Its checkpoints are ordinary object-based
  checkpoints.
  """
  return functional_saver.Saver(
      graph_view_lib.ObjectGraphView(root_trackable).frozen_saveable_objects())


def saver_with_op_caching(obj):
  """A `TrackableSaver` for `obj` that caches saveables when graph building."""
  return TrackableSaver(graph_view_lib.ObjectGraphView(obj))


def _check_trackable(name, value, accept_weak_references):
  """Returns `value` (dereferenced if a weak reference) if it is trackable.

  Raises:
    ValueError: If it is not.
  """
  if accept_weak_references and isinstance(value, weakref.ref):
    value = value()
  if not isinstance(value, (tf_base.Trackable, def_function.Function)):
    # TensorFlow's phrases: `CheckpointV1` (no weak references) does not
    # name the argument.
    expecting = (f"{name} to be a trackable object" if accept_weak_references
                 else "a trackable object")
    raise ValueError(
        f"`Checkpoint` was expecting {expecting} (an object derived from "
        f"`Trackable`), got {value!r} of type {type(value).__name__}, for "
        f"{name!r}. Only trackable objects (variables, modules, layers, "
        "optimizers, ...) can be checkpointed.")
  return value


def _assign_trackable_arguments(checkpoint, kwargs):
  """Assigns `kwargs` as attributes of `checkpoint`, requiring trackables.

  Returns:
    `{name: trackable}` in name order, weak references dereferenced.

  Raises:
    ValueError: If a value is not trackable.
  """
  assigned = {}
  for name, value in sorted(kwargs.items(), key=lambda item: item[0]):
    if isinstance(value, tf_data_structures.NoDependency):
      value = value.value  # Tracked all the same, as TensorFlow does.
    setattr(checkpoint, name, value)
    assigned[name] = _check_trackable(
        name, getattr(checkpoint, name),
        accept_weak_references=checkpoint._ACCEPTS_WEAK_REFERENCES)  # pylint: disable=protected-access
  return assigned


class _CheckpointBase(tracking.AutoTrackable):
  """What `Checkpoint` and `CheckpointV1` share: objects and a save counter."""

  # Whether arguments may be weak references to trackables.
  _ACCEPTS_WEAK_REFERENCES = False
  # Whether the asynchronous option is honoured (TensorFlow's `CheckpointV1`
  # saves synchronously).
  _ASYNC_SAVES = False

  def __init__(self, **kwargs):
    super().__init__()
    _assign_trackable_arguments(self, kwargs)
    self._save_counter = None  # Created lazily, for restore-on-create.
    self._save_assign_op = None
    self._saver = saver_with_op_caching(self)

  def _maybe_create_save_counter(self):
    if self._save_counter is None:
      with ops.device("/cpu:0"):
        self._save_counter = data_structures.NoDependency(add_variable(
            self, name="save_counter", initializer=0, dtype=dtypes.int64,
            trainable=False))
      self._attach_save_counter()

  def _attach_save_counter(self):
    """Hook for `Checkpoint(root=...)`, whose save counter is attached."""

  @property
  def save_counter(self):
    """An int64 variable counting saves; numbers the checkpoints."""
    self._maybe_create_save_counter()
    return self._save_counter

  @functional_saver.one_save_at_a_time
  def _write(self, file_prefix, session=None, options=None,
             numbered_from=None):
    """Writes a checkpoint, then runs the options' write callbacks.

    If anything fails, callbacks included, the files written are removed
    (see `commit.saving`). Durable writes are flushed to disk before the
    callbacks run. Asynchronous writes (`Checkpoint`, eagerly) return once
    the values are read; the rest runs in the background.

    Args:
      file_prefix: Where to write.
      session: The session to run a graph-mode save in.
      options: Optional `tf.train.CheckpointOptions`.
      numbered_from: For `save()`, the prefix `file_prefix` is numbered
        from: leftovers of its other saves are cleaned up too (see
        `commit.saving`), and the state file's temporary files.

    Returns:
      The path written.
    """
    self._finish_pending_write()
    file_prefix = _as_path(file_prefix)
    if getattr(options, "durable", False):
      commit.check_durable(file_prefix)
    if self._writes_in_background(options):
      snapshot = self._saver.snapshot()
      if tensor_util.is_tf_type(file_prefix):
        file_prefix = file_prefix.numpy()
      file_prefix = compat.as_str(file_prefix)
      self._async_writer().start(lambda: self._commit_write(
          file_prefix, snapshot.write, options, numbered_from))
      return file_prefix

    def write_now(prefix, options):
      return self._saver.save(file_prefix=prefix, session=session,
                              options=options)

    return self._commit_write(file_prefix, write_now, options, numbered_from)

  def _commit_write(self, file_prefix, write, options, numbered_from):
    """Runs `write(file_prefix, options)` and the callbacks as one save."""
    state_file = numbered_from and checkpoint_management.STATE_FILENAME
    with commit.saving(file_prefix, base=numbered_from, state_file=state_file,
                       make_directory=True) as save:
      output = write(file_prefix, options)
      if tensor_util.is_tf_type(output):
        if not context.executing_eagerly():
          return output  # Inside a function: the path is a tensor.
        output = output.numpy()
      output = compat.as_str(output)
      if getattr(options, "durable", False):
        save.sync()
      _run_write_callbacks(options, output)
      return output

  def _writes_in_background(self, options):
    """Whether this save is asynchronous; graph building, never (warned)."""
    if not (self._ASYNC_SAVES and async_checkpoint.requested(options)):
      return False
    if context.executing_eagerly():
      return True
    logging.warning("Saving async checkpoint in graph mode is currently not "
                    "supported; switching to regular sync checkpoint instead "
                    "(asynchronous saves are for eager execution).")
    return False

  def _async_writer(self):
    """This checkpoint's background writer, created on first use."""
    if getattr(self, "_pending_writes", None) is None:
      self._pending_writes = async_checkpoint.AsyncWriter()
    return self._pending_writes

  def _finish_pending_write(self):
    """Waits for a pending asynchronous write; raises its error, if any."""
    writer = getattr(self, "_pending_writes", None)
    if writer is not None:
      writer.sync()

  @functional_saver.one_save_at_a_time
  def _save(self, file_prefix, session=None, options=None):
    """Increments the save counter, writes, and updates the state file."""
    self._finish_pending_write()
    file_prefix = _as_path(file_prefix)
    durable = getattr(options, "durable", False)
    if durable:
      commit.check_durable(file_prefix)
    graph_building = not context.executing_eagerly()
    if graph_building:
      if ops.inside_function():
        raise NotImplementedError(
            "Calling tf.train.Checkpoint.save() from a function is not "
            "supported, as save() modifies saving metadata in ways not "
            "supported by TensorFlow Operations. Consider using "
            "tf.train.Checkpoint.write(), a lower-level API which does not "
            "update metadata. tf.train.latest_checkpoint and related APIs will "
            "not see this checkpoint.")
      session = load_status.default_session(
          session, f"save checkpoint to {file_prefix!r}")
      new_counter = self._save_counter is None
    if graph_building:
      if self._save_assign_op is None:  # Built once, then run at each save.
        self._save_assign_op = data_structures.NoDependency(
            self._increment_save_counter())
        self._saver.build_save_ops(options)
      if new_counter:
        session.run(self.save_counter.initializer)
      count = session.run(self._save_assign_op)
    else:
      count = self._increment_save_counter().numpy()

    def update_checkpoint_state(save_path):
      record_latest = checkpoint_management.update_checkpoint_state_internal
      record_latest(save_dir=os.path.dirname(file_prefix),
                    model_checkpoint_path=save_path,
                    all_model_checkpoint_paths=[save_path],
                    save_relative_paths=True, durable=durable)

    options = checkpoint_management.with_write_callback(
        options, update_checkpoint_state)
    return self._write(f"{file_prefix}-{count:d}", session=session,
                       options=options, numbered_from=file_prefix)

  def _increment_save_counter(self):
    """Adds one to the save counter; returns the new count (or its op)."""
    with ops.colocate_with(self.save_counter):
      return self.save_counter.assign_add(1, read_value=True)

  def _restore(self, save_path, options=None):
    """Restores the objects and the save counter.

    The save counter is created first, so that every restore, the first
    included, finds the same objects (and, graph building, the same restore
    ops to run together). A pending asynchronous write finishes first.
    """
    self._finish_pending_write()
    self._maybe_create_save_counter()
    status = self._saver.restore(save_path=save_path, options=options)
    if isinstance(status, load_status.NameBasedSaverStatus):
      status.add_to_optionally_restored(self.save_counter)
    return status


def _as_path(file_prefix):
  """A path-like prefix as a string; strings and tensors unchanged."""
  if isinstance(file_prefix, os.PathLike):
    return os.fspath(file_prefix)
  return file_prefix


def _run_write_callbacks(options, save_path):
  """Calls each write callback of `options`, with the path if it takes one.

  Raises:
    AssertionError: If a callback takes more than one argument.
  """
  for callback in getattr(options, "experimental_write_callbacks", None) or ():
    num_parameters = len(inspect.signature(callback).parameters)
    if num_parameters == 0:
      callback()
    elif num_parameters == 1:
      callback(save_path)
    else:
      raise AssertionError(
          "Checkpoint write callbacks must take 0 or 1 arguments (the "
          f"checkpoint path); {callback} takes {num_parameters}.")


class CheckpointV1(_CheckpointBase):
  """Groups trackable objects for saving and restoring (TF1 API).

  Like `Checkpoint`, but `save`, `write` and `restore` work when graph
  building too: they run in `session` (default: the default session), and
  restores return restore ops to run with `run_restore_ops` or
  `initialize_or_restore`.
  """

  def write(self, file_prefix, session=None, options=None):
    """Writes a checkpoint at `file_prefix`, without numbering or state."""
    return self._write(file_prefix, session=session, options=options)

  def save(self, file_prefix, session=None, options=None):
    """Writes "<file_prefix>-<save_counter>" and updates `latest_checkpoint`."""
    return self._save(file_prefix, session=session, options=options)

  def restore(self, save_path, options=None):
    """Restores from `save_path`; returns a load status."""
    return self._restore(save_path, options=options)


class Checkpoint(_CheckpointBase):
  """Groups trackable objects for saving and restoring (TF2 API).

  Keyword arguments become dependencies under their names:

    checkpoint = Checkpoint(model=model, optimizer=optimizer)
    path = checkpoint.save("/tmp/training/ckpt")
    checkpoint.restore(path).assert_consumed()

  Restoring before variables exist restores them when they are created.
  With `root=obj`, `obj` itself is the root of the saved object graph and
  the other arguments (and the save counter) are attached to it.
  """

  _ACCEPTS_WEAK_REFERENCES = True
  _ASYNC_SAVES = True

  def __init__(self, root=None, **kwargs):
    if root is None:
      self._attached_dependencies = None
      super().__init__(**kwargs)
      return
    tracking.AutoTrackable.__init__(self)  # pylint: disable=non-parent-init-called
    self._root = root
    root_object = _check_trackable("root", root, accept_weak_references=True)
    root_object._maybe_initialize_trackable()  # pylint: disable=protected-access
    kwargs["root"] = root
    # Held weakly by the graph view (this checkpoint holds them), so that
    # restores deferred in the root do not form cycles through them.
    attached = []
    for name, value in _assign_trackable_arguments(self, kwargs).items():
      existing = root_object._lookup_dependency(name)  # pylint: disable=protected-access
      if existing is None:
        attached.append(graph_view_lib.WeakTrackableReference(name, value))
      elif existing is not value:
        raise ValueError(
            f"Cannot create a Checkpoint with keyword argument {name} if "
            f"root.{name} already exists.")
    self._attached_dependencies = data_structures.NoDependency(attached)
    existing_counter = root_object._lookup_dependency("save_counter")  # pylint: disable=protected-access
    self._save_counter = data_structures.NoDependency(existing_counter)
    self._save_assign_op = None
    self._saver = TrackableSaver(graph_view_lib.ObjectGraphView(
        root, attached_dependencies=attached))

  def _attach_save_counter(self):
    if self._attached_dependencies is None:
      return
    # Held strongly, unlike the other attached objects: a load status may
    # outlive this checkpoint, and still finds the counter through the view.
    self._attached_dependencies.append(
        base.TrackableReference("save_counter", self._save_counter))
    root = self._saver._graph_view.root  # pylint: disable=protected-access
    waiting = root._deferred_dependencies.pop("save_counter", ())  # pylint: disable=protected-access
    if waiting:
      waiting[0].restore(self._save_counter)

  def write(self, file_prefix, options=None):
    """Writes a checkpoint at `file_prefix`, without numbering or state."""
    return self._write(file_prefix, options=options)

  def save(self, file_prefix, options=None):
    """Writes "<file_prefix>-<save_counter>" and updates `latest_checkpoint`."""
    return self._save(file_prefix, options=options)

  def read(self, save_path, options=None):
    """Restores a checkpoint written by `write` (no save counter handling)."""
    self._finish_pending_write()
    return self._saver.restore(save_path=save_path, options=options)

  def restore(self, save_path, options=None):
    """Restores from `save_path` (a checkpoint or a SavedModel directory).

    Returns:
      A load status.
    """
    return self._restore(_saved_model_variables_path(save_path),
                         options=options)

  def sync(self):
    """Waits for the pending asynchronous write; raises its error, if any."""
    self._finish_pending_write()


def _saved_model_variables_path(save_path):
  """The checkpoint inside a SavedModel directory, else `save_path`."""
  if save_path is None:
    return None
  path = _as_path(save_path)
  if file_io.is_directory(path) and any(
      file_io.file_exists(os.path.join(path, name))
      for name in ("saved_model.pb", "saved_model.pbtxt")):
    return os.path.join(path, "variables", "variables")
  return save_path
