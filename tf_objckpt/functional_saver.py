"""The checkpoint I/O engine: the only code that reads or writes checkpoints.

Every `SaveV2`, `RestoreV2`, `MergeV2Checkpoints`, `ShardedFilename` and
`ShardedFilespec` op, and every opening of a checkpoint for reading, is
issued here, for object-based and name-based checkpoints, eagerly and when
graph building. Callers hand over saveables (or keys to read); this module
decides devices, batches, read threads, read-ahead and temporary names.

A save writes one shard per task (each `SaveV2` runs on the CPU next to the
data), numbered in the order the save meets each task, or the shards an
options' sharding callback makes (see `sharding`), under a temporary prefix
(eagerly from parallel threads), then `MergeV2Checkpoints` commits the
shards, and any files registered savers wrote, as one checkpoint; a single
shard is written in place (`SaveV2` writes each file under a temporary name
and renames it when complete). A restore reads a host's values with
`RestoreV2` on that host's CPU and hands each saveable its tensors: eagerly,
a large restore a piece at a time (`CheckpointValues.restore_in_pieces`);
when graph building, plain variables are read and assigned in batches
through one function call each (`restore_variables`).
"""

import collections
import concurrent.futures
import contextlib
import functools
import hashlib
import math
import os
import threading

from google.protobuf import message
from tensorflow.core.framework import attr_value_pb2
from tensorflow.core.framework import function_pb2
from tensorflow.core.protobuf import saver_pb2
from tensorflow.core.protobuf import trackable_object_graph_pb2
from tensorflow.python.eager import context
from tensorflow.python.framework import constant_op
from tensorflow.python.framework import device as pydev
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import errors
from tensorflow.python.framework import function
from tensorflow.python.framework import ops
from tensorflow.python.ops import array_ops
from tensorflow.python.ops import control_flow_ops
from tensorflow.python.ops import gen_io_ops
from tensorflow.python.ops import io_ops
from tensorflow.python.ops import string_ops
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.training import py_checkpoint_reader
from tensorflow.python.util import compat

from tf_objckpt.engine import bundle_index
from tf_objckpt.engine import commit
from tf_objckpt.engine import registered_savers as registered_savers_lib
from tf_objckpt.engine import sharding
from tf_objckpt.engine import variable_batches
from tf_objckpt.engine import variable_values

# Graph building, plain variables are restored in batches of at most about
# this many bytes, each through one call of a restore function. Each call
# costs TensorFlow milliseconds to prepare on the first run (fewer, larger
# calls are faster), and calls read in parallel.
GRAPH_RESTORE_BATCH_BYTES = 64 << 20

# Eager reads of more than this are split across threads: RestoreV2 spends
# its time looking up, copying and checksumming values, which runs in
# parallel. Each value counts for its bytes plus a lookup, which costs about
# as much as copying 8 KiB.
_PARALLEL_READ_MIN_BYTES = 16 << 20
_LOOKUP_COST_BYTES = 8 << 10
_READ_THREADS = max(1, min(4, os.cpu_count() or 1))
_read_pool = None

# Eager saves of several shards write them from this many threads at most.
_WRITE_THREADS = max(1, os.cpu_count() or 1)
_write_pool = None

# Values read ahead for restore-on-create are capped at this many bytes.
_READ_AHEAD_BUDGET_BYTES = 64 << 20

# Eager restores read and assign about this many bytes of values at a time
# (see `CheckpointValues.restore_in_pieces`).
_RESTORE_PIECE_BYTES = 64 << 20

# Held by each save of this process (see `one_save_at_a_time`).
_SAVE_LOCK = threading.RLock()


# ----------------------------------------------------------------------------
# Opening checkpoints.
# ----------------------------------------------------------------------------


def open_reader(save_path):
  """Opens a checkpoint's index, raising TensorFlow errors that name it.

  Raises:
    NotFoundError: If no checkpoint exists at `save_path`.
    DataLossError: If the checkpoint's files are corrupt.
  """
  try:
    return py_checkpoint_reader.NewCheckpointReader(save_path)
  except errors.NotFoundError as e:
    raise errors.NotFoundError(
        None, None,
        f"Error when restoring from checkpoint or SavedModel at "
        f"{save_path!r}: no checkpoint found there ({e.message}). Please "
        "double-check that the path is correct. You may be missing the "
        "checkpoint suffix (e.g. the '-1' in 'path/to/ckpt-1').") from e
  except (errors.OpError, IndexError) as e:
    # An index whose footer points past its end fails as an IndexError.
    raise errors.DataLossError(
        None, None,
        f"The checkpoint at {save_path!r} is corrupt or truncated and cannot "
        f"be read: its index file "
        f"{bundle_index.index_file_name(save_path)!r} is damaged: "
        f"{getattr(e, 'message', e)}") from e


