"""The graph of a v1 `Saver`: `BaseSaverBuilder` and `BulkSaverBuilder`.

A builder turns variables into the save and restore ops of a name-based
checkpoint, op for op as TensorFlow's builders do (so `SaverDef`s and meta
graphs move freely between the two), issuing the file ops through the I/O
engine (`multi_device_saver`). Executing eagerly, it saves or restores at once,
after checking the restore plan against the checkpoint.
"""

import os

from tensorflow.core.protobuf import saver_pb2
from tensorflow.python.eager import context
from tensorflow.python.framework import constant_op
from tensorflow.python.framework import device as pydev
from tensorflow.python.framework import errors
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor_shape
from tensorflow.python.ops import array_ops
from tensorflow.python.ops import control_flow_ops
from tensorflow.python.ops import variables
from tensorflow.python.training.saving import saveable_object_util as tf_saveable_object_util
from tensorflow.python.util import compat

from tf_objckpt.engine import graph_restores
from tf_objckpt.engine import multi_device_saver
from tf_objckpt.engine import read_plan
from tf_objckpt.engine import reads
from tf_objckpt.engine import saveable_objects
from tf_objckpt.engine import variable_values
from tf_objckpt.engine import writes
from tf_objckpt.saveables import named_saveables
from tf_objckpt.saveables import variable_saveables


def all_saveables(scope=None):
  """Every saveable object of the default graph (global variables first)."""
  return variables._all_saveable_objects(scope=scope)  # pylint: disable=protected-access


def saveables_from_var_list(var_list):
  """Turns a `Saver` var_list (list or dict) into a list of SaveableObjects."""
  names_to_saveables = (var_list if isinstance(var_list, dict) else
                        named_saveables.op_list_to_dict(var_list))
  return named_saveables.validate_and_slice_inputs(names_to_saveables)


_VARIABLE_SAVEABLES = (variable_saveables.ResourceVariableSaveable,
                       variable_saveables.ReferenceVariableSaveable,
                       tf_saveable_object_util.ResourceVariableSaveable,
                       tf_saveable_object_util.ReferenceVariableSaveable)


def plan_from_saveables(saveables, reshape):
  """The read plan of saveables about to be restored by a builder."""
  # Only variables insist on a shape; other saveables (tables, ...) may
  # legitimately restore values of any shape.
  return read_plan.ReadPlan(
      read_plan.ToSaveable(
          saveable,
          tensor_shape.TensorShape(saveable.op.shape) if isinstance(
              saveable, _VARIABLE_SAVEABLES) else None, reshape)
      for saveable in saveables)


def checkpoint_identity(save_path):
  """Identifies the version of a local V2 checkpoint (None if unknown)."""
  try:
    stat = os.stat(compat.as_str(save_path) + ".index")
  except (OSError, ValueError):
    return None
  return (compat.as_str(save_path), stat.st_ino, stat.st_size, stat.st_mtime_ns)


def check_plan(plan, values, eager=False):
  """Raises TensorFlow's error if `plan` cannot be restored from `values`.

  Args:
    plan: A `read_plan.ReadPlan`.
    values: The checkpoint's `reads.CheckpointValues`, or None when it
      cannot be read: the restore op then fails before assigning anything,
      with TensorFlow's own error type and message.
    eager: Whether the restore runs eagerly, where TensorFlow reports a
      variable's shape mismatch as a ValueError (graph building, the restore
      op fails with an InvalidArgumentError, in the Assign kernel's words:
      ours follows its own words with those).

  Raises:
    NotFoundError: If keys are missing; the message names them, and the
      checkpoint's keys nothing asks for.
    InvalidArgumentError, ValueError: If dtypes or shapes differ.
  """
  if values is None:
    return
  read_plan.check(
      plan,
      values,
      shape_error=ValueError if eager else errors.InvalidArgumentError,
      list_unexpected=True,
      assign_words=not eager)


