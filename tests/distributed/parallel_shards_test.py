"""`tf_objckpt.ParallelShardsPolicy`: about one data file per core.

The policy is a TensorFlow `ShardingCallback`: TensorFlow's and our
`CheckpointOptions` take it, TensorFlow's savers apply it as ours do (the
same files, byte for byte), and both libraries restore what it writes. It
picks the number of files from the checkpoint's size and the cores, keeps
values whole (the keys are those of a save without it) and balances the
files' sizes.

Covers: tf_objckpt.engine.sharding_policies, tf_objckpt.engine.tuning,
tf_objckpt.engine.writes.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt
from tf_objckpt.engine import tuning

_KIB = 1 << 10


def _variables(kib_sizes, zeros=False):
  """Float32 variables of the sizes given, in KiB, with distinct values."""
  return [
      tf.Variable(
          np.zeros(size * 256, np.float32
                  ) if zeros else np.arange(size * 256, dtype=np.float32) +
          index) for index, size in enumerate(kib_sizes)
  ]


def _options(**policy_arguments):
  return tf.train.CheckpointOptions(
      experimental_sharding_callback=tf_objckpt.ParallelShardsPolicy(
          **policy_arguments))


def _data_file_sizes(prefix):
  """The size in bytes of each data file of checkpoint `prefix`."""
  shards = tl.file_layout(prefix)["num_shards"]
  return [
      os.path.getsize(f"{prefix}.data-{shard:05d}-of-{shards:05d}")
      for shard in range(shards)
  ]


def _assert_both_restore(path, kib_sizes):
  for impl, lib in tl.IMPLS.items():
    fresh = _variables(kib_sizes, zeros=True)
    lib.Checkpoint(v=fresh).read(path).assert_existing_objects_matched()
    for got, want in zip(fresh, _variables(kib_sizes)):
      np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=impl)


# The sizes of the variables of a model (KiB), and the files the policy
# makes of them with up to 4 files of at least 16 KiB.
_CASES = {
    "equal": ([16] * 8, 4),
    "mixed": ([40, 8, 8, 24, 16, 8, 8, 16], 4),
    "one_dominates": ([100, 4, 4, 4], 1),  # Files of 12 KiB would be small.
    "too_small_for_two": ([8, 8, 8], 1),
    "fewer_files_than_values": ([16, 16, 8], 2),  # 40 KiB: 2 of 16 KiB.
}


@pytest.mark.parametrize("case", _CASES)
def test_files_by_size_match_tensorflows_application(tmp_path, case):
  """Both libraries write the same files with the policy; both restore them.

  Each file holds whole values, as a save without the policy does, and the
  files' sizes differ by at most the largest value.
  """
  kib_sizes, files = _CASES[case]
  options = _options(max_shards=4, min_shard_bytes=16 * _KIB)
  paths = {}
  for impl, lib in tl.IMPLS.items():
    paths[impl] = lib.Checkpoint(v=_variables(kib_sizes)).write(str(
        tmp_path / impl / "ckpt"),
                                                                options=options)
  tl.assert_same_files(tmp_path)
  path = paths["ours"]
  unsharded = tl.IMPLS["ours"].Checkpoint(v=_variables(kib_sizes)).write(
      str(tmp_path / "unsharded" / "ckpt"))
  assert tl.signature(path) == tl.signature(unsharded)
  sizes = _data_file_sizes(path)
  assert len(sizes) == files
  assert max(sizes) - min(sizes) <= max(kib_sizes) * _KIB + 1024
  _assert_both_restore(path, kib_sizes)


def test_one_file_per_write_thread_by_default(tmp_path, monkeypatch):
  """Without `max_shards`, one file per write thread of the engine."""
  monkeypatch.setattr(tuning.TUNING, "write_threads", 3)
  path = tf_objckpt.Checkpoint(v=_variables([16] * 9)).write(
      str(tmp_path / "ckpt"), options=_options(min_shard_bytes=_KIB))
  assert len(_data_file_sizes(path)) == 3


_CORES_SEEN = """
import os, sys
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
from tf_objckpt.engine import tuning
print("write threads", tuning.TUNING.write_threads)
"""


def test_write_threads_are_the_cores_this_process_may_use():
  """One per core of the process's CPU affinity (a container's, say)."""
  assert tuning.TUNING.write_threads == len(os.sched_getaffinity(0))
  result = tl.run_python(_CORES_SEEN)
  assert result.returncode == 0, result.stderr[-2000:]
  assert "write threads 1" in result.stdout


def test_small_checkpoints_stay_one_file(tmp_path):
  """By default shards hold at least 32 MiB: a small save is one file."""
  path = tf_objckpt.Checkpoint(v=_variables([64] * 8)).write(str(tmp_path /
                                                                 "ckpt"),
                                                             options=_options())
  assert len(_data_file_sizes(path)) == 1


def test_save_manager_and_async_saves(tmp_path):
  """`save`, `CheckpointManager.save` and asynchronous saves take it too."""
  kib_sizes = [16] * 4
  options = _options(max_shards=2, min_shard_bytes=_KIB)
  checkpoint = tf_objckpt.Checkpoint(v=_variables(kib_sizes))
  saved = checkpoint.save(str(tmp_path / "save" / "ckpt"), options=options)
  manager = tf_objckpt.CheckpointManager(checkpoint,
                                         str(tmp_path / "manager"),
                                         max_to_keep=1)
  managed = manager.save(options=options)
  async_options = tf.train.CheckpointOptions(
      experimental_sharding_callback=options.experimental_sharding_callback,
      experimental_enable_async_checkpoint=True)
  later = checkpoint.save(str(tmp_path / "async" / "ckpt"),
                          options=async_options)
  checkpoint.sync()
  for path in (saved, managed, later):
    assert len(_data_file_sizes(path)) == 2, path
    _assert_both_restore(path, kib_sizes)


def test_graph_mode_matches_tensorflow(tmp_path):
  """CheckpointV1 in a session: TensorFlow's files; later saves add no ops."""
  options = _options(max_shards=3, min_shard_bytes=_KIB)
  for impl in tl.IMPLS:
    with tl.GraphProgram(impl) as program:
      variables = [
          program.variable(f"v{index}", np.full([1024], index, np.float32))
          for index in range(6)
      ]
      program.initialize()
      checkpoint = program.lib.CheckpointV1(v=variables)
      checkpoint.write(str(tmp_path / impl / "ckpt"),
                       session=program.session,
                       options=options)
      if impl == "ours":
        ops_before = len(program.graph.get_operations())
        checkpoint.write(str(tmp_path / "again" / "ckpt"),
                         session=program.session,
                         options=options)
        assert len(program.graph.get_operations()) == ops_before
  tl.assert_same_files(tmp_path)
  assert len(_data_file_sizes(str(tmp_path / "ours" / "ckpt"))) == 3


@pytest.mark.parametrize("arguments", [{
    "max_shards": 0
}, {
    "min_shard_bytes": 0
}])
def test_bad_arguments_raise_value_error(arguments):
  error = tl.outcome(tf_objckpt.ParallelShardsPolicy, **arguments).error
  assert isinstance(error, ValueError)
  assert next(iter(arguments)) in str(error)
