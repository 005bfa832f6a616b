"""The v1 `Saver`: name-based (TF1 style) checkpoints.

A name-based checkpoint maps variable names to tensors. `Saver` writes and
reads such checkpoints exactly as `tf.compat.v1.train.Saver` does (same
graph structure, same `SaverDef` tensor names, same files on disk); the ops
come from its builders (`saver_builders`), the file ops from the I/O
engine. A save runs the `SaverDef`'s save op as step 2 of a save
transaction (`api.save_transaction`): numbered, cleaned up after a
failure, recorded in the state file (`saver_retention` decides which
checkpoints stay).

On top of TensorFlow's behaviour, a restore first compares the checkpoint's
keys, dtypes and shapes with what the saver is about to restore
(`saver_restores`), so that an error which can be detected up front never
leaves some variables restored and others not; the error then names every
missing and unexpected key. TensorFlow's name for this module is `saver`,
which re-exports it with the meta graph functions (`meta_graphs`).
"""

import functools
import os
import time
from typing import Any, Optional

from tensorflow.core.protobuf import saver_pb2
from tensorflow.python.client import session as session_lib
from tensorflow.python.eager import context
from tensorflow.python.framework import errors
from tensorflow.python.framework import meta_graph
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
from tf_objckpt.foundation import module_names
from tf_objckpt.v1 import meta_graphs
from tf_objckpt.v1 import object_based_names
from tf_objckpt.v1 import saver_builders
from tf_objckpt.v1 import saver_restores
from tf_objckpt.v1 import saver_retention
from tf_objckpt.v1 import session_manager_restores

# The SaverDef fields naming graph elements.
_SAVER_DEF_NAME_FIELDS = ("filename_tensor_name", "save_tensor_name",
                          "restore_op_name")


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


