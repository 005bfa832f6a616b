"""Which tensors of an object-based save go into which data file.

TensorFlow's object-based saver groups a save's tensors by task (the host
CPU of their devices) in the order it first meets each task, so the object
graph, saved last, lands in the last file unless its task was met before.
Each task's tensors are then handed to the sharding callback of
`CheckpointOptions.experimental_sharding_callback` (by default one shard per
task), which returns the shards to write, in file order.

This module does the same with our saveables: `group_by_task` orders the
tasks, and `callback_shards` builds the `ShardableTensor`s a callback
expects, calls it, checks that its shards hold exactly the tensors it was
given (same keys, slices, shapes, dtypes and tasks), and returns each shard
as the keys, slices and tensors of one write. It plans; the engine
(`multi_device_saver`) writes.
"""

import functools
import typing

from tensorflow.python.framework import device as device_lib
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor_util
from tensorflow.python.ops import array_ops

from tf_objckpt.engine import tf_compat
from tf_objckpt.engine import variable_values


@functools.lru_cache(maxsize=None)
def task_of(device: str) -> str:
  """The CPU of the task owning `device`: where its tensors are written."""
  return variable_values.set_cpu0(device or "/cpu:0")


def group_by_task(saveables) -> dict:
  """`{task: [saveables]}`, tasks in the order their saveables come."""
  by_task: dict[str, list] = {}
  for saveable in saveables:
    by_task.setdefault(task_of(saveable.device), []).append(saveable)
  return by_task


def sharding_callback(options):
  """The `ShardingCallback` of `options`, or None for one shard per task."""
  return getattr(options, "experimental_sharding_callback", None)


def callback_key(options):
  """What identifies `options`' callback for caching graph-mode save ops.

  A callback's hash covers its description and attributes (TensorFlow's
  `ShardingCallback.__hash__`), so equal policies share one save op.
  """
  callback = sharding_callback(options)
  return None if callback is None else (type(callback), hash(callback))


class ShardToWrite(typing.NamedTuple):
  """One data file's content: the keys, slices and tensors of one write."""
  task: str
  names: list
  slices: list
  tensors: list


def callback_shards(callback, groups) -> list:
  """The shards `callback` makes of each task's tensors, in file order.

  Args:
    callback: A `tf.train.experimental.ShardingCallback`.
    groups: `{task: [saveables]}` from `group_by_task`.

  Returns:
    A list of `ShardToWrite`.

  Raises:
    RuntimeError: If the callback's shards lose, add, duplicate, reshape,
      retype or move a tensor, or mix tasks in one shard.
  """
  shards: list = []
  for task, saveables in groups.items():
    shardable = _shardable_tensors(task, saveables)
    task_shards = [
        _with_tensors(shard, shardable, task) for shard in callback(shardable)
    ]
    _check_shards(task_shards, shardable, callback.description)
    shards.extend(_to_write(task, shard) for shard in task_shards)
  return shards


def _shardable_tensors(task, saveables):
  """The `ShardableTensor`s of one task's saveables (values read now)."""
  specs = [spec for saveable in saveables for spec in saveable.specs]
  owners = [saveable for saveable in saveables for _ in saveable.specs]
  with ops.device(task):
    tensors = variable_values.spec_tensors(specs)
  shardable = []
  for spec, owner, tensor in zip(specs, owners, tensors):
    if tensor is None:  # An uninitialized variable: nothing to save.
      continue
    shardable.append(
        tf_compat.sharding_util.ShardableTensor(
            _tensor_save_spec=spec,
            tensor=tensor,
            dtype=spec.dtype,
            device=device_lib.DeviceSpec.from_string(spec.device or ""),
            name=spec.name,
            shape=tensor.shape,
            slice_spec=spec.slice_spec.strip(),
            checkpoint_key=spec.name,
            trackable=_trackable_of(owner)))
  return shardable


def _trackable_of(saveable):
  """The object whose state `saveable` holds, if it is a trackable."""
  owner = getattr(saveable, "op", None)
  return owner if hasattr(owner, "_serialize_to_tensors") else None


def _with_tensors(shard, shardable, task):
  """`shard` with the values a callback computed once, as given tensors.

  Graph building in a session, TensorFlow's `MaxShardSizePolicy` runs string
  tensors to measure them, and returns their values (bytes or arrays) or
  slices of them (tensors computed from constants). A save op built from
  those would write the values of the first save at every later save. Each
  is replaced by (a slice of) the tensor it was given, so the save op reads
  the variable's value when it runs.
  """
  if all(
      _reads_state_when_run(value)
      for slices in shard.values()
      for value in slices.values()):
    return shard
  given = {}
  for tensor in shardable:
    given.setdefault(tensor.checkpoint_key, []).append(tensor)
  with ops.device(task):
    return {
        key: {
            slice_spec: _given_slice(given.get(key), slice_spec, value)
            for slice_spec, value in slices.items()
        } for key, slices in shard.items()
    }


def _reads_state_when_run(value):
  """Whether a save op writing `value` writes what it holds when run.

  True for tensors, except graph tensors computed from constants alone (a
  callback's Python values, or slices of them); None passes through for
  `_check_shards` to refuse.
  """
  if value is None:
    return True
  if not tensor_util.is_tf_type(value):
    return False
  return not hasattr(value, "op") or not _computed_from_constants(value.op)


