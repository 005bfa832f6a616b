"""Writes and reads `SaveableObject`s with the SaveV2/RestoreV2 kernels.

A save writes one shard per device (each `SaveV2` runs on the CPU of the
device's host, next to the data) into a temporary prefix, then
`MergeV2Checkpoints` joins the shards into one checkpoint: one `.index`
file and one `.data-?????-of-?????` file per shard; a single shard is
written in place. A restore reads the values of a device with `RestoreV2`
on that host's CPU, then hands each saveable its tensors to assign on its
own device; when graph building, plain variables are read and assigned in
batches instead (`variable_batches.restore_variables`).
"""

import collections
import concurrent.futures
import functools
import os

from tensorflow.python.eager import context
from tensorflow.python.framework import constant_op
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import ops
from tensorflow.python.ops import control_flow_ops
from tensorflow.python.ops import gen_io_ops
from tensorflow.python.ops import string_ops

from tf_objckpt import saveable_object_util
from tf_objckpt import variable_batches

# Shards are written under "<prefix>_temp/part-*" and merged into <prefix>.
_TEMP_SUFFIX = "_temp/part"


# Eager reads of more than this are split across threads: RestoreV2 spends
# its time looking up, copying and checksumming values, which runs in
# parallel. Each value counts for its bytes plus a lookup, which costs about
# as much as copying 8 KiB.
_PARALLEL_READ_MIN_BYTES = 16 << 20
_LOOKUP_COST_BYTES = 8 << 10
_READ_THREADS = max(1, min(4, os.cpu_count() or 1))
_read_pool = None


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
      return gen_io_ops.restore_v2(
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


def io_device(options):
  """The device `options` asks to read and write on, or None."""
  return getattr(options, "experimental_io_device", None)


@functools.lru_cache(maxsize=None)
def _host_cpu(device):
  return saveable_object_util.set_cpu0(device or "/cpu:0")


class _DeviceGroup:
  """The saveables whose tensors live on one host."""

  def __init__(self, saveables):
    self.saveables = saveables
    self.specs = [spec for saveable in saveables for spec in saveable.specs]

  def save(self, shard_prefix):
    """Writes this group's tensors to `shard_prefix` with one SaveV2."""
    names, slices, tensors = [], [], []
    for spec, tensor in zip(self.specs,
                            saveable_object_util.spec_tensors(self.specs)):
      if tensor is None:  # An uninitialized variable: nothing to save.
        continue
      names.append(spec.name)
      slices.append(spec.slice_spec)
      tensors.append(tensor)
    return gen_io_ops.save_v2(shard_prefix, names, slices, tensors)

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
        restored = gen_io_ops.restore_v2(
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
    if isinstance(saveable, saveable_object_util.VariableSaveable):
      key = variable_batches.batch_key(saveable.op)
      if key is not None:
        batches.setdefault(key, []).append(saveable)
  restore_ops = {}
  for batch in batches.values():
    if not variable_batches.worth_batching(len(batch)):
      continue
    specs = [saveable.specs[0] for saveable in batch]
    batch_ops = variable_batches.restore_variables(
        file_prefix, [saveable.op for saveable in batch],
        [spec.name for spec in specs], [spec.slice_spec for spec in specs])
    for saveable, restore_op in zip(batch, batch_ops):
      restore_ops[saveable.name] = restore_op
  return restore_ops


class Saver:
  """Saves and restores a fixed list of `SaveableObject`s.

  Works eagerly (saves and restores immediately) and when graph building
  (returns ops; `file_prefix` may be a placeholder, so one set of ops serves
  every path).
  """

  def __init__(self, saveables):
    """Groups `saveables` by the host CPU of their devices."""
    by_device = collections.defaultdict(list)
    for saveable in saveables:
      by_device[_host_cpu(saveable.device)].append(saveable)
    self._groups = {device: _DeviceGroup(group)
                    for device, group in sorted(by_device.items())}

  def save(self, file_prefix, options=None):
    """Writes a checkpoint at `file_prefix`.

    Args:
      file_prefix: A string or string tensor.
      options: Optional `tf.train.CheckpointOptions`; its
        `experimental_io_device` runs the writes.

    Returns:
      When graph building, the op that writes the checkpoint; eagerly, None.
    """
    device_for_io = io_device(options)
    file_prefix = ops.convert_to_tensor(file_prefix, dtype=dtypes.string)
    groups = self._groups or {"/cpu:0": _DeviceGroup([])}
    if len(groups) == 1:
      # One shard: SaveV2 writes it in place (each file under a temporary
      # name, renamed when complete), as a merge of one shard would.
      (device, group), = groups.items()
      with ops.device(device_for_io or device):
        save = group.save(file_prefix)
      return None if context.executing_eagerly() else save
    with ops.device(device_for_io or "/cpu:0"):
      temp_prefix = string_ops.string_join(
          [file_prefix, constant_op.constant(_TEMP_SUFFIX)])
    num_shards = len(groups)
    shard_prefixes = []
    shard_ops = []
    for shard, (device, group) in enumerate(groups.items()):
      with ops.device(device_for_io or device):
        shard_prefix = gen_io_ops.sharded_filename(temp_prefix, shard,
                                                   num_shards)
        shard_prefixes.append(shard_prefix)
        shard_ops.append(group.save(shard_prefix))
    with ops.control_dependencies(shard_ops):
      with ops.device(device_for_io or "/cpu:0"):
        merge = gen_io_ops.merge_v2_checkpoints(
            shard_prefixes, file_prefix, delete_old_dirs=True)
    return None if context.executing_eagerly() else merge

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

  def restore_op(self, file_prefix):
    """A single op (graph mode) that restores everything."""
    restore_ops = [op for op in self.restore(file_prefix).values()
                   if op is not None]
    if context.executing_eagerly():
      return None
    return control_flow_ops.group(restore_ops)
