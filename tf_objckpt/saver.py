# Copyright 2025 The tf_objckpt Authors. Licensed under the Apache License 2.0.
"""Name-based (TF1 style) checkpoints: the v1 `Saver` and meta graphs.

A name-based checkpoint maps variable names to tensors. This module writes
and reads such checkpoints exactly as `tf.compat.v1.train.Saver` does (same
graph structure, same `SaverDef` tensor names, same files on disk); the ops
come from its builders (`saver_builders`), the file ops from the I/O engine.
A save runs the `SaverDef`'s save op as step 2 of a save transaction
(`api.save_transaction`): numbered, cleaned up after a failure, recorded in
the state file.

On top of TensorFlow's behaviour, a restore first compares the checkpoint's
keys, dtypes and shapes with what the saver is about to restore, so that an
error which can be detected up front never leaves some variables restored
and others not; the error then names every missing and unexpected key.
"""

import functools
import math
import os
import time
import weakref

from tensorflow.core.protobuf import saver_pb2
from tensorflow.python.client import session as session_lib
from tensorflow.python.eager import context
from tensorflow.python.framework import errors
from tensorflow.python.framework import ops
from tensorflow.python.platform import gfile
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.training import training_util
from tensorflow.python.util import compat

from tf_objckpt.api import save_transaction
from tf_objckpt.engine import reads
from tf_objckpt.engine import state_file
from tf_objckpt.engine import tf_compat
from tf_objckpt.engine import transfer_log
from tf_objckpt.restoring import restore_plan
from tf_objckpt.v1 import meta_graphs
from tf_objckpt.v1 import object_based_names
from tf_objckpt.v1 import saver_builders
from tf_objckpt.v1 import session_manager_restores
# Re-exported: TensorFlow's saver module has these names.
# pylint: disable=unused-import
from tf_objckpt.engine.state_file import checkpoint_exists
from tf_objckpt.engine.state_file import generate_checkpoint_state_proto
from tf_objckpt.engine.state_file import get_checkpoint_mtimes
from tf_objckpt.engine.state_file import get_checkpoint_state
from tf_objckpt.engine.state_file import latest_checkpoint
from tf_objckpt.engine.state_file import remove_checkpoint
from tf_objckpt.engine.state_file import update_checkpoint_state
from tf_objckpt.v1.meta_graphs import export_meta_graph
from tf_objckpt.v1.object_based_names import object_graph_key_mapping
from tf_objckpt.v1.saver_builders import BaseSaverBuilder
from tf_objckpt.v1.saver_builders import BulkSaverBuilder
# pylint: enable=unused-import

# The SaverDef fields naming graph elements.
_SAVER_DEF_NAME_FIELDS = ("filename_tensor_name", "save_tensor_name",
                          "restore_op_name")


def _with_restore_hint(error, likely_cause):
  """`error` again, of its type, its message led by its likely cause.

  The text is TensorFlow's, which users and tests match on.
  """
  message = (
      "Restoring from checkpoint failed. This is most likely due to {} from "
      "the checkpoint. Please ensure that you have not altered the graph "
      "expected based on the checkpoint. Original error:\n\n{}").format(
          likely_cause, error.message)
  return type(error)(error.node_def, error.op, message)


def _get_saver_or_default():
  """Returns the only `Saver` in the SAVERS collection, or adds a new one.

  The new saver is sharded and allowed to be empty.

  Raises:
    RuntimeError: if the collection holds more than one saver.
  """
  key = ops.GraphKeys.SAVERS
  savers = ops.get_collection(key)
  if len(savers) > 1:
    raise RuntimeError(
        "More than one item in collection {}. Please indicate which one to "
        "use by passing it to the constructor.".format(key))
  if savers:
    return savers[0]
  saver = Saver(sharded=True, allow_empty=True)
  ops.add_to_collection(key, saver)
  return saver


# ----------------------------------------------------------------------------
# Saver.
# ----------------------------------------------------------------------------