def read_object_graph(reader, save_path):
  """The checkpoint's TrackableObjectGraph, or None if it is name-based.

  Raises:
    DataLossError: If the stored object graph is damaged.
  """
  if not reader.has_tensor(tf_base.OBJECT_GRAPH_PROTO_KEY):
    return None
  proto = trackable_object_graph_pb2.TrackableObjectGraph()
  # A damaged file fails as a bad proto, or in the reader: as an OpError, or
  # as an IndexError for a read past the end of a truncated data file.
  try:
    proto.ParseFromString(reader.get_tensor(tf_base.OBJECT_GRAPH_PROTO_KEY))
  except (message.DecodeError, errors.OpError, IndexError) as e:
    raise errors.DataLossError(
        None, None,
        f"The object graph stored in checkpoint {save_path!r} is corrupt"
        f"{_in_data_file(save_path, tf_base.OBJECT_GRAPH_PROTO_KEY)}: "
        f"{e}") from e
  return proto


def _in_data_file(save_path, key):
  """' (data file <name>)' for the file holding `key`, or '' if unknown."""
  try:
    data_file = bundle_index.read_bundle_index(save_path).data_file_of(key)
  except errors.OpError:
    return ""
  return "" if data_file is None else f" (data file {data_file!r})"


def damage_named(save_path, error):
  """`error`, from a read of `save_path`, retold naming the damaged file.

  Graph-mode reads fail inside a session with TensorFlow's message, which
  says neither the key nor the file. This finds them, reading the
  checkpoint's values one at a time (only after a failure), and returns an
  error of the same type whose message names both; `error` itself if no
  single value fails to read.
  """
  try:
    reader = open_reader(save_path)
  except errors.OpError as open_error:
    return type(error)(error.node_def, error.op, open_error.message)
  for key in sorted(reader.get_variable_to_shape_map()):
    try:
      reader.get_tensor(key)
    except (errors.OpError, IndexError) as e:
      return type(error)(
          error.node_def, error.op,
          f"Failed to read values from checkpoint {save_path!r}: checkpoint "
          f"key {key!r}{_in_data_file(save_path, key)} cannot be read: {e}")
  return error


def one_save_at_a_time(save):
  """Decorates a save so that saves from several threads run in turn.

  A save numbers its checkpoint, writes it and updates the state file; run
  together from two threads, saves could share a number or record each
  other's paths. Serialized, each returns a distinct, complete checkpoint
  whose number is its own count. Nested saves (a manager's save calling a
  checkpoint's write) run on.
  """

  @functools.wraps(save)
  def save_alone(*args, **kwargs):
    with _SAVE_LOCK:
      return save(*args, **kwargs)

  return save_alone


# ----------------------------------------------------------------------------
# The file ops.
# ----------------------------------------------------------------------------


def save_v2(file_prefix, names, slices, tensors):
  """One `SaveV2` writing `tensors` under `names` (a V2 checkpoint)."""
  with variable_batches.direct_kernels(len(tensors)):
    return io_ops.save_v2(file_prefix, names, slices, tensors)


def save_v1(filename, names, slices, tensors):
  """One `SaveSlices` writing a V1 checkpoint file."""
  return io_ops._save(  # pylint: disable=protected-access
      filename=filename, tensor_names=names, tensors=tensors,
      tensor_slices=slices)


def restore_v2(file_prefix, names, slices, dtypes_):
  """One `RestoreV2` reading `names` (on the current device)."""
  with variable_batches.direct_kernels(len(names)):
    return io_ops.restore_v2(file_prefix, names, slices, dtypes_)


registered_saver_filename = registered_savers_lib.registered_saver_filename


def sharded_filename(filename_tensor, shard, num_shards):
  """The prefix with the `-SSSSS-of-NNNNN` suffix of one shard."""
  return gen_io_ops.sharded_filename(filename_tensor, shard, num_shards)


def sharded_filespec(file_prefix, num_shards):
  """The glob-free filespec of all shards of a V1 checkpoint."""
  return gen_io_ops.sharded_filespec(file_prefix, num_shards)


def temp_shard_prefix(file_prefix):
  """Where shards are written before the merge: `<prefix>_temp/part`.

  On S3, where renames are not atomic anyway, `<prefix>.part` instead.
  """
  with ops.device("CPU"):
    on_s3 = string_ops.regex_full_match(file_prefix, "^s3://.*")
    suffix = array_ops.where(on_s3, constant_op.constant(".part"),
                             constant_op.constant(os.path.normpath(
                                 commit.TEMP_DIR_SUFFIX + "/part")))
    return string_ops.string_join([file_prefix, suffix])