def _computed_from_constants(op):
  """Whether `op` and every op it reads, transitively, are constants."""
  pending, seen = [op], set()
  while pending:
    op = pending.pop()
    if op.type == "Const" or op in seen:
      continue
    if not op.inputs:
      return False
    seen.add(op)
    pending.extend(tensor.op for tensor in op.inputs)
  return True


def _given_slice(candidates, slice_spec, value):
  """The part `slice_spec` of the tensor given under a key, as a tensor.

  Args:
    candidates: The `ShardableTensor`s given under the key (None if none:
      the value is then only converted, for `_check_shards` to refuse).
    slice_spec: The slice the callback assigned `value` to.
    value: What the callback returned.
  """
  if _reads_state_when_run(value):
    return value
  for given in candidates or ():
    if given.slice_spec == slice_spec.strip():
      return given.tensor
    inner = _slice_within(given, slice_spec)
    if inner is not None:
      return array_ops.slice(given.tensor, *inner)
  return ops.convert_to_tensor(value)


def _slice_within(given, slice_spec):
  """(begin, size) of `slice_spec` within `given`'s tensor, or None.

  None when `slice_spec` is not a slice spec, has another rank, or does
  not lie within the given tensor, or when that tensor's shape is not
  fully known.
  """
  try:
    offsets, lengths = _parse_slice_spec(slice_spec)
    given_offsets, given_lengths = _extent(given)
  except ValueError:
    return None
  if len(given_offsets) != len(offsets) or None in given_lengths:
    return None
  begin = [
      offset - given_offset
      for offset, given_offset in zip(offsets, given_offsets)
  ]
  if any(start < 0 or start + length > given_length
         for start, length, given_length in zip(begin, lengths, given_lengths)):
    return None
  return begin, lengths


def _extent(given):
  """(offsets, lengths) of a `ShardableTensor` within its whole value.

  Raises:
    ValueError: If its rank is unknown.
  """
  if given.slice_spec:
    return _parse_slice_spec(given.slice_spec)
  lengths = given.shape.as_list()
  return [0] * len(lengths), lengths


def _parse_slice_spec(slice_spec):
  """(offsets, lengths) of a slice spec such as "4 6 0,2:-".

  Raises:
    ValueError: If `slice_spec` is not one.
  """
  *dims, extents = slice_spec.split()
  full_shape = [int(dim) for dim in dims]
  extents = extents.split(":")
  if len(extents) != len(full_shape):
    raise ValueError(f"Not a slice spec: {slice_spec!r}")
  offsets, lengths = [], []
  for extent, dim in zip(extents, full_shape):
    offset, length = (0, dim) if extent == "-" else map(int, extent.split(","))
    offsets.append(offset)
    lengths.append(length)
  return offsets, lengths


def _to_write(task, shard):
  names, slices, tensors = [], [], []
  for key, slice_to_tensor in shard.items():
    for slice_spec, tensor in slice_to_tensor.items():
      names.append(key)
      slices.append(slice_spec)
      tensors.append(tensor)
  return ShardToWrite(task, names, slices, tensors)


def _task(device):
  return device_lib.DeviceSpec.from_string(device or "").task


def _check_shards(shards, shardable, description):
  """Raises RuntimeError unless `shards` hold the keys of `shardable`.

  A callback may split a tensor into slices (`MaxShardSizePolicy` does), so
  keys are checked rather than slices: every key given is written, no other
  key is, no (key, slice) twice, none as None, with the dtype and task it
  was given, and no shard mixes tasks. (TensorFlow checks nothing, and
  writes whatever the callback returns, leaving out None values.)
  """
  expected = {
      tensor.checkpoint_key: (tensor.dtype, _task(tensor.tensor.device))
      for tensor in shardable
  }
  seen_keys, seen = set(), set()

  def fail(problem, key, slice_spec, detail=""):
    raise RuntimeError(
        f"After executing the checkpoint sharding callback, {problem}:\n"
        f"  callback_description: {description}\n"
        f"  checkpoint_key: {key}\n  slice_spec: {slice_spec}\n{detail}")

  for shard in shards:
    shard_task = None
    for key, slice_to_tensor in shard.items():
      if key not in expected:
        fail(
            "a tensor not originally in the object graph was found in the "
            "checkpoint shards", key, "")
      dtype, task = expected[key]
      for slice_spec, tensor in slice_to_tensor.items():
        if (key, slice_spec.strip()) in seen:
          fail(
              "multiple tensors with the same checkpoint key and slice spec "
              "were found", key, slice_spec)
        seen.add((key, slice_spec.strip()))
        if tensor is None:
          fail("a tensor was replaced by None", key, slice_spec)
        if tensor.dtype != dtype:
          fail(
              "a tensor was found with an altered dtype", key, slice_spec,
              f"  original tensor_dtype: {dtype}\n"
              f"  new tensor_dtype: {tensor.dtype}\n")
        tensor_task = _task(tensor.device)
        if tensor_task != task:
          fail(
              "a tensor was found with an altered task", key, slice_spec,
              f"  original tensor_task: {task}\n"
              f"  new tensor_task: {tensor_task}\n")
        if shard_task is not None and task is not None and task != shard_task:
          fail("tensors with different tasks were found in the same shard", key,
               slice_spec)
        shard_task = task if shard_task is None else shard_task
      seen_keys.add(key)
  missing = sorted(set(expected) - seen_keys)
  if missing:
    fail(
        "tensors in the object graph were not found in the checkpoint "
        "shards", missing[0], "",
        "".join(f"  missing: {key}\n" for key in missing))