class Saver(object):
  """Saves variables to, and restores them from, name-based checkpoints.

  A drop-in replacement for `tf.compat.v1.train.Saver`: the same arguments,
  methods, graph ops and files. Each variable is stored under its name (the
  op name of a variable given in a list, or the key of a dict). Checkpoints
  written by either restore through the other.

  Saving with `global_step` appends `-<step>` to the prefix; the saver keeps
  the `max_to_keep` most recent checkpoints (plus one every
  `keep_checkpoint_every_n_hours`), deletes older ones, and records them in
  the `checkpoint` state file of the directory.

  When executing eagerly a `var_list` is required and `save`/`restore` run
  immediately (object-based `tf_objckpt.Checkpoint` is the better tool there).
  """

  def __init__(self,
               var_list=None,
               reshape=False,
               sharded=False,
               max_to_keep=5,
               keep_checkpoint_every_n_hours=10000.0,
               name=None,
               restore_sequentially=False,
               saver_def=None,
               builder=None,
               defer_build=False,
               allow_empty=False,
               write_version=saver_pb2.SaverDef.V2,
               pad_step_number=False,
               save_relative_paths=False,
               filename=None):
    """Creates a saver, adding its ops to the graph unless deferred.

    Args:
      var_list: variables / SaveableObjects as a list (keyed by op name) or a
        dict from checkpoint name; None means every saveable object in the
        graph (only when building a graph).
      reshape: allow restoring values of another shape with as many elements.
      sharded: one shard per device.
      max_to_keep: how many recent checkpoints to keep (None or 0: all).
      keep_checkpoint_every_n_hours: additionally keep one checkpoint per
        this many hours.
      name: name scope of the ops; with `saver_def`, the import scope.
      restore_sequentially: restore variables one by one on each device.
      saver_def: an existing `SaverDef` to use instead of building ops.
      builder: the `BaseSaverBuilder` (default `BulkSaverBuilder`).
      defer_build: add the ops only when `build()` is called.
      allow_empty: with no variables, make a no-op saver instead of failing.
      write_version: `SaverDef.V2` (default) or `SaverDef.V1`.
      pad_step_number: write the step as 8 digits (`prefix-00000042`).
      save_relative_paths: record relative paths in the state file.
      filename: default checkpoint prefix baked into the graph.

    Raises:
      TypeError: if `var_list` is invalid.
      ValueError: if names or variables repeat, or `defer_build` is given
        with a `var_list`.
      RuntimeError: if executing eagerly without a `var_list`.
    """
    if defer_build and var_list:
      raise ValueError(
          "If `var_list` is provided then build cannot be deferred. Either "
          "set defer_build=False or var_list=None.")
    eager = context.executing_eagerly()
    if eager:
      logging.warning(
          "Saver is deprecated, please switch to tf.train.Checkpoint (or "
          "tf_objckpt's Checkpoint) or tf.keras.Model.save_weights for "
          "training checkpoints. Eagerly created variables need not have "
          "unique names, which makes a name-based Saver fragile.")
      if var_list is None:
        raise RuntimeError(
            "When eager execution is enabled, `var_list` must specify a "
            "list or dict of variables to save")
    # Construction arguments (names as in TensorFlow's Saver).
    self._var_list = var_list
    self._reshape = reshape
    self._sharded = sharded
    self._max_to_keep = max_to_keep
    self._keep_checkpoint_every_n_hours = (
        keep_checkpoint_every_n_hours)
    self._name = name
    self._restore_sequentially = restore_sequentially
    self._builder = builder
    self._allow_empty = allow_empty
    self._write_version = write_version
    self._pad_step_number = pad_step_number
    self._save_relative_paths = save_relative_paths
    self._filename = filename
    self.saver_def = saver_def
    # State.
    self._is_built = False
    self._is_empty = None
    self._last_checkpoints = []  # (prefix, timestamp), oldest first.
    self._checkpoints_to_be_deleted = []
    # (weakref to the graph, restore op name, plan) of the restore op.
    self._restore_plan_cache = None
    # (checkpoint file identity, plan) of the last successful check.
    self._last_verified = None
    self._object_restore_saver = None  # For object-based checkpoints.
    if eager:
      self._next_checkpoint_time = (
          time.time() + 3600 * keep_checkpoint_every_n_hours)
    elif not defer_build:
      self.build()
    if self.saver_def:
      self._check_saver_def()
      self._write_version = self.saver_def.version

  def build(self):
    """Adds the save and restore ops (needed once with `defer_build=True`)."""
    if context.executing_eagerly():
      raise RuntimeError(
          "Use save/restore instead of build in eager mode.")
    self._build(self._filename, True, True)

  def _build_eager(self, checkpoint_path, build_save,
                   build_restore):
    self._build(checkpoint_path, build_save, build_restore)

  def _build(self, checkpoint_path, build_save,
             build_restore):
    """Builds (or, eagerly, runs) the save/restore and sets `saver_def`."""
    eager = context.executing_eagerly()
    if not eager:
      if self._is_built:
        return
      self._is_built = True

    if eager or not self.saver_def:
      if self._var_list is None:
        self._var_list = saver_builders.all_saveables()
      if not self._var_list:
        if not self._allow_empty:
          raise ValueError("No variables to save")
        self._is_empty = True
        return
      self._is_empty = False
      if self._builder is None:
        self._builder = saver_builders.BulkSaverBuilder(
            write_version=self._write_version)
      build = self._builder._build_internal  # pylint: disable=protected-access
      self.saver_def = build(
          self._var_list, self._reshape, self._sharded, self._max_to_keep,
          self._keep_checkpoint_every_n_hours, self._name,
          self._restore_sequentially, checkpoint_path,
          build_save, build_restore)
      if not eager:
        self._keep_restore_plan(ops.get_default_graph(), *getattr(
            self._builder, "_last_restore_plan", (None, None)))
    elif self._name:
      # With a given saver_def, `name` is the scope it was imported under.
      for field in _SAVER_DEF_NAME_FIELDS:
        setattr(self.saver_def, field, ops.prepend_name_scope(
            getattr(self.saver_def, field), self._name))

    self._check_saver_def()
    if not eager:
      hours = self.saver_def.keep_checkpoint_every_n_hours
      self._next_checkpoint_time = time.time() + 3600 * hours

  def _check_saver_def(self):
    saver_def = self.saver_def
    if not isinstance(saver_def, saver_pb2.SaverDef):
      raise ValueError(
          "saver_def must be a saver_pb2.SaverDef: %s" % (self.saver_def,))
    if context.executing_eagerly():
      return
    for field in _SAVER_DEF_NAME_FIELDS[1:]:
      if not getattr(self.saver_def, field):
        raise ValueError("saver_def must specify the %s: %s" %
                         (field, self.saver_def))

  def _CheckpointFilename(self, p):
    """The checkpoint prefix of a `(prefix, timestamp)` pair."""
    return p[0]

  def _RecordLastCheckpoint(self,
                            latest_save_path):
    """Appends a checkpoint to the kept list, queueing the oldest excess."""
    keep = self.saver_def.max_to_keep
    if not keep:
      return
    # Updated in place: a list given to `set_last_checkpoints_with_time`
    # stays this saver's list, as in TensorFlow.
    kept = self._last_checkpoints
    kept[:] = [p for p in kept
               if self._CheckpointFilename(p) != latest_save_path]
    kept.append((latest_save_path, time.time()))
    if len(kept) > keep:
      self._checkpoints_to_be_deleted.append(kept.pop(0))

  def _MaybeDeleteOldCheckpoints(self,
                                 meta_graph_suffix="meta"):
    """Deletes the oldest queued checkpoint unless it is an hourly keeper.

    A checkpoint newer than the next keep time survives (and moves the keep
    time on by `keep_checkpoint_every_n_hours`); others are removed with
    their meta graph.
    """
    if not self._checkpoints_to_be_deleted:
      return
    path, timestamp = self._checkpoints_to_be_deleted.pop(0)
    if timestamp > self._next_checkpoint_time:
      hours = self.saver_def.keep_checkpoint_every_n_hours
      self._next_checkpoint_time += 3600 * hours
      return
    try:
      state_file.remove_checkpoint_files(
          path, self.saver_def.version, meta_graph_suffix)
    except Exception as e:  # pylint: disable=broad-except  # Best effort.
      logging.warning("Ignoring: %s", e)

  def as_saver_def(self):
    """Returns the `SaverDef` of this saver."""
    return self.saver_def

  def to_proto(self, export_scope=None):
    """Returns the `SaverDef` with `export_scope` stripped from its names.

    Returns None when some name is outside `export_scope`.
    """
    if export_scope is None:
      return self.saver_def
    names = [getattr(self.saver_def, f) for f in _SAVER_DEF_NAME_FIELDS]
    if not all(n.startswith(export_scope) for n in names):
      return None
    saver_def = saver_pb2.SaverDef()
    saver_def.CopyFrom(self.saver_def)
    for field, value in zip(_SAVER_DEF_NAME_FIELDS, names):
      setattr(saver_def, field, ops.strip_name_scope(value, export_scope))
    return saver_def

  @staticmethod
  def from_proto(saver_def, import_scope=None):
    """Returns a `Saver` using `saver_def` (its names under `import_scope`)."""
    return Saver(name=import_scope, saver_def=saver_def)

  @property
  def last_checkpoints(self):
    """The checkpoints this saver still keeps, oldest first."""
    return [self._CheckpointFilename(p) for p in self._last_checkpoints]

  def set_last_checkpoints(self, last_checkpoints):
    """Deprecated: sets the kept checkpoints (never deleted by age).

    Raises:
      AssertionError: if `last_checkpoints` is not a list.
    """
    assert isinstance(last_checkpoints, list)
    # An infinite timestamp makes them hourly keepers: never deleted.
    self._last_checkpoints = [(path, math.inf) for path in last_checkpoints]

  def set_last_checkpoints_with_time(self,
                                     last_checkpoints_with_time):
    """Sets the kept checkpoints as `(prefix, timestamp)` pairs.

    Raises:
      AssertionError: if the argument is not a list.
    """
    stamped = last_checkpoints_with_time
    assert isinstance(stamped, list), stamped
    # Kept, not copied: later saves update the caller's list (as TF does).
    self._last_checkpoints = stamped

  @session_manager_restores.forgetting_skipped
  def recover_last_checkpoints(self,
                               checkpoint_paths):
    """Restores the kept-checkpoint list after a restart.

    Paths whose files still exist are kept, timestamped by their mtime.
    """
    kept = []
    for path in checkpoint_paths:
      try:
        mtimes = state_file.checkpoint_mtimes([path])
      except errors.NotFoundError:
        continue  # Deleted meanwhile by someone else.
      if mtimes:
        kept.append((path, mtimes[0]))
    self.set_last_checkpoints_with_time(kept)

  def _numbered_prefix(self, sess, save_path, global_step, latest_filename):
    """The prefix `save` writes: `save_path`, numbered by `global_step`."""
    if global_step is None:
      if (not self._sharded and
          os.path.basename(save_path) == latest_filename):
        # The data file would overwrite the state file.
        raise ValueError(
            "'latest_filename' collides with 'save_path': '{}' and '{}'"
            .format(latest_filename, save_path))
      return save_path
    step = global_step
    if not isinstance(step, compat.integral_types):
      step = training_util.global_step(sess, step)
    # Fixed width keeps the files sorted by step in listings. A bool is
    # written as an integer.
    return save_transaction.numbered(save_path, step,
                                     digits=8 if self._pad_step_number else 0)

  def save(self,
           sess,
           save_path,
           global_step=None,
           latest_filename=None,
           meta_graph_suffix="meta",
           write_meta_graph=True,
           write_state=True,
           strip_default_attrs=False,
           save_debug_info=False):
    """Saves the variables; returns the checkpoint prefix written.

    Args:
      sess: the `Session` to run the save in (ignored when eager).
      save_path: checkpoint prefix.
      global_step: optional step (int, tensor or tensor name) appended to
        `save_path` as `-<step>`.
      latest_filename: name of the state file (default "checkpoint"),
        written next to the checkpoint.
      meta_graph_suffix: extension of the meta graph file.
      write_meta_graph: also write `<prefix>.<meta_graph_suffix>`.
      write_state: update the state file and delete old checkpoints.
      strip_default_attrs: drop default-valued attributes from the meta graph.
      save_debug_info: also write the GraphDebugInfo next to the meta graph.

    Returns:
      The checkpoint prefix, or None for an empty saver.

    Raises:
      TypeError: if `sess` is not a session (graph mode).
      ValueError: if `latest_filename` has path components or collides with
        `save_path`, or the parent directory does not exist.
      RuntimeError: if the saver was deferred and never built.
    """
    eager = context.executing_eagerly()
    if not (eager or self._is_built):
      raise RuntimeError(
          "`build()` should be called before save if "
          "defer_build==True")
    if latest_filename is None:
      latest_filename = "checkpoint"
    if self._write_version != saver_pb2.SaverDef.V2:
      logging.warning("TensorFlow's V1 checkpoint format has been deprecated;"
                      " consider the V2 format (the default).")
    if os.path.dirname(latest_filename):
      raise ValueError(
          "'latest_filename' must not contain path components")
    save_path = compat.as_str(save_path)
    checkpoint_file = self._numbered_prefix(sess, save_path, global_step,
                                            latest_filename)
    if not (eager or isinstance(sess, session_lib.SessionInterface)):
      raise TypeError("'sess' must be a Session; %s" % (sess,))
    meta_file = None
    if write_meta_graph and not eager:
      meta_file = state_file.meta_graph_filename(
          checkpoint_file, meta_graph_suffix)

    def write_meta_graph_file():
      with sess.graph.as_default():
        self.export_meta_graph(meta_file,
                               strip_default_attrs=strip_default_attrs,
                               save_debug_info=save_debug_info)

    if self._is_empty:
      if meta_file:
        write_meta_graph_file()
      return None
    plan = save_transaction.SavePlan(
        checkpoint_file, base=save_path if global_step is not None else None,
        extra_files=(meta_file,) if meta_file else (),
        state_file=latest_filename if write_state else None)
    record = None
    if write_state:
      record = functools.partial(
          self._record_and_delete, save_dir=os.path.dirname(save_path),
          latest_filename=latest_filename,
          meta_graph_suffix=meta_graph_suffix)

    def write(prefix):
      saved = self._run_save_op(sess, prefix)
      # The meta graph is written with the checkpoint, before the state file
      # moves (TensorFlow writes it after): a save that fails leaves neither.
      if saved is not None and meta_file:
        write_meta_graph_file()
      return saved

    try:
      saved = save_transaction.SaveTransaction(plan, record).run(write)
    except (errors.NotFoundError, errors.FailedPreconditionError) as exc:
      if gfile.IsDirectory(os.path.dirname(save_path)):
        raise
      raise ValueError(
          f"Parent directory of {save_path} doesn't exist, can't save."
      ) from exc
    return save_transaction.path_string(saved)

  def _run_save_op(self, sess, prefix):
    """Step 2 of a save: the `SaverDef`'s save op writes at `prefix`.

    Eagerly, the builder writes at once. Returns the path written (None if
    the saver turned out to have nothing to save).
    """
    if not context.executing_eagerly():
      return sess.run(self.saver_def.save_tensor_name,
                      feed_dict={self.saver_def.filename_tensor_name: prefix})
    self._build_eager(prefix, True, False)
    return None if self._is_empty else self.saver_def.save_tensor_name

  def _record_and_delete(self, saved, save, save_dir, latest_filename,
                         meta_graph_suffix):
    """Step 4 of a save: records `saved`, then deletes the oldest one."""
    self._record_state(saved, save_dir, latest_filename)
    save.keep()
    self._MaybeDeleteOldCheckpoints(meta_graph_suffix)

  def _record_state(self, saved, save_dir, latest_filename):
    """Lists `saved` as the latest checkpoint, in memory and in the file.

    If the state file cannot be written, the kept list is left as it was.
    """
    kept = list(self._last_checkpoints)
    queued = list(self._checkpoints_to_be_deleted)
    self._RecordLastCheckpoint(saved)
    try:
      state_file.update_checkpoint_state_internal(
          save_dir=save_dir, model_checkpoint_path=saved,
          all_model_checkpoint_paths=self.last_checkpoints,
          latest_filename=latest_filename,
          save_relative_paths=self._save_relative_paths)
    except BaseException:
      self._last_checkpoints[:] = kept
      self._checkpoints_to_be_deleted[:] = queued
      raise

  def export_meta_graph(self,
                        filename=None,
                        collection_list=None,
                        as_text=False,
                        export_scope=None,
                        clear_devices=False,
                        clear_extraneous_savers=False,
                        strip_default_attrs=False,
                        save_debug_info=False):
    """Returns the default graph's `MetaGraphDef` with this saver's SaverDef.

    Args:
      filename: file to write it to, if any.
      collection_list: collections to include (default: all).
      as_text: write the text format.
      export_scope: only export this name scope (stripped from names).
      clear_devices: remove device placements.
      clear_extraneous_savers: drop the ops and SaverDefs of other savers.
      strip_default_attrs: drop default-valued attributes.
      save_debug_info: also write the GraphDebugInfo.
    """
    graph_def = tf_compat.graph_def_with_shapes(ops.get_default_graph())
    return export_meta_graph(
        filename=filename,
        graph_def=graph_def,
        saver_def=self.saver_def,
        collection_list=collection_list,
        as_text=as_text,
        export_scope=export_scope,
        clear_devices=clear_devices,
        clear_extraneous_savers=clear_extraneous_savers,
        strip_default_attrs=strip_default_attrs,
        save_debug_info=save_debug_info)

  def _keep_restore_plan(self, graph, restore_op_name, plan):
    if restore_op_name is not None and plan is not None:
      self._restore_plan_cache = (weakref.ref(graph), restore_op_name, plan)

  def _restore_plan(self, graph):
    """The plan of this saver's restore op in `graph`, or None.

    Read from the graph when the saver did not build it. None when the
    restore op is not in `graph`: running it then raises TensorFlow's error.
    """
    name = self.saver_def.restore_op_name
    cached = self._restore_plan_cache
    if cached is None or cached[0]() is not graph or cached[1] != name:
      try:
        plan = restore_plan.plan_from_graph(graph, name)
      except (KeyError, ValueError, TypeError):
        return None
      self._keep_restore_plan(graph, name, plan)
    return self._restore_plan_cache[2]

  def _restore_by_name(self, sess, save_path):
    """Checks the checkpoint, then restores (eagerly or through `sess`)."""
    if context.executing_eagerly():
      # The builder checks before it assigns anything.
      self._build_eager(save_path, False, True)
      return
    graph = getattr(sess, "graph", None) or ops.get_default_graph()
    plan = self._restore_plan(graph)
    # Checking an unchanged checkpoint against the same plan again would
    # find the same: skip it when restoring repeatedly from one file.
    # Without a plan there is nothing to check: the restore op reports.
    identity = saver_builders.checkpoint_identity(save_path)
    if plan is not None and (identity is None or
                             self._last_verified != (identity, plan)):
      saver_builders.check_plan(plan, reads.readable_values(save_path))
      self._last_verified = (identity, plan)
    sess.run(self.saver_def.restore_op_name,
             feed_dict={self.saver_def.filename_tensor_name: save_path})

  def _restore_object_based(self, sess, save_path, names_to_keys):
    """Restores from an object-based checkpoint, keyed by variable names."""
    logging.warning(
        "Restoring an object-based checkpoint using a name-based saver. This "
        "builds a second saver and is fragile; object-based checkpoints are "
        "better loaded with tf.train.Checkpoint().")
    remapped = saver_from_object_based_checkpoint(
        save_path, var_list=self._var_list, builder=self._builder,
        names_to_keys=names_to_keys, cached_saver=self._object_restore_saver)
    self._object_restore_saver = remapped
    remapped.restore(sess, save_path)

  @session_manager_restores.healing_when_chosen
  def restore(self, sess, save_path):
    """Restores the variables from the checkpoint at `save_path`.

    The checkpoint's keys, dtypes and shapes are checked before anything is
    assigned. If the checkpoint is object-based (written by
    `tf.train.Checkpoint`), variables are matched through the names recorded
    in its object graph.

    Args:
      sess: the `Session` (None when eager).
      save_path: checkpoint prefix, e.g. a value returned by `save`.

    Raises:
      ValueError: if `save_path` is None or not a checkpoint.
      NotFoundError: if variables are missing from the checkpoint.
      InvalidArgumentError: if the checkpoint does not match the variables.
    """
    if self._is_empty:
      return
    if save_path is None:
      raise ValueError(
          "Can't load save_path when it is None.")
    prefix = compat.as_text(save_path)
    if not state_file.checkpoint_exists_internal(prefix):
      raise ValueError(
          "The passed save_path is not a valid checkpoint: " + prefix)
    logging.info("Restoring parameters from %s", prefix)
    started = transfer_log.start()
    with state_file.explaining_directories(prefix):
      self._restore_naming_errors(sess, prefix)
    if transfer_log.enabled():
      transfer_log.restored(prefix, started, self._restored_values(prefix))

  def _restore_naming_errors(self, sess, prefix):
    """Restores by name, else through an object graph; errors say why."""
    try:
      self._restore_by_name(sess, prefix)
    except errors.NotFoundError as err:
      # Names changed, or the checkpoint is object-based: then its object
      # graph maps the variable names to its keys.
      try:
        mapping = object_graph_key_mapping(prefix)
      except errors.NotFoundError:
        raise _with_restore_hint(
            err, "a Variable name or other graph key that is missing"
        ) from None
      self._restore_object_based(sess, prefix, mapping)
    except errors.InvalidArgumentError as err:
      raise _with_restore_hint(
          err, "a mismatch between the current graph and the graph"
      ) from None
    except (errors.DataLossError, errors.OutOfRangeError) as err:
      raise reads.damage_named(prefix, err) from err

  def _restored_values(self, prefix):
    """(shape, dtype name) of each value a restore of `prefix` read."""
    plan = None
    if not context.executing_eagerly():
      plan = self._restore_plan(ops.get_default_graph())
    values = reads.CheckpointValues(
        prefix, reads.open_reader(prefix), prefix)
    keys = ([value.key for value in plan.reads] if plan is not None
            else list(values.shapes))
    return [(values.shapes[key], values.dtypes[key].name) for key in keys
            if key in values.shapes]