def write_shards(file_prefix, shard_writers, merge_device=None,
                 shard_filename=sharded_filename, graph_compatible=False,
                 other_prefixes=()):
  """Writes shards under a temporary prefix, then merges them into one.

  Args:
    file_prefix: The checkpoint prefix, a string tensor.
    shard_writers: `(device, write)` pairs: `write(shard_prefix)` writes one
      shard on `device` and returns its op (or a tensor depending on it).
    merge_device: The device to merge on; None for the last shard's.
    shard_filename: Names shard `index` of `num_shards` under a prefix.
    graph_compatible: Build the v1 `Saver`'s graph: the shard count is a
      constant named "num_shards", and the result is `file_prefix` once
      merged rather than the merge op.
    other_prefixes: Checkpoints written already (by registered savers),
      merged first.

  Returns:
    The `MergeV2Checkpoints` op (or `file_prefix` depending on it), run once
    every shard is written.
  """
  temp_prefix = temp_shard_prefix(file_prefix)
  num_shards = len(shard_writers)
  if graph_compatible:
    num_shards = constant_op.constant(num_shards, name="num_shards")

  def name_and_write(index, write):
    shard_prefix = shard_filename(temp_prefix, index, num_shards)
    return shard_prefix, write(shard_prefix)

  named_and_written = _write_each(
      [(device, functools.partial(name_and_write, index, write))
       for index, (device, write) in enumerate(shard_writers)])
  shard_prefixes = [shard_prefix for shard_prefix, _ in named_and_written]
  written = [write for _, write in named_and_written]
  device = shard_writers[-1][0] if shard_writers else None
  with ops.control_dependencies(written), ops.device(merge_device or device):
    merge = gen_io_ops.merge_v2_checkpoints(
        list(other_prefixes) + shard_prefixes, file_prefix,
        delete_old_dirs=True)
    if not graph_compatible:
      return merge
    with ops.control_dependencies([merge]):
      return array_ops.identity(file_prefix)


def _write_each(writes):
  """Runs each `(device, write)` on its device; returns their results.

  Eagerly, writes on this process's devices run at once, one thread each
  (up to the number of cores): SaveV2 releases the GIL while it copies,
  checksums and writes. Graph building, the ops are built in order and the
  session runs them in parallel.
  """
  if not (context.executing_eagerly() and len(writes) > 1 and
          _all_local([device for device, _ in writes])):
    return [_run_on(device, write) for device, write in writes]
  global _write_pool
  if _write_pool is None:
    _write_pool = concurrent.futures.ThreadPoolExecutor(
        _WRITE_THREADS, thread_name_prefix="tf_objckpt_write")
  futures = [_write_pool.submit(_run_on, device, write, eager=True)
             for device, write in writes]
  # Every write ends before any error is raised, so that the cleanup of a
  # failed save finds no write still running.
  concurrent.futures.wait(futures)
  return [future.result() for future in futures]


def _all_local(devices):
  """Whether eager ops on `devices` may be issued from several threads.

  Only on devices of this process, executing synchronously: remote ops and
  asynchronous ones are queued per thread, so another thread could use a
  tensor before the op making it has run.
  """
  if context.is_async():
    return False
  host = _task_of(context.context().host_address_space())
  return all(pydev.DeviceSpec.from_string(device or "").job is None or
             _task_of(device) == host for device in devices)


def _task_of(device):
  spec = pydev.DeviceSpec.from_string(device or "")
  return spec.job, spec.replica or 0, spec.task or 0


def _run_on(device, write, eager=False):
  """Calls `write()` on `device` (eagerly, in a thread of its own)."""
  with contextlib.ExitStack() as stack:
    if eager:  # A new thread's default mode may not be the caller's.
      stack.enter_context(context.eager_mode())
    stack.enter_context(ops.device(device))
    return write()


# ----------------------------------------------------------------------------
# Eager reads.
# ----------------------------------------------------------------------------


def eager_restore_v2(file_prefix, names, slices, dtypes_, byte_sizes,
                     device):
  """RestoreV2 of `names`, executing eagerly; large reads use threads.

  Args:
    file_prefix: The checkpoint path, a string tensor.
    names: The checkpoint keys to read.
    slices: Their `shape_and_slice` strings.
    dtypes_: Their dtypes.
    byte_sizes: Their (approximate) sizes, to balance the threads.
    device: The device to read on.

  Returns:
    The values, in the order of `names`.
  """
  chunks = _balanced_chunks(byte_sizes)

  def read(chunk):
    with ops.device(device):
      return restore_v2(
          file_prefix, [names[i] for i in chunk], [slices[i] for i in chunk],
          [dtypes_[i] for i in chunk])

  if len(chunks) == 1:
    return read(chunks[0])
  global _read_pool
  if _read_pool is None:
    _read_pool = concurrent.futures.ThreadPoolExecutor(
        _READ_THREADS - 1, thread_name_prefix="tf_objckpt_read")
  others = [_read_pool.submit(read, chunk) for chunk in chunks[1:]]
  values = list(read(chunks[0]))
  for future in others:
    values.extend(future.result())
  return values


