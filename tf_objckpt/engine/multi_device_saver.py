"""The I/O engine's front: `Saver`, TensorFlow's `MultiDeviceSaver`.

A `Saver` of a fixed list of saveables writes one shard per task (each
`SaveV2` runs on the CPU next to the data), numbered in the order the save
meets each task, or the shards an options' sharding callback makes (see
`sharding`), under a temporary prefix, then merges the shards, and any
files registered savers wrote, into one checkpoint (`writes`); a single
shard is written in place. Eagerly on several tasks of a cluster, the
shards are read, written and merged by one function, traced once per
layout and reused by later saves (`writes.write_shards_traced`). A restore executes a read plan (`read_plan`):
it reads a host's values with `RestoreV2` on that host's CPU (`reads`) and
hands each destination its tensors; when graph building, the plan's plain
variables are read and assigned in batches through one function call each
(`graph_restores`). The engine's other modules
(`tf_objckpt.engine`) are the only other code that reads or writes
checkpoint files. `functional_saver`, TensorFlow's name for this module,
re-exports it.
"""

import collections
import functools

from tensorflow.core.protobuf import saver_pb2
from tensorflow.python.eager import context
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import ops
from tensorflow.python.ops import array_ops
from tensorflow.python.ops import control_flow_ops

from tf_objckpt.engine import graph_restores
from tf_objckpt.engine import read_plan
from tf_objckpt.engine import reads
from tf_objckpt.engine import registered_savers as registered_savers_lib
from tf_objckpt.engine import remote_tasks
from tf_objckpt.engine import sharding
from tf_objckpt.engine import tuning
from tf_objckpt.engine import variable_batches
from tf_objckpt.engine import variable_values
from tf_objckpt.engine import writes
from tf_objckpt.foundation import module_names

registered_saver_filename = registered_savers_lib.registered_saver_filename


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
  return writes.save_v2(shard_prefix, shard.names, shard.slices, shard.tensors)


class _DeviceGroup:
  """The saveables whose tensors live on one host (for saves)."""

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
    return writes.save_v2(shard_prefix, names, slices, tensors)

  def traced_shard(self, device):
    """This group's `writes.TracedShard`: variables read in the function."""
    names, slices, read_devices, dtypes, sources = [], [], [], [], []
    for spec in self.specs:
      if isinstance(spec, variable_values.VariableValueSpec):
        read_devices.append(spec.device)
        dtypes.append(spec.dtype)
        sources.append(spec.variable.handle)
      else:
        tensor = spec.tensor
        if tensor is None:
          continue
        read_devices.append(None)
        dtypes.append(None)
        sources.append(tensor)
      names.append(spec.name)
      slices.append(spec.slice_spec)
    return writes.TracedShard(device, tuple(names), tuple(slices),
                              tuple(read_devices), tuple(dtypes), sources)


def _restore_group(destinations, file_prefix, device, batch_variables):
  """Reads the values of one host's `destinations` on `device`.

  Graph building with `batch_variables`, plain variables worth batching
  are read and assigned in batches (`_restore_variable_batches`); the
  rest are read by `RestoreV2`s and handed to their destinations.

  Returns:
    `{destination name: restore op}` (ops are None when executing eagerly).
  """
  restore_ops = {}
  chain = graph_restores.ReadChain(None)
  if not context.executing_eagerly():
    chain = graph_restores.ReadChain.for_bytes(
        sum(_read_bytes(destination) for destination in destinations))
  # Batches read on their variables' host, so not with an I/O device.
  if batch_variables and not context.executing_eagerly():
    restore_ops = _restore_variable_batches(file_prefix, destinations, chain)
    destinations = [
        destination for destination in destinations
        if destination.name not in restore_ops
    ]
  for batch in _restore_batches(destinations):
    reads_ = [value for destination in batch for value in destination.reads]
    with ops.device(device), ops.control_dependencies(chain.waits_for()):
      restored = reads.restore_v2(file_prefix, [value.key for value in reads_],
                                  [value.slice_spec for value in reads_],
                                  [value.dtype for value in reads_])
    batch_ops = apply_restored(batch, restored)
    chain.add(batch_ops.values())
    restore_ops.update(batch_ops)
  return restore_ops