class _UnexpectedWriteVersionError(RuntimeError, TypeError):
  """An unknown checkpoint format version.

  TensorFlow documents a RuntimeError but raises a TypeError (building its
  message fails), so this error is both.
  """


def _saveable_bytes(saveable):
  """About how many bytes the variable of `saveable` holds (else 0).

  From the variable's static shape: a spec's tensor may be a function that
  would add read ops to the graph.
  """
  shape = getattr(saveable.op, "shape", None)
  if (len(saveable.specs) != 1 or shape is None or
      not shape.is_fully_defined()):
    return 0
  return reads.byte_size(shape.as_list(), saveable.specs[0].dtype.base_dtype)


class BaseSaverBuilder(object):
  """Adds the save and restore ops of a `Saver` to the graph.

  Subclasses may override `save_op`, `restore_op`, `bulk_restore` and
  `sharded_filename` to emit other ops.
  """

  SaveSpec = saveable_objects.SaveSpec
  SaveableObject = saveable_objects.SaveableObject

  # Historical names of the variable saveables.
  VariableSaveable = (variable_saveables.ReferenceVariableSaveable)
  ResourceVariableSaveable = (variable_saveables.ResourceVariableSaveable)

  def __init__(self, write_version=saver_pb2.SaverDef.V2):
    self._write_version = write_version

  def save_op(self, filename_tensor, saveables):
    """Returns an op writing every spec of `saveables` to `filename_tensor`.

    For the V2 format `filename_tensor` is a checkpoint prefix, not a file.

    Raises:
      RuntimeError: if the builder's write version is unknown.
    """
    names, slices, tensors = [], [], []
    for saveable in saveables:
      for spec in saveable.specs:
        names.append(spec.name)
        slices.append(spec.slice_spec)
        tensors.append(spec.tensor)
    if self._write_version == saver_pb2.SaverDef.V2:
      return writes.save_v2(filename_tensor, names, slices, tensors)
    if self._write_version == saver_pb2.SaverDef.V1:
      return writes.save_v1(filename_tensor, names, slices, tensors)
    raise _UnexpectedWriteVersionError("Unexpected write_version: %r" %
                                       (self._write_version,))

  def bulk_restore(self, filename_tensor, saveables, preferred_shard,
                   restore_sequentially):
    """Reads the tensors of all `saveables`, one `restore_op` per saveable.

    Args:
      filename_tensor: scalar string tensor, the checkpoint prefix.
      saveables: list of SaveableObjects.
      preferred_shard: shard to open first (unused by `RestoreV2`).
      restore_sequentially: ignored.

    Returns:
      The restored tensors, in the order of the saveables' specs.
    """
    del restore_sequentially  # Unused.
    restored = []
    for saveable in saveables:
      device = (variable_values.set_cpu0(saveable.device)
                if saveable.device else None)
      with ops.device(device):
        restored += self.restore_op(filename_tensor, saveable, preferred_shard)
    return restored

  def restore_op(self, filename_tensor, saveable, preferred_shard):
    """Returns the tensors of one saveable read from the checkpoint."""
    del preferred_shard  # Unused.
    restored = []
    for spec in saveable.specs:
      restored.extend(
          reads.restore_v2(filename_tensor, [spec.name], [spec.slice_spec],
                           [spec.dtype]))
    return restored

  def sharded_filename(self, filename_tensor, shard, num_shards):
    """Returns `filename_tensor` with the `-SSSSS-of-NNNNN` shard suffix."""
    return writes.sharded_filename(filename_tensor, shard, num_shards)

  def _AddSaveOps(self, filename_tensor, saveables):
    """Saves `saveables`; returns `filename_tensor` once they are written."""
    return control_flow_ops.with_dependencies(
        [self.save_op(filename_tensor, saveables)], filename_tensor)

  def _AddShardedSaveOpsForV2(self, checkpoint_prefix, per_device):
    """Writes one V2 shard per device, then merges them into one checkpoint.

    Each device writes `<prefix>_temp/part-SSSSS-of-NNNNN` (`<prefix>.part-...`
    on S3, where renames are not atomic anyway); `MergeV2Checkpoints` then
    produces `<prefix>.index` and `<prefix>.data-SSSSS-of-NNNNN` and removes
    the temporary directory.

    Args:
      checkpoint_prefix: scalar string tensor, the checkpoint prefix.
      per_device: `(device, saveables)` pairs from `_GroupByDevices`.

    Returns:
      A string tensor evaluating to `checkpoint_prefix` after the merge.
    """
    writers = [(
        variable_values.set_cpu0(device),
        lambda shard_prefix, group=group: self._AddSaveOps(shard_prefix, group))
               for device, group in per_device]
    # The merge runs beside the last shard.
    return writes.write_shards(checkpoint_prefix,
                               writers,
                               shard_filename=self.sharded_filename,
                               graph_compatible=True)

  def _AddShardedSaveOps(self, filename_tensor, per_device):
    """Saves one shard per device; returns the saved path tensor."""
    if self._write_version == saver_pb2.SaverDef.V2:
      return self._AddShardedSaveOpsForV2(checkpoint_prefix=filename_tensor,
                                          per_device=per_device)
    # V1: every shard is its own file; the result is the sharded filespec.
    num_shards = constant_op.constant(len(per_device), name="num_shards")
    written = []
    for index, (device, group) in enumerate(per_device):
      with ops.device(device):
        shard_file = self.sharded_filename(filename_tensor, index, num_shards)
        written.append(self._AddSaveOps(shard_file, group))
    with ops.control_dependencies(written):
      return writes.sharded_filespec(filename_tensor, num_shards)

  def _AddRestoreOps(self,
                     filename_tensor,
                     saveables,
                     restore_sequentially,
                     reshape,
                     preferred_shard=-1,
                     name="restore_all"):
    """Reads `saveables` from the checkpoint and assigns them.

    A restore over the restore memory limit (`restore_memory`, the
    automatic one, decided when the op is built: the v1 `Saver` takes no
    options) reads its saveables in runs of about
    `graph_restore_batch_bytes`, one `bulk_restore` each, at most
    `read_threads` at a time (`graph_restores.ReadChain`), so that a
    session holds a few runs of values rather than a second copy of the
    model. Restores under the limit build TensorFlow's ops.

    Args:
      filename_tensor: scalar string tensor, the checkpoint prefix.
      saveables: list of SaveableObjects.
      restore_sequentially: passed to `bulk_restore`.
      reshape: reshape each value to its variable's shape before assigning.
      preferred_shard: shard to open first.
      name: name of the returned op.

    Returns:
      An op grouping every assignment (None when executing eagerly).
    """
    sizes = [_saveable_bytes(saveable) for saveable in saveables]
    chain = graph_restores.ReadChain.for_bytes(sum(sizes))
    assigns = []
    for run in chain.runs(sizes):
      piece = saveables[run]
      with ops.control_dependencies(chain.waits_for()):
        restored = self.bulk_restore(filename_tensor, piece, preferred_shard,
                                     restore_sequentially)
      piece_assigns = self._assign_restored(piece, restored, reshape)
      chain.add(piece_assigns)
      assigns.extend(piece_assigns)
    return control_flow_ops.group(*assigns, name=name)

  def _assign_restored(self, saveables, restored, reshape):
    """Each saveable's restore op, given its slice of `restored`."""
    assigns = []
    start = 0
    for saveable in saveables:
      stop = start + len(saveable.specs)
      shapes = None
      if reshape:
        shapes = []
        for spec in saveable.specs:
          value = spec.tensor
          shape = value.get_shape()
          shapes.append(
              shape if shape.is_fully_defined() else array_ops.shape(value))
      assigns.append(saveable.restore(restored[start:stop], shapes))
      start = stop
    return assigns

  def _AddShardedRestoreOps(self, filename_tensor, per_device,
                            restore_sequentially, reshape):
    """Restores each device's saveables on that device."""
    shard_restores = []
    for index, (device, group) in enumerate(per_device):
      with ops.device(device):
        shard_restores.append(
            self._AddRestoreOps(filename_tensor,
                                group,
                                restore_sequentially,
                                reshape,
                                preferred_shard=index,
                                name="restore_shard"))
    return control_flow_ops.group(*shard_restores, name="restore_all")

  def _GroupByDevices(self, saveables):
    """Groups saveables by the (canonical) device of their tensors.

    Returns:
      A list of `(device, [saveables])` pairs sorted by device name.

    Raises:
      ValueError: if the specs of one saveable are on different devices.
    """
    for saveable in saveables:
      if len({pydev.canonical_name(spec.device) for spec in saveable.specs
             }) != 1:
        raise ValueError(
            "All tensors of a saveable object must be on the same device: "
            "%s" % saveable.name)
    return list(
        multi_device_saver.group_by_device(
            saveables, lambda saveable: pydev.canonical_name(saveable.specs[0].
                                                             device)).items())

  def build(self,
            names_to_saveables,
            reshape=False,
            sharded=False,
            max_to_keep=5,
            keep_checkpoint_every_n_hours=10000.0,
            name=None,
            restore_sequentially=False,
            filename="model"):
    """Adds save and restore ops for `names_to_saveables`; returns a SaverDef.

    Args:
      names_to_saveables: dict from checkpoint name to variable or
        SaveableObject, or a list of them (keyed by their op names).
      reshape: allow restoring values of another shape with as many elements.
      sharded: write one shard per device.
      max_to_keep: recorded in the SaverDef (None means 0: keep all).
      keep_checkpoint_every_n_hours: recorded in the SaverDef.
      name: name scope of the ops (default "save").
      restore_sequentially: passed on to `bulk_restore`.
      filename: default checkpoint prefix fed to the ops ("model" if None).

    Returns:
      A `SaverDef`.

    Raises:
      TypeError: if `names_to_saveables` has unsupported entries.
      ValueError: if a name or a variable appears twice.
    """
    return self._build_internal(names_to_saveables, reshape, sharded,
                                max_to_keep, keep_checkpoint_every_n_hours,
                                name, restore_sequentially, filename)

  def _build_internal(self,
                      names_to_saveables,
                      reshape=False,
                      sharded=False,
                      max_to_keep=5,
                      keep_checkpoint_every_n_hours=10000.0,
                      name=None,
                      restore_sequentially=False,
                      filename="model",
                      build_save=True,
                      build_restore=True):
    """`build`, optionally for only the save or only the restore side.

    TensorFlow's `Saver` calls builders through this signature; ours calls
    `build_with_restore_plan`.
    """
    saver_def, _ = self.build_with_restore_plan(names_to_saveables, reshape,
                                                sharded, max_to_keep,
                                                keep_checkpoint_every_n_hours,
                                                name, restore_sequentially,
                                                filename, build_save,
                                                build_restore)
    return saver_def

  def build_with_restore_plan(self,
                              names_to_saveables,
                              reshape=False,
                              sharded=False,
                              max_to_keep=5,
                              keep_checkpoint_every_n_hours=10000.0,
                              name=None,
                              restore_sequentially=False,
                              filename="model",
                              build_save=True,
                              build_restore=True):
    """`_build_internal`, also returning what the restore op reads.

    Executing eagerly, the save and/or restore happen right away (against
    `filename`), and the returned SaverDef carries the saved path as its
    save tensor name. A restore is checked against the checkpoint first.

    Returns:
      The `SaverDef`, and `(restore op name, read plan)`: the `Saver`
      checks checkpoints against the plan before running the restore op (a
      plan of None: read the plan from the graph). `(None, None)` eagerly.
    """
    eager = context.executing_eagerly()
    if not eager and not (build_save and build_restore):
      raise ValueError(
          "save and restore operations need to be built together when eager "
          "execution is not enabled.")
    saveables = saveables_from_var_list(names_to_saveables)
    hours = keep_checkpoint_every_n_hours
    saver_def = saver_pb2.SaverDef(max_to_keep=max_to_keep or 0,
                                   sharded=sharded,
                                   keep_checkpoint_every_n_hours=hours,
                                   version=self._write_version)

    with ops.name_scope(name, "save", [saveable.op for saveable in saveables]):
      default_prefix = array_ops.placeholder_with_default(filename or "model",
                                                          shape=(),
                                                          name="filename")
      # Savers are fed through "<scope>/Const:0", the name TF1 always used.
      prefix = array_ops.placeholder_with_default(default_prefix,
                                                  shape=(),
                                                  name="Const")
      plan = None
      if build_restore and reads_keys_of_specs(self):
        plan = plan_from_saveables(saveables, reshape)
        if eager:
          check_plan(plan, reads.readable_values(prefix.numpy()), eager=True)
      groups = self._GroupByDevices(saveables) if sharded else None
      if build_save:
        save_tensor = (self._AddShardedSaveOps(prefix, groups)
                       if sharded else self._AddSaveOps(prefix, saveables))
      if build_restore:
        restore_op = (self._AddShardedRestoreOps(prefix, groups,
                                                 restore_sequentially, reshape)
                      if sharded else self._AddRestoreOps(
                          prefix, saveables, restore_sequentially, reshape))

    if eager:
      # The work is done: record the path written (if any) instead of names.
      saver_def.filename_tensor_name = prefix.numpy()
      if build_save:
        saver_def.save_tensor_name = save_tensor.numpy()
      return saver_def, (None, None)

    saver_def.filename_tensor_name = prefix.name
    saver_def.save_tensor_name = save_tensor.name
    saver_def.restore_op_name = restore_op.name
    # Importing a meta graph looks up each PartitionedVariable of a
    # collection by name, so its concatenation op has to exist.
    graph = ops.get_default_graph()
    for key in graph.get_all_collection_keys():
      for item in graph.get_collection(key):
        if not isinstance(item, variables.PartitionedVariable):
          continue
        try:
          graph.get_operation_by_name(item.name)
        except KeyError:
          item.as_tensor()
    return saver_def, (restore_op.name, plan)