def _balanced_chunks(byte_sizes):
  """Splits indices into runs of about equal cost, one per read thread."""
  costs = [size + _LOOKUP_COST_BYTES for size in byte_sizes]
  total = sum(costs)
  count = min(_READ_THREADS, len(costs))
  if total < _PARALLEL_READ_MIN_BYTES or count < 2:
    return [range(len(costs))]
  chunks, start, filled = [], 0, 0
  for index, cost in enumerate(costs):
    filled += cost
    if filled >= total * (len(chunks) + 1) / count and index + 1 < len(
        costs):
      chunks.append(range(start, index + 1))
      start = index + 1
  chunks.append(range(start, len(costs)))
  return chunks


def byte_size(dims, dtype):
  """About how many bytes a value of shape `dims` and `dtype` takes."""
  return math.prod(dims) * (64 if dtype is dtypes.string else dtype.size)


class KeyToRead:
  """The name, slice and dtype of one value to read (a minimal SaveSpec)."""

  __slots__ = ("name", "slice_spec", "dtype")

  def __init__(self, name, slice_spec, dtype):
    self.name = name
    self.slice_spec = slice_spec
    self.dtype = dtype


class CheckpointValues:
  """What one restore reads from a checkpoint: its dtypes, shapes, values.

  Eager restores of existing objects read and assign their values in
  pieces (`restore_in_pieces`). Eager reads of values for objects not
  created yet are read ahead: a key announced with `await_key` is read
  together with the next read (up to a byte budget) and kept until asked
  for, so creating N variables after a restore costs one `RestoreV2`, not N.
  """

  def __init__(self, save_path, reader, path_tensor, options=None):
    """Reads `save_path` through `reader` (see `open_reader`).

    Args:
      save_path: The checkpoint path, a string (for messages).
      reader: A reader opened on it.
      path_tensor: A string tensor holding (or fed) the path.
      options: Optional `tf.train.CheckpointOptions`: the device to read on.
    """
    self.save_path = save_path
    self.path_tensor = path_tensor
    # Interned DTypes, so that dtype checks are identity checks.
    self.dtypes = {
        key: dtypes.as_dtype(dtype_enum) for key, dtype_enum in
        reader._GetVariableToDataTypeMap().items()}  # pylint: disable=protected-access
    self.shapes = reader.get_variable_to_shape_map()
    self._reader = reader
    self._device = io_device(options) or "/cpu:0"
    self._awaited = {}  # Keys of values waiting for their objects (ordered).
    self._read_ahead = {}  # (key, slice) -> value read ahead.
    # Eager reads take the path tensor; graph building, the path itself.
    self._eager_path = (path_tensor if context.executing_eagerly()
                        else save_path)
    self.pieces_need_checking = True  # False once all values were read.

  def python_value(self, key):
    """The value of `key` as a numpy value (Python state)."""
    return self._reader.get_tensor(key)

  def await_key(self, key):
    """Announces that `key` will be read eagerly once its object exists."""
    if context.executing_eagerly():
      self._awaited[key] = None

  def read_one(self, key, shape_and_slice=""):
    """Reads one value: a tensor now (eager), or a read op (graph)."""
    if not context.executing_eagerly():
      with ops.init_scope(), ops.device(self._device):
        value, = restore_v2(self.path_tensor, [key], [shape_and_slice],
                            [self.dtypes[key]])
      return value
    return self.read([KeyToRead(key, shape_and_slice, self.dtypes.get(key))])[0]

  def read(self, specs):
    """Reads the values of `specs` eagerly, reading ahead awaited values."""
    if not specs:  # An object that saves nothing (RestoreV2 needs a key).
      return []
    if not self._read_ahead and not self._awaited:
      return self._restore_v2(specs)
    wanted = [(spec.name, spec.slice_spec) for spec in specs]
    missing = [spec for spec, key in zip(specs, wanted)
               if key not in self._read_ahead]
    if missing:
      to_read = missing + self._read_ahead_specs(
          {spec.name for spec in missing})
      try:
        values = self._restore_v2(to_read)
      except errors.OpError:
        if len(to_read) == len(missing):
          raise
        # A value read ahead may be the unreadable one; it must not fail
        # this read. Read only what is wanted; the rest is read when needed.
        to_read = missing
        values = self._restore_v2(to_read)
      for spec, value in zip(to_read, values):
        self._read_ahead[(spec.name, spec.slice_spec)] = value
    for name, _ in wanted:
      self._awaited.pop(name, None)
    return [self._read_ahead.pop(key) for key in wanted]

  def restore_in_pieces(self, units):
    """Reads the values of `units` eagerly and hands each unit its own.

    A large restore reads and restores a piece of at most about
    `_RESTORE_PIECE_BYTES` at a time, so that it holds one piece of values,
    not a second copy of the model, and each piece reuses the memory the
    previous one freed (new memory costs page faults, and on many virtual
    machines the host's work on first touch: 300 MiB of values restore
    about 3x faster in pieces there). Damage is still found before anything
    is restored: every piece but the last is read once beforehand (reading
    checks each value's checksum) and dropped, and the last is restored
    first.

    Args:
      units: `(specs, restore)` pairs; `restore(values)` is called with the
        values of `specs`, in order.
    """
    if not units:
      return
    pieces = self._pieces(units)
    for piece in pieces[:-1] if self.pieces_need_checking else ():
      unread = [spec for specs, _ in piece for spec in specs
                if (spec.name, spec.slice_spec) not in self._read_ahead]
      if unread:
        self._restore_v2(unread)
    for piece in pieces[-1:] + pieces[:-1]:
      values = self.read([spec for specs, _ in piece for spec in specs])
      start = 0
      with variable_batches.direct_kernels(len(values)):
        for specs, restore_unit in piece:
          restore_unit(values[start:start + len(specs)])
          start += len(specs)
      del values  # Freed before the next piece is read into new memory.

  def _pieces(self, units):
    """Splits `units` into runs of at most about `_RESTORE_PIECE_BYTES`.

    Restores of up to twice that are read whole: below it, reading values
    twice costs more than new memory does.
    """
    sizes = [sum(byte_size(self.shapes.get(spec.name, ()), spec.dtype)
                 for spec in specs) for specs, _ in units]
    total = sum(sizes)
    if total <= 2 * _RESTORE_PIECE_BYTES:
      return [units]
    target = total / math.ceil(total / _RESTORE_PIECE_BYTES)
    return [units[run] for run in _runs_of_bytes(sizes, target)]

  def _read_ahead_specs(self, excluded):
    budget = _READ_AHEAD_BUDGET_BYTES
    extra = []
    for key in self._awaited:
      if key in excluded or (key, "") in self._read_ahead:
        continue
      budget -= byte_size(self.shapes[key], self.dtypes[key])
      if budget < 0:
        break
      extra.append(KeyToRead(key, "", self.dtypes[key]))
    return extra

  def _restore_v2(self, specs):
    """One eager RestoreV2 of `specs`; errors name the checkpoint and key."""
    try:
      return self._read_unchecked(specs)
    except errors.OpError as e:
      failing = self._unreadable(specs) or specs[0]
      raise type(e)(
          e.node_def, e.op,
          f"Failed to read values from checkpoint {self.save_path!r}: "
          f"checkpoint key {failing.name!r}"
          f"{_in_data_file(self.save_path, failing.name)} cannot be read: "
          f"{e.message}") from e

  def _read_unchecked(self, specs):
    return eager_restore_v2(
        self._eager_path, [spec.name for spec in specs],
        [spec.slice_spec for spec in specs],
        [spec.dtype.base_dtype for spec in specs],
        [byte_size(self.shapes.get(spec.name, ()), spec.dtype)
         for spec in specs],
        self._device)

  def _unreadable(self, specs):
    """The first of `specs` that fails to read alone, found by bisection.

    Only called once a read has failed, so that the error names the value
    that is damaged rather than the first one of the read. None if every
    half reads (the failure did not come from one value).
    """
    while len(specs) > 1:
      half = len(specs) // 2
      try:
        self._read_unchecked(specs[:half])
      except errors.OpError:
        specs = specs[:half]
        continue
      specs = specs[half:]
    try:
      self._read_unchecked(specs)
    except errors.OpError:
      return specs[0]
    return None