def _read_bytes(destination):
  """About how many bytes `destination` reads (values of unknown shape: 0)."""
  return sum(
      reads.byte_size(value.shape, value.dtype)
      for value in destination.reads
      if value.dtype is not None and value.shape is not None and
      None not in value.shape)


def _restore_batches(destinations):
  """The destinations to read with one RestoreV2 each.

  Eagerly, all of them. Graph building, batches of at most
  `graph_batch_size` values (`tuning`), since Grappler's cost grows faster
  than linearly with an op's number of outputs, and of at most about
  `graph_restore_batch_bytes`, so that a `ReadChain` bounds their memory.
  """
  if not destinations:
    return []
  if context.executing_eagerly():
    return [destinations]
  batches, batch, count, size = [], [], 0, 0
  for destination in destinations:
    values, byte_size = len(destination.reads), _read_bytes(destination)
    if batch and (count + values > tuning.TUNING.graph_batch_size or
                  size + byte_size > tuning.TUNING.graph_restore_batch_bytes):
      batches.append(batch)
      batch, count, size = [], 0, 0
    batch.append(destination)
    count += values
    size += byte_size
  return batches + [batch]


def apply_restored(destinations, tensors):
  """Hands each destination its slice of `tensors` (ordered like its reads).

  Returns:
    `{destination name: restore op}` (ops are None when executing eagerly).
  """
  restore_ops = {}
  start = 0
  for destination in destinations:
    values = tensors[start:start + len(destination.reads)]
    start += len(destination.reads)
    if context.executing_eagerly():  # Eager ops run where their inputs live.
      restore_ops[destination.name] = destination.restore(values)
    else:
      with ops.device(destination.device):
        restore_ops[destination.name] = destination.restore(values)
  return restore_ops


def _restore_variable_batches(file_prefix, destinations, chain):
  """Restore ops of the plain variables among `destinations` worth batching.

  Their reads take their places in `chain` (a `graph_restores.ReadChain`).

  Returns:
    `{destination name: restore op}` for those variables.
  """
  batches = {}
  for destination in destinations:
    variable = destination.plain_variable
    if variable is not None:
      handle_node = variable.handle.op.node_def
      key = variable_batches.batch_key(variable, handle_node)
      if key is not None:
        batches.setdefault(key, []).append((destination, handle_node))
  restore_ops = {}
  for batch in batches.values():
    if not variable_batches.worth_batching(len(batch)):
      continue
    values = [destination.reads[0] for destination, _ in batch]
    batch_ops = graph_restores.restore_variables(
        file_prefix, [destination.plain_variable for destination, _ in batch],
        [value.key for value in values], [value.slice_spec for value in values],
        [handle_node for _, handle_node in batch], chain)
    for (destination, _), restore_op in zip(batch, batch_ops):
      restore_ops[destination.name] = restore_op
  return restore_ops