class BulkSaverBuilder(BaseSaverBuilder):
  """A builder whose restore reads all tensors with a single `RestoreV2`."""

  def bulk_restore(self, filename_tensor, saveables, preferred_shard,
                   restore_sequentially):
    del preferred_shard, restore_sequentially  # One op does it all.
    names, slices, dtypes_ = [], [], []
    for saveable in saveables:
      for spec in saveable.specs:
        names.append(spec.name)
        slices.append(spec.slice_spec)
        dtypes_.append(spec.dtype)
    # Values are read on the CPU, as TensorFlow's savers do.
    with ops.device("cpu:0"):
      return reads.restore_v2(filename_tensor, names, slices, dtypes_)


# Methods deciding which checkpoint keys a builder's restore op reads.
_RESTORE_METHODS = ("bulk_restore", "restore_op", "_AddRestoreOps",
                    "_AddShardedRestoreOps")


def reads_keys_of_specs(builder):
  """Whether `builder` restores every spec from its own name and slice.

  True for our builders. A subclass overriding how values are read may read
  other keys; its restores are then checked against the ops it builds (or,
  eagerly, not beforehand at all).
  """
  cls = type(builder)
  return all(
      getattr(cls, name) in (getattr(BaseSaverBuilder, name),
                             getattr(BulkSaverBuilder, name))
      for name in _RESTORE_METHODS)