# ----------------------------------------------------------------------------
# Graph-mode batched variable restores.
# ----------------------------------------------------------------------------


def restore_variables(file_prefix, variables, names, slices, handle_nodes):
  """Ops restoring `variables` (of one `batch_key`) from a checkpoint.

  Variables are restored in batches of about `GRAPH_RESTORE_BATCH_BYTES`,
  each by one call of a function that finds them by name (`_VarHandlesOp`),
  reads their values (`RestoreV2`) and assigns them. Grappler, which runs
  on the first `Session.run` of a restore and costs about 5 ms per
  optimizer pass per thousand edges, sees only the calls and the path they
  read: handles, keys and values stay inside the calls.

  Args:
    file_prefix: The checkpoint path, a string tensor.
    variables: Resource variables.
    names: Their checkpoint keys.
    slices: Their `shape_and_slice` strings.
    handle_nodes: The NodeDefs of their handle ops.

  Returns:
    The op restoring each variable (one per batch), in order.
  """
  restore_ops = []
  for batch in _byte_batches(variables):
    restore_op = _call_restore_function(
        file_prefix, variables[batch], names[batch], slices[batch],
        handle_nodes[batch])
    restore_ops.extend([restore_op] * len(variables[batch]))
  return restore_ops


def _byte_batches(variables):
  """Slices of `variables` holding about `GRAPH_RESTORE_BATCH_BYTES` each."""
  sizes = [byte_size(variable.shape.as_list()
                     if variable.shape.is_fully_defined() else [],
                     variable.dtype.base_dtype) for variable in variables]
  return _runs_of_bytes(sizes, GRAPH_RESTORE_BATCH_BYTES)