class Saver(saver_retention.SaverRetention):
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
               var_list: Any = None,
               reshape: bool = False,
               sharded: bool = False,
               max_to_keep: Optional[int] = 5,
               keep_checkpoint_every_n_hours: float = 10000.0,
               name: Optional[str] = None,
               restore_sequentially: bool = False,
               saver_def: Any = None,
               builder: Any = None,
               defer_build: bool = False,
               allow_empty: bool = False,
               write_version: int = saver_pb2.SaverDef.V2,
               pad_step_number: bool = False,
               save_relative_paths: bool = False,
               filename: Optional[str] = None) -> None:
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
    self._keep_checkpoint_every_n_hours = (keep_checkpoint_every_n_hours)
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
    self._checkpoints_to_be_deleted: list = []
    # The plan of the restore op, and the checkpoint last checked.
    self._restore_plans = saver_restores.RestorePlans()
    self._object_restore_saver = None  # For object-based checkpoints.
    if eager:
      self._next_checkpoint_time = (time.time() +
                                    3600 * keep_checkpoint_every_n_hours)
    elif not defer_build:
      self.build()
    if self.saver_def:
      self._check_saver_def()
      self._write_version = self.saver_def.version

  def build(self) -> None:
    """Adds the save and restore ops (needed once with `defer_build=True`)."""
    if context.executing_eagerly():
      raise RuntimeError(
          "Saver.build() builds graph ops; executing eagerly, save() and "
          "restore() run directly (use them instead of build).")
    self._build(self._filename, True, True)

  def _build_eager(self, save_path, build_save, build_restore):
    self._build(save_path, build_save, build_restore)

  def _build(self, save_path, build_save, build_restore):
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
      self.saver_def = build(self._var_list, self._reshape, self._sharded,
                             self._max_to_keep,
                             self._keep_checkpoint_every_n_hours, self._name,
                             self._restore_sequentially, save_path, build_save,
                             build_restore)
      if not eager:
        self._restore_plans.keep(
            ops.get_default_graph(),
            *getattr(self._builder, "_last_restore_plan", (None, None)))
    elif self._name:
      # With a given saver_def, `name` is the scope it was imported under.
      for field in _SAVER_DEF_NAME_FIELDS:
        setattr(
            self.saver_def, field,
            ops.prepend_name_scope(getattr(self.saver_def, field), self._name))

    self._check_saver_def()
    if not eager:
      hours = self.saver_def.keep_checkpoint_every_n_hours
      self._next_checkpoint_time = time.time() + 3600 * hours

  def _check_saver_def(self):
    saver_def = self.saver_def
    if not isinstance(saver_def, saver_pb2.SaverDef):
      raise ValueError(f"saver_def must be a saver_pb2.SaverDef, not a "
                       f"{type(saver_def).__name__}: {saver_def!r}")
    if context.executing_eagerly():
      return
    for field in _SAVER_DEF_NAME_FIELDS[1:]:
      if not getattr(self.saver_def, field):
        raise ValueError("saver_def must specify the %s: %s" %
                         (field, self.saver_def))

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

  def _numbered_prefix(self, sess, save_path, global_step, latest_filename):
    """The prefix `save` writes: `save_path`, numbered by `global_step`."""
    if global_step is None:
      if (not self._sharded and os.path.basename(save_path) == latest_filename):
        # The data file would overwrite the state file.
        raise ValueError(
            "'latest_filename' collides with 'save_path': '{}' and '{}'".format(
                latest_filename, save_path))
      return save_path
    step = global_step
    if not isinstance(step, compat.integral_types):
      step = training_util.global_step(sess, step)
    # Fixed width keeps the files sorted by step in listings. A bool is
    # written as an integer.
    return save_transaction.numbered(save_path,
                                     step,
                                     digits=8 if self._pad_step_number else 0)

  def save(self,
           sess: Any,
           save_path: str,
           global_step: Any = None,
           latest_filename: Optional[str] = None,
           meta_graph_suffix: str = "meta",
           write_meta_graph: bool = True,
           write_state: bool = True,
           strip_default_attrs: bool = False,
           save_debug_info: bool = False) -> Optional[str]:
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
      raise RuntimeError("`build()` should be called before save if "
                         "defer_build==True")
    if latest_filename is None:
      latest_filename = "checkpoint"
    if self._write_version != saver_pb2.SaverDef.V2:
      logging.warning("TensorFlow's V1 checkpoint format has been deprecated;"
                      " consider the V2 format (the default).")
    if os.path.dirname(latest_filename):
      raise ValueError(f"'latest_filename' must be a file name in the save "
                       f"directory, not a path: {latest_filename!r}")
    save_path = compat.as_str(save_path)
    checkpoint_file = self._numbered_prefix(sess, save_path, global_step,
                                            latest_filename)
    if not (eager or isinstance(sess, session_lib.SessionInterface)):
      raise TypeError("'sess' must be a Session; %s" % (sess,))
    meta_file = None
    if write_meta_graph and not eager:
      meta_file = state_file.meta_graph_filename(checkpoint_file,
                                                 meta_graph_suffix)

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
        checkpoint_file,
        base=save_path if global_step is not None else None,
        extra_files=(meta_file,) if meta_file else (),
        state_file=latest_filename if write_state else None)
    record = None
    if write_state:
      record = functools.partial(self._record_and_delete,
                                 save_dir=os.path.dirname(save_path),
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
    return meta_graphs.export_meta_graph(
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

  @staticmethod
  def _add_collection_def(meta_graph_def, key, export_scope=None):
    """Adds collection `key` of the default graph to `meta_graph_def`.

    TensorFlow's `Saver` has this private helper, and code written against
    it calls it; collections of values a `CollectionDef` cannot hold are
    left out, with a warning, as there.
    """
    meta_graph.add_collection_def(meta_graph_def,
                                  key,
                                  export_scope=export_scope)

  def _restore_by_name(self, sess, save_path):
    """Checks the checkpoint, then restores (eagerly or through `sess`)."""
    if context.executing_eagerly():
      # The builder checks before it assigns anything.
      self._build_eager(save_path, False, True)
      return
    graph = getattr(sess, "graph", None) or ops.get_default_graph()
    self._restore_plans.check(graph, self.saver_def.restore_op_name, save_path)
    sess.run(self.saver_def.restore_op_name,
             feed_dict={self.saver_def.filename_tensor_name: save_path})

  def _restore_object_based(self, sess, save_path, names_to_keys):
    """Restores from an object-based checkpoint, keyed by variable names."""
    logging.warning(
        "Restoring an object-based checkpoint using a name-based saver. It "
        "goes through a second saver keyed by the checkpoint's object graph, "
        "which is fragile; load object-based checkpoints with "
        "tf.train.Checkpoint().")
    remapped = saver_from_object_based_checkpoint(
        save_path,
        var_list=self._var_list,
        builder=self._builder,
        names_to_keys=names_to_keys,
        cached_saver=self._object_restore_saver)
    self._object_restore_saver = remapped
    remapped.restore(sess, save_path)

  @session_manager_restores.healing_when_chosen
  def restore(self, sess: Any, save_path: Optional[str]) -> None:
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
      raise ValueError("Can't load save_path when it is None: no checkpoint "
                       "was given (tf.train.latest_checkpoint() gives None "
                       "for a directory without one).")
    prefix = compat.as_text(save_path)
    if not state_file.checkpoint_exists_internal(prefix):
      raise ValueError(f"The passed save_path is not a valid checkpoint: "
                       f"no checkpoint files at {prefix!r}")
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
        mapping = object_based_names.object_graph_key_mapping(prefix)
      except errors.NotFoundError:
        raise saver_restores.with_restore_hint(
            err, "a Variable name or other graph key that is missing") from None
      self._restore_object_based(sess, prefix, mapping)
    except errors.InvalidArgumentError as err:
      raise saver_restores.with_restore_hint(
          err, "a mismatch between the current graph and the graph") from None
    except (errors.DataLossError, errors.OutOfRangeError) as err:
      raise reads.damage_named(prefix, err) from err

  def _restored_values(self, prefix):
    """(shape, dtype name) of each value a restore of `prefix` read."""
    plan = None
    if not context.executing_eagerly():
      plan = self._restore_plans.plan(ops.get_default_graph(),
                                      self.saver_def.restore_op_name)
    return saver_restores.restored_values(prefix, plan)


def saver_from_object_based_checkpoint(checkpoint_path,
                                       var_list=None,
                                       builder=None,
                                       names_to_keys=None,
                                       cached_saver=None):
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
  saveables = object_based_names.remapped_saveables(checkpoint_path,
                                                    var_list,
                                                    names_to_keys,
                                                    rename=cached_saver is None)
  if cached_saver is not None:
    return cached_saver
  # Keyed by a renamed spec: the slices of a partitioned variable share the
  # saveable name and would otherwise collapse into one entry.
  return Saver({saveable.specs[0].name: saveable for saveable in saveables})


meta_graphs.register_saver_class(Saver)
module_names.keep_module_name("tf_objckpt.saver", Saver, _get_saver_or_default,
                              saver_from_object_based_checkpoint)