# ----------------------------------------------------------------------------
# Meta graphs.
# ----------------------------------------------------------------------------

def import_meta_graph(meta_graph_or_file,
                      clear_devices=False,
                      import_scope=None,
                      **kwargs):
  """Imports a `MetaGraphDef` into the default graph and returns its saver.

  Nodes and collections are added to the current graph (under
  `import_scope`); the returned `Saver` uses the meta graph's `saver_def`, or
  covers every imported variable when there is none. Meta graphs written by
  TensorFlow's `Saver` work as well as ours.

  Args:
    meta_graph_or_file: a `MetaGraphDef` or the path of a file holding one.
    clear_devices: drop device placements while importing.
    import_scope: name scope to import under.
    **kwargs: passed to `import_scoped_meta_graph_with_return_elements`.

  Returns:
    A `Saver`, or None when the graph has no variables to restore.

  Raises:
    RuntimeError: when executing eagerly.
  """
  saver, _ = _import_meta_graph_with_return_elements(
      meta_graph_or_file, clear_devices, import_scope, **kwargs)
  return saver


def _import_meta_graph_with_return_elements(
    meta_graph_or_file, clear_devices=False,
    import_scope=None, return_elements=None, **kwargs):
  """`import_meta_graph` that also returns the requested graph elements."""
  meta_graph_def, imported_vars, elements = meta_graphs.imported(
      meta_graph_or_file, clear_devices, import_scope, return_elements,
      **kwargs)
  saver = _create_saver_from_imported_meta_graph(
      meta_graph_def, import_scope, imported_vars)
  return saver, elements