def _runs_of_bytes(sizes, limit):
  """Consecutive slices of `sizes` adding up to at most `limit` bytes each.

  A run exceeds `limit` only when its first item alone does.
  """
  if not sizes:
    return []
  runs, start, filled = [], 0, 0
  for index, size in enumerate(sizes):
    if index > start and filled + size > limit:
      runs.append(slice(start, index))
      start, filled = index, 0
    filled += size
  return runs + [slice(start, len(sizes))]


def _call_restore_function(file_prefix, variables, names, slices,
                           handle_nodes):
  """One call of a function restoring `variables`.

  The call names the function as its op, so the function runs on the
  device of its variables like any op, without the placement and
  partitioning that a `PartitionedCall` does when it first runs.
  """
  graph = ops.get_default_graph()
  definition = _restore_function(
      variable_batches.handle_attrs(variables, shapes=False,
                                    handle_nodes=handle_nodes),
      names, slices)
  function_name = definition.signature.name
  if not graph._is_function(function_name):  # pylint: disable=protected-access
    library = function_pb2.FunctionDefLibrary(function=[definition])
    for defined_function in function.from_library(library):
      defined_function.add_to_graph(graph)
  with ops.colocate_with(variables[0].handle.op):
    return variable_batches.create_op(
        function_name, "RestoreVariables", [file_prefix], [],
        _disable_call_shape_inference=attr_value_pb2.AttrValue(b=True))


def _restore_function(handle_attrs, names, slices):
  """The FunctionDef restoring the variables `handle_attrs` finds.

  Its one input is the checkpoint path; the keys and slices it reads are
  constants of its body. It finds the variables by container and shared
  name, on the device it runs on (its caller is colocated with them).
  `_noinline` keeps Grappler from copying its body into the graph, and
  `_tf_data_function` from optimizing it with the graph (there is nothing
  in it to optimize). Named after its content, so that the same name in any
  graph (one imported from another program's meta graph, say) means the
  same function.
  """
  definition = function_pb2.FunctionDef()
  signature = definition.signature
  signature.is_stateful = True
  signature.input_arg.add(name="prefix", type=dtypes.string.as_datatype_enum)
  definition.attr["_noinline"].b = True
  definition.attr["_tf_data_function"].b = True
  for name, strings in (("names", names), ("slices", slices)):
    constant = definition.node_def.add(name=name, op="Const")
    constant.attr["dtype"].type = dtypes.string.as_datatype_enum
    value = constant.attr["value"].tensor
    value.dtype = dtypes.string.as_datatype_enum
    value.tensor_shape.dim.add(size=len(strings))
    value.string_val.extend(compat.as_bytes(string) for string in strings)
  dtype_enums = handle_attrs["dtypes"].list.type
  count = len(dtype_enums)
  handles = definition.node_def.add(name="handles", op="_VarHandlesOp")
  handles.attr["N"].i = count
  for attr, value in handle_attrs.items():
    handles.attr[attr].CopyFrom(value)
  values = definition.node_def.add(
      name="values", op="RestoreV2",
      input=["prefix", "names:output:0", "slices:output:0"])
  values.attr["dtypes"].CopyFrom(handle_attrs["dtypes"])
  for index in range(count):
    assign = definition.node_def.add(
        name=f"assign{index}", op="AssignVariableOp",
        input=[f"handles:resources:{index}", f"values:tensors:{index}"])
    assign.attr["dtype"].type = dtype_enums[index]
  digest = hashlib.sha256(
      definition.SerializeToString(deterministic=True)).hexdigest()[:16]
  signature.name = f"tf_objckpt_restore_variables_{count}_{digest}"
  return definition


# ----------------------------------------------------------------------------
# Saving and restoring saveables.
# ----------------------------------------------------------------------------


def io_device(options):
  """The device `options` asks to read and write on, or None."""
  return getattr(options, "experimental_io_device", None)


