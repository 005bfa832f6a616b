"""The engine's tuning, in one place: sizes, batch sizes, thresholds.

Every number that trades speed against memory or ops in the I/O engine is a
field of `TUNING`, read when it is used. Tests and benchmarks change it
there (`monkeypatch.setattr(tuning.TUNING, "restore_piece_bytes", n)`).
Thread counts are read when the engine's thread pools start.
"""

import dataclasses
import os
from typing import Optional


def available_cores() -> int:
  """How many cores this process may run on (its CPU affinity, where known)."""
  if hasattr(os, "sched_getaffinity"):
    return max(1, len(os.sched_getaffinity(0)))
  return max(1, os.cpu_count() or 1)


@dataclasses.dataclass
class EngineTuning:
  """The engine's sizes and thresholds (see each field's comment)."""

  # The restore memory limit of restores whose options set none (the v1
  # `Saver`'s, which takes no options): None decides it from the memory
  # available (`restore_memory`).
  default_max_restore_memory: Optional[int] = None
  # Restores over their memory limit read and assign about this many bytes
  # of values at a time (`reads.CheckpointValues.restore_in_pieces`).
  restore_piece_bytes: int = 64 << 20
  # Eager restores assign plain variables in runs, one loop each
  # (`read_plan.execute_eagerly`), of at most about this fraction of
  # `restore_piece_bytes`: pieces are split between runs.
  assign_runs_per_piece: int = 16
  # Runs of at least this many assigns are made on a thread of their own,
  # at a shallow stack (`variable_batches.assign_variables`).
  assign_thread_min: int = 64
  # Values read ahead for restore-on-create are capped at this many bytes.
  read_ahead_budget_bytes: int = 64 << 20
  # Eager reads of more than this are split across threads: RestoreV2
  # spends its time looking up, copying and checksumming values, which runs
  # in parallel. Each value counts for its bytes plus a lookup, which costs
  # about as much as copying `lookup_cost_bytes`.
  parallel_read_min_bytes: int = 16 << 20
  lookup_cost_bytes: int = 8 << 10
  read_threads: int = min(4, available_cores())
  # Eager saves of several shards write them from this many threads at most
  # (and `ParallelShardsPolicy` makes this many shards).
  write_threads: int = available_cores()
  # Checkpoint objects whose asynchronous writes can run at the same time.
  async_write_threads: int = 4
  # Graph building, plain variables are restored in batches of at most
  # about this many bytes, each through one call of a restore function.
  # Each call costs TensorFlow milliseconds to prepare on the first run
  # (fewer, larger calls are faster), and calls read in parallel.
  graph_restore_batch_bytes: int = 64 << 20
  # Graph building, variables are read (saves) and values restored by
  # `RestoreV2`s of at most this many values: Grappler's cost grows faster
  # than linearly with an op's number of outputs.
  graph_batch_size: int = 64
  # Fewer variables than this are not worth batched ops when graph building:
  # they would add ops where each variable's own handle and read exist.
  graph_batch_min: int = 16
  # Eager ops with fewer tensors than this keep TensorFlow's default
  # execution (see `variable_batches.direct_kernels`).
  direct_kernels_min: int = 32
  # Variables read by one batched eager op at most: an op with many more
  # inputs costs far more to build, in time and memory (16,384 variables
  # read by one op add about 160 MiB to a save's peak, 256 at a time about
  # 15 MiB).
  read_batch_limit: int = 256


TUNING = EngineTuning()
