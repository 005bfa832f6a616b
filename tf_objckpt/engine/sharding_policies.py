"""`ParallelShardsPolicy`: a save split into shards written at the same time.

One data file is one `SaveV2` (and one `RestoreV2` reads it), and one op
moves bytes at the speed of one core. A save of several shards writes
them from parallel threads (`writes`), and eager reads split across
threads (`reads`), so a checkpoint split into about one shard per core
moves at the speed of all of them. This policy picks that
split from the checkpoint's size and the cores; it is a TensorFlow
`ShardingCallback`, so TensorFlow's `CheckpointOptions` take it and
TensorFlow restores what it writes. Values are never split: the keys are
those of a save without the policy.
"""

from typing import Any, Optional, Sequence

from tf_objckpt.engine import reads
from tf_objckpt.engine import tf_compat
from tf_objckpt.engine import tuning

# TensorFlow 2.15 has no sharding callbacks; the class still exists there,
# and raises TypeError when made.
_ShardingCallback: Any = getattr(tf_compat.sharding_util, "ShardingCallback",
                                 object)


class ParallelShardsPolicy(_ShardingCallback):
  """Splits each task's values into shards of about equal size, one per core.

  The shard count is the number of cores (the engine's write threads,
  `tuning.TUNING.write_threads`) or `max_shards`, but no more than gives
  each shard at least `min_shard_bytes`: a small checkpoint stays one
  data file. Values are kept whole and spread over the shards largest
  first, each into the shard holding the fewest bytes so far; so a value
  larger than all others together gets a shard to itself, and the save
  goes no faster than that shard (TensorFlow's `MaxShardSizePolicy` splits
  values, at the cost of slices in the checkpoint).

  Use it as any sharding policy:

      options = tf.train.CheckpointOptions(
          experimental_sharding_callback=tf_objckpt.ParallelShardsPolicy())
      checkpoint.write(path, options=options)
  """

  def __init__(self,
               max_shards: Optional[int] = None,
               min_shard_bytes: int = 32 << 20) -> None:
    """Makes the policy.

    Args:
      max_shards: At most this many shards per task; None for one per
        core.
      min_shard_bytes: Shards hold at least this many bytes (unless the
        task's values are fewer).

    Raises:
      TypeError: On TensorFlow 2.15, which has no sharding callbacks.
      ValueError: If `max_shards` or `min_shard_bytes` is below 1.
    """
    tf_compat.check_sharding_callbacks(type(self).__name__)
    if max_shards is not None and max_shards < 1:
      raise ValueError(f"max_shards must be at least 1, not {max_shards}.")
    if min_shard_bytes < 1:
      raise ValueError(
          f"min_shard_bytes must be at least 1, not {min_shard_bytes}.")
    self.max_shards = max_shards
    self.min_shard_bytes = min_shard_bytes

  @property
  def description(self) -> str:
    return ("Split tensors into shards of about equal size, one per core "
            "(tf_objckpt's ParallelShardsPolicy).")

  def __call__(self, shardable_tensors: Sequence) -> Sequence[dict]:
    """The shards of one task's `ShardableTensor`s, biggest first."""
    sizes = [_byte_size(tensor) for tensor in shardable_tensors]
    shards = []
    for members in self._members(sizes):
      shard: dict = {}
      for index in members:
        tensor = shardable_tensors[index]
        shard.setdefault(tensor.checkpoint_key,
                         {})[tensor.slice_spec] = (tensor.tensor)
      shards.append(shard)
    return shards

  def _members(self, sizes):
    """Indices of `sizes` in each shard, fewer shards while one is small."""
    most = self.max_shards or tuning.TUNING.write_threads
    count = max(1, min(most, len(sizes), sum(sizes) // self.min_shard_bytes))
    while True:
      members, loads = _spread(sizes, count)
      if count == 1 or min(loads) >= self.min_shard_bytes:
        return members
      count -= 1


def _spread(sizes, count):
  """Indices of `sizes` in `count` bins: each, largest first, to the lightest.

  Returns:
    The indices in each bin, and each bin's total size.
  """
  members = [[] for _ in range(count)]
  loads = [0] * count
  for index in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
    lightest = loads.index(min(loads))
    members[lightest].append(index)
    loads[lightest] += sizes[index]
  return members, loads


def _byte_size(tensor):
  """About how many bytes a `ShardableTensor` writes (0 if its shape is
  not known: the object graph, graph building)."""
  if not tensor.shape.is_fully_defined():
    return 0
  return reads.byte_size(tensor.shape.as_list(), tensor.dtype)