def group_by_device(saveables, device_of):
  """`{device_of(saveable): [saveables]}`, in order of device name.

  (The v1 `Saver`'s order; object-based saves number files in the order
  they meet each task: `sharding.group_by_task`.)
  """
  by_device = collections.defaultdict(list)
  for saveable in saveables:
    by_device[device_of(saveable)].append(saveable)
  return dict(sorted(by_device.items()))


def _write_shard(shard, shard_prefix):
  """Writes one `sharding.ShardToWrite` to `shard_prefix` with one SaveV2."""
  return save_v2(shard_prefix, shard.names, shard.slices, shard.tensors)


class _DeviceGroup:
  """The saveables whose tensors live on one host."""

  def __init__(self, saveables):
    self.saveables = saveables
    self.specs = [spec for saveable in saveables for spec in saveable.specs]

  def save(self, shard_prefix):
    """Writes this group's tensors to `shard_prefix` with one SaveV2."""
    names, slices, tensors = [], [], []
    for spec, tensor in zip(self.specs,
                            variable_values.spec_tensors(self.specs)):
      if tensor is None:  # An uninitialized variable: nothing to save.
        continue
      names.append(spec.name)
      slices.append(spec.slice_spec)
      tensors.append(tensor)
    return save_v2(shard_prefix, names, slices, tensors)

  def restore(self, file_prefix, device, batch_variables):
    """Reads this group's values on `device`; returns restore ops.

    Graph building with `batch_variables`, plain variables worth batching
    are read and assigned in batches (`_restore_variable_batches`); the
    rest are read by `RestoreV2`s and handed to their saveables.
    """
    restore_ops = {}
    saveables = self.saveables
    # Batches read on their variables' host, so not with an I/O device.
    if batch_variables and not context.executing_eagerly():
      restore_ops = _restore_variable_batches(file_prefix, saveables)
      saveables = [saveable for saveable in saveables
                   if saveable.name not in restore_ops]
    for batch in _restore_batches(saveables):
      specs = [spec for saveable in batch for spec in saveable.specs]
      with ops.device(device):
        restored = restore_v2(
            file_prefix, [spec.name for spec in specs],
            [spec.slice_spec for spec in specs],
            [spec.dtype.base_dtype for spec in specs])
      restore_ops.update(apply_restored(batch, restored))
    return restore_ops


def _restore_batches(saveables):
  """The saveables to read with one RestoreV2 each.

  Eagerly, all of them. Graph building, batches of at most
  `variable_batches.GRAPH_BATCH_SIZE` values: Grappler's cost grows faster
  than linearly with an op's number of outputs.
  """
  if not saveables:
    return []
  if context.executing_eagerly():
    return [saveables]
  batches, batch, size = [], [], 0
  for saveable in saveables:
    if batch and size + len(saveable.specs) > (
        variable_batches.GRAPH_BATCH_SIZE):
      batches.append(batch)
      batch, size = [], 0
    batch.append(saveable)
    size += len(saveable.specs)
  return batches + [batch]


def apply_restored(saveables, tensors):
  """Hands each saveable its slice of `tensors` (ordered like its specs).

  Returns:
    `{saveable name: restore op}` (ops are None when executing eagerly).
  """
  restore_ops = {}
  start = 0
  for saveable in saveables:
    values = tensors[start:start + len(saveable.specs)]
    start += len(saveable.specs)
    if context.executing_eagerly():  # Eager ops run where their inputs live.
      restore_ops[saveable.name] = saveable.restore(values, None)
    else:
      with ops.device(saveable.device):
        restore_ops[saveable.name] = saveable.restore(values, None)
  return restore_ops


def _restore_variable_batches(file_prefix, saveables):
  """Restore ops of the plain variables among `saveables` worth batching.

  Returns:
    `{saveable name: restore op}` for those variables.
  """
  batches = {}
  for saveable in saveables:
    if variable_values.is_plain_variable(saveable):
      handle_node = saveable.op.handle.op.node_def
      key = variable_batches.batch_key(saveable.op, handle_node)
      if key is not None:
        batches.setdefault(key, []).append((saveable, handle_node))
  restore_ops = {}
  for batch in batches.values():
    if not variable_batches.worth_batching(len(batch)):
      continue
    specs = [saveable.specs[0] for saveable, _ in batch]
    batch_ops = restore_variables(
        file_prefix, [saveable.op for saveable, _ in batch],
        [spec.name for spec in specs], [spec.slice_spec for spec in specs],
        [handle_node for _, handle_node in batch])
    for (saveable, _), restore_op in zip(batch, batch_ops):
      restore_ops[saveable.name] = restore_op
  return restore_ops


