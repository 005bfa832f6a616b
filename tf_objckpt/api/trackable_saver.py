"""`TrackableSaver`: saves and restores the objects of one root trackable.

A save gathers the root's saveables and object graph (`graph_view`) and
writes them through the I/O engine (`multi_device_saver`): step 2 of a save
transaction (`save_transaction`, which `save` runs). A restore walks the
checkpointed object graph (`restore_walk`) and returns a load status
(`load_status`). Checkpoints without an object graph (the v1 name-based
`Saver`'s) are restored by variable names. `Checkpoint` and `CheckpointV1`
(`tf_objckpt.checkpoint`) are built on it.
"""

import contextlib
import copy
import gc
import numbers
import os
from typing import Any, Dict, Optional

from tensorflow.python.checkpoint import checkpoint_options
from tensorflow.python.client import session as session_lib
from tensorflow.python.eager import context
from tensorflow.python.framework import constant_op
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor_util
from tensorflow.python.lib.io import file_io
from tensorflow.python.ops import array_ops
from tensorflow.python.util import compat

from tf_objckpt.api import load_status
from tf_objckpt.api import name_based_status
from tf_objckpt.api import save_transaction
from tf_objckpt.api import sessions
from tf_objckpt.engine import async_checkpoint
from tf_objckpt.engine import multi_device_saver
from tf_objckpt.engine import checkpoint_opening
from tf_objckpt.engine import reads
from tf_objckpt.engine import sharding
from tf_objckpt.engine import state_file
from tf_objckpt.engine import tf_compat
from tf_objckpt.engine import transfer_log
from tf_objckpt.foundation import identity_containers as object_identity
from tf_objckpt.foundation.type_hints import CheckpointPath
from tf_objckpt.foundation.type_hints import Options
from tf_objckpt.foundation.type_hints import PathOrTensor
from tf_objckpt.foundation.type_hints import Session
from tf_objckpt.objects import graph_walk
from tf_objckpt.objects import trackable
from tf_objckpt.restoring import map_preview
from tf_objckpt.restoring import object_graph_check
from tf_objckpt.restoring import object_maps
from tf_objckpt.restoring import restore_coordinator
from tf_objckpt.restoring import restore_walk
from tf_objckpt.saveables import python_state_saveables


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

  `max_restore_memory` bounds the bytes of values a restore holds read at
  once: a restore of at most that many reads each value once, holds them
  until all are read and checked, then assigns; a larger one reads and
  assigns pieces of at most half of it (and at most 64 MiB). None, the
  default, takes half of the memory available when the restore starts
  (see `engine/restore_memory`).

  `object_map={NEW_PATH: CHECKPOINT_PATH}` restores the checkpoint's
  sub-tree at each CHECKPOINT_PATH into the program's object at NEW_PATH
  (object paths as `tf-objckpt inspect` prints them, "" for the root); a
  name-based checkpoint's variable scope ("bert/encoder/") into the
  variables below NEW_PATH. See `object_maps`.
  """

  __slots__ = ("durable", "assignment_map", "max_restore_memory", "object_map")

  def __init__(self,
               *args: Any,
               durable: bool = False,
               assignment_map: Optional[dict] = None,
               max_restore_memory: Optional[int] = None,
               object_map: Optional[Dict[str, str]] = None,
               **kwargs: Any) -> None:
    tf_compat.check_options_arguments(kwargs)
    super().__init__(*args, **kwargs)
    if max_restore_memory is not None and (
        isinstance(max_restore_memory, bool) or
        not isinstance(max_restore_memory, numbers.Integral) or
        max_restore_memory < 0):
      raise ValueError("`max_restore_memory` must be None or a number of "
                       f"bytes (an int >= 0), got {max_restore_memory!r}.")
    self.durable = durable
    self.assignment_map = assignment_map
    self.max_restore_memory = (None if max_restore_memory is None else
                               int(max_restore_memory))
    self.object_map = object_maps.normalized(object_map)


class _FeedingSession(session_lib.SessionInterface):
  """A session wrapper that adds fixed feeds to every `run`."""

  def __init__(self, session, feed_additions):
    self._wrapped_session = session
    self._feed_additions = feed_additions

  def run(self, fetches, feed_dict=None, **kwargs):
    feed_dict = dict(feed_dict or {})
    feed_dict.update(self._feed_additions)
    return self._wrapped_session.run(fetches=fetches,
                                     feed_dict=feed_dict,
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

  def __init__(self, graph_view: graph_walk.ObjectGraphView) -> None:
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
    self._built_for_next_write = None  # (options, build_save_ops' result)
    self._restore_op_cache = restore_coordinator.RestoreOpCache()

  @property
  def graph_view(self) -> graph_walk.ObjectGraphView:
    """The view of the objects this saver saves and restores."""
    return self._graph_view

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
    saveables.append(
        python_state_saveables.NoRestoreSaveable(
            tensor=_object_graph_tensor(serialized, object_graph_tensor,
                                        feed_additions),
            name=trackable.OBJECT_GRAPH_PROTO_KEY))
    return saveables, serialized, feed_additions

  def _gather_serialized_tensors(self, object_graph_tensor=None):
    """What a save writes, as TensorFlow's `TrackableSaver` gathers it.

    For code written against TensorFlow's (its sharding tests build
    `ShardableTensor`s from it); our saves gather saveables instead.

    Returns:
      A tuple (`{trackable: {checkpoint key: tensor, or {slice spec:
      tensor}}}`, with the object graph's tensor under the key None; the
      feed dict; `{}`, objects of registered savers being left out; the
      `TrackableObjectGraph`).
    """
    _, graph_proto, feed_additions = self._graph_view.serialize_object_graph()
    serialized = object_identity.ObjectIdentityDictionary()
    for obj, saveables in self._graph_view.saveables_by_object():
      tensors = {}
      for spec in (spec for saveable in saveables for spec in saveable.specs):
        if spec.slice_spec:
          tensors.setdefault(spec.name, {})[spec.slice_spec] = spec.tensor
        else:
          tensors[spec.name] = spec.tensor
      if tensors:
        serialized[obj] = tensors
    serialized[None] = {
        trackable.OBJECT_GRAPH_PROTO_KEY:
            _object_graph_tensor(graph_proto.SerializeToString(),
                                 object_graph_tensor, feed_additions)
    }
    return serialized, feed_additions, {}, graph_proto

  def _save_cached_when_graph_building(self,
                                       file_prefix,
                                       object_graph_tensor,
                                       options,
                                       in_place=True):
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
    cache_key = (serialized_graph, reads.io_device(options),
                 sharding.callback_key(options), in_place)
    if (self._last_save_key != cache_key or context.executing_eagerly() or
        ops.inside_function()):
      with ops.device("/cpu:0"):
        save_op = multi_device_saver.Saver(saveables).save(file_prefix,
                                                           options,
                                                           in_place=in_place)
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

    The next write with the same options runs what this built without
    gathering the objects again: nothing runs between the two that could
    change them.
    """
    with _garbage_collection_paused():
      self._built_for_next_write = (options,
                                    self._save_cached_when_graph_building(
                                        *self._feed_tensors(), options))

  def forget_built_save_ops(self) -> None:
    """The next write gathers the objects again (a save failed between)."""
    self._built_for_next_write = None

  def save(self,
           file_prefix: PathOrTensor,
           checkpoint_number: Optional[int] = None,
           session: Session = None,
           options: Options = None) -> PathOrTensor:
    """Writes a checkpoint of the root and its dependencies.

    One save transaction (`save_transaction`) that records no state and
    runs no write callbacks, as TensorFlow's `TrackableSaver.save`.

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
      prefix = save_transaction.numbered(file_prefix, checkpoint_number)
      base = file_prefix
    plan = save_transaction.SavePlan(prefix, base=base, make_directory=True)
    return save_transaction.SaveTransaction(plan).run(
        lambda save_path: self.write_shards(save_path, session, options))

  def write_shards(self, save_path, session=None, options=None):
    """Step 2 of a save: writes the root's objects at `save_path`.

    Gathers the saveables and the object graph and has the engine write
    them; graph building, runs the cached save op in `session`. Only the
    write: `save_transaction` runs it inside a whole save.

    Returns:
      The path: an eager tensor, the session's result, or a tensor inside
      a `tf.function`.

    Raises:
      RuntimeError: When graph building without a session to run in.
    """
    with _garbage_collection_paused():
      return self._write_shards(save_path, session, options)

  def _write_shards(self, save_path, session, options):
    use_session = (not context.executing_eagerly() and
                   not ops.inside_function())
    feed_dict = {}
    if use_session:
      session = sessions.default_session(session,
                                         f"save checkpoint to {save_path!r}")
      file_prefix, object_graph_tensor = self._feed_tensors()
      feed_dict = {file_prefix: save_path}
    else:
      with ops.device("/cpu:0"):
        file_prefix = ops.convert_to_tensor(save_path, dtype=dtypes.string)
      object_graph_tensor = None
    path_is_tensor = tensor_util.is_tf_type(save_path)
    if not path_is_tensor:  # A tensor's value is known only when run.
      directory = os.path.dirname(save_path)
      file_io.recursive_create_dir(directory)
    built, self._built_for_next_write = self._built_for_next_write, None
    if use_session and built is not None and built[0] is options:
      written, feed_additions = built[1]
    else:
      written, feed_additions = self._save_cached_when_graph_building(
          file_prefix,
          object_graph_tensor,
          options,
          in_place=not path_is_tensor)
    feed_dict.update(feed_additions)
    return session.run(written, feed_dict) if use_session else written

  def snapshot(self):
    """What a save would write now, read off the objects (eagerly).

    The plan of an asynchronous save (see `save_transaction`).

    Returns:
      An `async_checkpoint.Snapshot`, to write later from any thread.
    """
    with _garbage_collection_paused():
      saveables, _, _ = self._gather_saveables()
      return async_checkpoint.Snapshot(saveables)

  def restore(self,
              save_path: Optional[CheckpointPath],
              options: Options = None,
              check_values_first: bool = False) -> load_status.LoadStatus:
    """Restores a checkpoint into the root and its dependencies.

    Existing objects are restored now (eagerly) or get restore ops (graph
    building); objects added later are restored when they are tracked.
    Checkpoints without an object graph are restored by variable names.

    Args:
      save_path: A checkpoint path, or None to only initialize.
      options: Optional `tf.train.CheckpointOptions`.
      check_values_first: Read every value of the checkpoint before
        anything is assigned or any restore op is built, so that a damaged
        value raises first even if it would be read later (restore ops,
        restore-on-create). Eagerly this costs about nothing more.

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
      status = self._restore(save_path, options, check_values_first)
    transfer_log.restored_status(save_path, started, status)
    return status

  def preview_restore(self,
                      save_path: CheckpointPath,
                      options: Options = None) -> map_preview.RestorePreview:
    """What `restore(save_path, options)` would do, nothing assigned.

    See `map_preview.preview`.
    """
    return map_preview.preview(save_path, self._graph_view.root,
                               getattr(options, "object_map", None),
                               self._graph_view.attached_dependencies)

  def _restore(self, save_path, options, check_values_first=False):
    with state_file.explaining_directories(save_path):
      reader = checkpoint_opening.open_reader(save_path)
    object_graph_proto = checkpoint_opening.read_object_graph(reader, save_path)
    if object_graph_proto is None:
      checked = contextlib.nullcontext()
      if check_values_first:
        checked = reads.CheckpointValues(
            save_path, reader).every_value_read_first(keep_values=False)
      with checked:
        return name_based_status.restore_by_names(
            save_path, reader, self._graph_view,
            getattr(options, "assignment_map", None),
            object_maps.normalized(getattr(options, "object_map", None)))
    feed_dict = path_tensor = None
    if not context.executing_eagerly():
      if self._restore_path_tensor is None:
        with ops.device("/cpu:0"):
          self._restore_path_tensor = constant_op.constant(b"")
      path_tensor = self._restore_path_tensor
      feed_dict = {path_tensor: save_path}
    values = reads.CheckpointValues(save_path,
                                    reader,
                                    options,
                                    path_tensor=path_tensor)
    graph_index = object_graph_check.check_object_graph(object_graph_proto,
                                                        save_path,
                                                        values.shapes)
    checkpoint = restore_coordinator.CheckpointRestoreCoordinator(
        object_graph_proto=object_graph_proto,
        graph_index=graph_index,
        values=values,
        restore_op_cache=self._restore_op_cache,
        graph_view=self._graph_view,
        options=options)
    try:
      with (values.every_value_read_first()
            if check_values_first else contextlib.nullcontext()):
        restore_walk.restore_from_root(checkpoint, self._graph_view.root,
                                       self._graph_view.attached_dependencies)
      checkpoint.raise_mismatch()
    except BaseException:
      # The error tells what was not restored: no warning about unrestored
      # values follows when the restore is collected.
      checkpoint.expect_partial = True
      raise
    if not context.executing_eagerly():
      checkpoint.group_built_restore_ops()
    return load_status.CheckpointLoadStatus(checkpoint,
                                            feed_dict=feed_dict,
                                            graph_view=self._graph_view)


def _object_graph_tensor(serialized, object_graph_tensor, feed_additions):
  """The tensor holding the serialized object graph a save writes.

  `object_graph_tensor`, fed with it (added to `feed_additions`), or, if
  None, a constant of it.
  """
  if object_graph_tensor is not None:
    feed_additions[object_graph_tensor] = serialized
    return object_graph_tensor
  with ops.device("/cpu:0"):
    return constant_op.constant(serialized)


def frozen_saver(root_trackable: Any) -> multi_device_saver.Saver:
  """A saver of `root_trackable`'s objects as they are now.

  Later structural changes are not seen; restoring needs a checkpoint with
  exactly this object graph. Its checkpoints are ordinary object-based
  checkpoints.
  """
  return multi_device_saver.Saver(
      graph_walk.ObjectGraphView(root_trackable).frozen_saveable_objects())


def saver_with_op_caching(obj: Any) -> TrackableSaver:
  """A `TrackableSaver` for `obj` that caches saveables when graph building."""
  return TrackableSaver(graph_walk.ObjectGraphView(obj))