def _create_saver_from_imported_meta_graph(
    meta_graph_def, import_scope, imported_vars):
  """A `Saver` for the variables of a just-imported meta graph, or None."""
  if meta_graph_def.HasField("saver_def"):
    scope = import_scope
    if imported_vars:
      # The scope actually used may have been uniquified (e.g. "scope_1").
      key, var = next(iter(imported_vars.items()))
      scope = var.name[:-len(key)]
    return Saver(name=scope, saver_def=meta_graph_def.saver_def)
  if saver_builders.all_saveables(scope=import_scope):
    return Saver()
  logging.info("Saver not created because there are no variables in the "
               "graph to restore")
  return None


meta_graphs.register_saver_proto_functions(Saver.from_proto)


# ----------------------------------------------------------------------------
# Object-based checkpoints read by name.
# ----------------------------------------------------------------------------


def saver_from_object_based_checkpoint(
    checkpoint_path, var_list=None, builder=None,
    names_to_keys=None, cached_saver=None):
  """Returns a `Saver` restoring variables by name from an object-based one.

  Every spec of `var_list` must have a key in the checkpoint's object graph
  (or in `names_to_keys`); the saver reads each from that key. With
  `cached_saver`, the mapping is only validated and `cached_saver` returned,
  so repeated restores do not grow the graph.

  Args:
    checkpoint_path: prefix of an object-based checkpoint.
    var_list: variables to restore (default: all saveable objects).
    builder: unused beyond compatibility; a `BaseSaverBuilder`.
    names_to_keys: name-to-key dict (default: read from the checkpoint).
    cached_saver: a saver made by an earlier call for the same variables.

  Returns:
    A `Saver`.

  Raises:
    ValueError: if the checkpoint is not object-based.
    NotFoundError: if some variables have no key in the checkpoint.
  """
  del builder  # The remapped saver uses the default builder, as TF's does.
  saveables = object_based_names.remapped_saveables(
      checkpoint_path, var_list, names_to_keys,
      rename=cached_saver is None)
  if cached_saver is not None:
    return cached_saver
  # Keyed by a renamed spec: the slices of a partitioned variable share the
  # saveable name and would otherwise collapse into one entry.
  return Saver({saveable.specs[0].name: saveable for saveable in saveables})