class Saver:
  """Saves and restores a fixed list of `SaveableObject`s.

  Works eagerly (saves and restores immediately) and when graph building
  (returns ops; `file_prefix` may be a placeholder, so one set of ops serves
  every path).
  """

  def __init__(self, saveables):
    """Groups `saveables` by task, in the order TensorFlow numbers files.

    Registered savers' saves (with a `registered_saver_name` and a
    `save(prefix)`) write files of their own, merged with the shards.
    """
    self._registered = [saveable for saveable in saveables
                        if hasattr(saveable, "registered_saver_name")]
    if self._registered:
      saveables = [saveable for saveable in saveables
                   if not hasattr(saveable, "registered_saver_name")]
    self._by_task = sharding.group_by_task(saveables)
    self._groups = {device: _DeviceGroup(group)
                    for device, group in self._by_task.items()}

  def save(self, file_prefix, options=None, in_place=True):
    """Writes a checkpoint at `file_prefix`.

    Args:
      file_prefix: A string or string tensor.
      options: Optional `tf.train.CheckpointOptions`; its
        `experimental_io_device` runs the writes.
      in_place: Whether a single shard may be written in place. Such a write
        creates the prefix's directory if only that is missing, where a
        merge fails; pass False unless the caller created the directory.

    Returns:
      When graph building, the op that writes the checkpoint; eagerly, None.
    """
    device_for_io = io_device(options)
    file_prefix = ops.convert_to_tensor(file_prefix, dtype=dtypes.string)
    registered_prefixes = self._write_registered(file_prefix)
    writers = [(device_for_io or device, write)
               for device, write in self._shard_writers(options)]
    if len(writers) == 1 and in_place and not self._registered:
      # One shard: SaveV2 writes it in place (each file under a temporary
      # name, renamed when complete), as a merge of one shard would.
      (device, write), = writers
      with ops.device(device):
        save = write(file_prefix)
    else:
      save = write_shards(file_prefix, writers,
                          merge_device=device_for_io or "/cpu:0",
                          other_prefixes=registered_prefixes)
    return None if context.executing_eagerly() else save

  def _write_registered(self, file_prefix):
    """Runs the registered savers; returns the prefixes they wrote.

    Each writes under `<file_prefix>-<saver name>`, as in TensorFlow.
    """
    prefixes = []
    for registered in self._registered:
      with ops.device("/cpu:0"):
        saver_prefix = registered_saver_filename(
            file_prefix, registered.registered_saver_name)
      prefixes.extend(registered.save(saver_prefix))
    return prefixes

  def _shard_writers(self, options):
    """`(device, write)` of each data file, in file order.

    One per task, or the shards the options' sharding callback makes of
    each task's tensors (see `sharding`).
    """
    callback = sharding.sharding_callback(options)
    if callback is None:
      groups = self._groups or {"/cpu:0": _DeviceGroup([])}
      return [(device, group.save) for device, group in groups.items()]
    return [(shard.task, functools.partial(_write_shard, shard))
            for shard in sharding.callback_shards(callback, self._by_task)]

  def restore(self, file_prefix, options=None):
    """Restores every saveable from `file_prefix`.

    Args:
      file_prefix: A string or string tensor.
      options: Optional `tf.train.CheckpointOptions`; its
        `experimental_io_device` runs the reads.

    Returns:
      `{saveable name: restore op}` (ops are None when executing eagerly).
    """
    device_for_io = io_device(options)
    file_prefix = ops.convert_to_tensor(file_prefix, dtype=dtypes.string)
    restore_ops = {}
    for device, group in self._groups.items():
      restore_ops.update(group.restore(
          file_prefix, device_for_io or device,
          batch_variables=device_for_io is None))
    return restore_ops

  @classmethod
  def from_saveables(cls, saveables, registered_savers=None,
                     call_with_mapped_captures=None):
    """A saver of `saveables` and `{saver name: {path: trackable}}`."""
    del call_with_mapped_captures  # The saveables are built already.
    return cls(list(saveables) + [
        registered_savers_lib.RegisteredSave(name, trackables)
        for name, trackables in (registered_savers or {}).items()])

  def to_proto(self):
    """A `SaverDef` of save and restore ops added to the current graph."""
    if context.executing_eagerly():
      raise RuntimeError("to_proto() adds ops to a graph: call it when "
                         "building a graph, not eagerly.")
    filename = array_ops.placeholder(dtypes.string, [], "saver_filename")
    with ops.control_dependencies([self.save(filename, in_place=False)]):
      save_tensor = array_ops.identity(filename)
    return saver_pb2.SaverDef(
        filename_tensor_name=filename.name,
        save_tensor_name=save_tensor.name,
        restore_op_name=self.restore_op(filename).name,
        version=saver_pb2.SaverDef.V2)

  def restore_op(self, file_prefix):
    """A single op (graph mode) that restores everything."""
    restore_ops = [op for op in self.restore(file_prefix).values()
                   if op is not None]
    if context.executing_eagerly():
      return None
    return control_flow_ops.group(restore_ops)