def execute_plan(plan, file_prefix, options=None):
  """Executes a `read_plan.ReadPlan` (checked already, if it had to be).

  Values are read by each host's CPU (or the options' I/O device). A
  destination reading through a restore op already in the graph
  (`ToRestoreOp`) builds nothing: its op is returned. Python state is
  left to the caller, which holds the reader
  (`read_plan.read_python_state`).

  Args:
    plan: A `read_plan.ReadPlan`.
    file_prefix: A string or string tensor.
    options: Optional `tf.train.CheckpointOptions`; its
      `experimental_io_device` runs the reads.

  Returns:
    `{destination name: restore op}` (ops are None when executing eagerly).
  """
  device_for_io = reads.io_device(options)
  file_prefix = ops.convert_to_tensor(file_prefix, dtype=dtypes.string)
  restore_ops = {}
  to_read = []
  for destination in plan.destinations:
    if isinstance(destination, read_plan.ToRestoreOp):
      restore_ops[destination.name] = destination.op
    elif not destination.python_state:
      to_read.append(destination)
  by_task = sharding.group_by_task(to_read)
  with remote_tasks.completed_on(by_task, "the restore's assigns"):
    for device, group in by_task.items():
      restore_ops.update(
          _restore_group(group,
                         file_prefix,
                         device_for_io or device,
                         batch_variables=device_for_io is None))
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
    self._registered = [
        saveable for saveable in saveables
        if hasattr(saveable, "registered_saver_name")
    ]
    if self._registered:
      saveables = [
          saveable for saveable in saveables
          if not hasattr(saveable, "registered_saver_name")
      ]
    self._by_task = sharding.group_by_task(saveables)
    self._groups = {
        device: _DeviceGroup(group) for device, group in self._by_task.items()
    }

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
    device_for_io = reads.io_device(options)
    file_prefix = ops.convert_to_tensor(file_prefix, dtype=dtypes.string)
    registered_prefixes = self._write_registered(file_prefix)
    traced = self._traced_shards(options, device_for_io)
    if traced:
      writes.write_shards_traced(file_prefix, traced, "/cpu:0")
      return None
    writers = [(device_for_io or device, write)
               for device, write in self._shard_writers(options)]
    if len(writers) == 1 and in_place and not self._registered:
      # One shard: SaveV2 writes it in place (each file under a temporary
      # name, renamed when complete), as a merge of one shard would.
      (device, write), = writers
      with ops.device(device), remote_tasks.completed_on([device],
                                                         writes.step_of(
                                                             "the write",
                                                             file_prefix)):
        save = write(file_prefix)
    else:
      save = writes.write_shards(file_prefix,
                                 writers,
                                 merge_device=device_for_io or "/cpu:0",
                                 other_prefixes=registered_prefixes)
    return None if context.executing_eagerly() else save

  def _traced_shards(self, options, device_for_io):
    """The shards of an eager save on several tasks, or None.

    Such a save, one shard per task, writes them through one function
    (`writes.write_shards_traced`), as TensorFlow does; other saves (a
    sharding callback's, registered savers', through an I/O device, or
    executing asynchronously) send their ops one by one.
    """
    if (len(self._groups) < 2 or not context.executing_eagerly() or
        self._registered or device_for_io is not None or context.is_async() or
        sharding.sharding_callback(options) is not None or
        not any(remote_tasks.remote_cpus(self._groups))):
      return None
    return [
        group.traced_shard(device) for device, group in self._groups.items()
    ]

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
    plan = read_plan.ReadPlan(
        read_plan.ToSaveable(saveable)
        for group in self._by_task.values()
        for saveable in group)
    return execute_plan(plan, file_prefix, options)

  @classmethod
  def from_saveables(cls,
                     saveables,
                     registered_savers=None,
                     call_with_mapped_captures=None):
    """A saver of `saveables` and `{saver name: {path: trackable}}`."""
    del call_with_mapped_captures  # The saveables are built already.
    return cls(
        list(saveables) + [
            registered_savers_lib.RegisteredSave(name, trackables)
            for name, trackables in (registered_savers or {}).items()
        ])

  def to_proto(self):
    """A `SaverDef` of save and restore ops added to the current graph."""
    if context.executing_eagerly():
      raise RuntimeError("to_proto() adds ops to a graph: call it when "
                         "building a graph, not eagerly.")
    filename = array_ops.placeholder(dtypes.string, [], "saver_filename")
    with ops.control_dependencies([self.save(filename, in_place=False)]):
      save_tensor = array_ops.identity(filename)
    return saver_pb2.SaverDef(filename_tensor_name=filename.name,
                              save_tensor_name=save_tensor.name,
                              restore_op_name=self.restore_op(filename).name,
                              version=saver_pb2.SaverDef.V2)

  def restore_op(self, file_prefix):
    """A single op (graph mode) that restores everything."""
    restore_ops = [
        op for op in self.restore(file_prefix).values() if op is not None
    ]
    if context.executing_eagerly():
      return None
    return control_flow_ops.group(restore_ops)


module_names.keep_module_name("tf_objckpt.functional_saver", Saver,
                              execute_plan, apply_restored, group_by_device)
