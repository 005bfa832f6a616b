"""Eager reads of a checkpoint of several data files read them at the same time.

Each `RestoreV2` of a large read reads whole data files, one thread per
file (up to the read threads), and a restore in pieces reads a piece for
each thread at a time, so that every piece keeps the threads busy: for
checkpoints of our `ParallelShardsPolicy` and of TensorFlow's
`MaxShardSizePolicy` (whose files hold consecutive variables), restored by
`read()` whole or in pieces of one variable per thread. The engine's
`RestoreV2`s are watched: each
waits at a barrier for the other thread's, which only passes if both run
at the same time (a read made one after the other would wait out the
barrier's timeout, and fail).

Covers: tf_objckpt.engine.read_lanes, tf_objckpt.engine.reads.
"""

import threading

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt
from tf_objckpt.engine import reads
from tf_objckpt.engine import tuning

_COUNT = 8
_ELEMENTS = 16 << 10  # 64 KiB of float32 per variable.


def _variables(zeros=False):
  return [
      tf.Variable(
          np.zeros(_ELEMENTS, np.float32) if zeros else np.
          full(_ELEMENTS, index, np.float32)) for index in range(_COUNT)
  ]


def _write(impl, prefix, policy):
  if policy == "parallel_shards":
    callback = tf_objckpt.ParallelShardsPolicy(max_shards=2, min_shard_bytes=1)
  else:  # Files of consecutive variables, the object graph in a third.
    callback = tf.train.experimental.MaxShardSizePolicy(_COUNT // 2 *
                                                        _ELEMENTS * 4)
  return tl.IMPLS[impl].Checkpoint(v=_variables()).write(
      prefix,
      options=tf.train.CheckpointOptions(
          experimental_sharding_callback=callback))


@pytest.fixture
def restores_in_pairs(monkeypatch):
  """Records the data files of each of our RestoreV2s of the variables.

  Each such read waits for a second one to run at the same time.
  """
  monkeypatch.setattr(tuning.TUNING, "read_threads", 2)
  monkeypatch.setattr(tuning.TUNING, "parallel_read_min_bytes", 1)
  barrier = threading.Barrier(2, timeout=30)
  read_keys = []
  real_restore_v2 = reads.restore_v2

  def restore_v2(file_prefix, names, slices, dtypes_):
    names = list(names)
    if any(name.startswith("v/") for name in names):
      read_keys.append(names)
      barrier.wait()
    return real_restore_v2(file_prefix, names, slices, dtypes_)

  monkeypatch.setattr(reads, "restore_v2", restore_v2)
  return read_keys


def _file_of_each_key(path):
  layout = tl.file_layout(path)
  return {
      eval(name).decode():
          place[0]  # pylint: disable=eval-used
      for name, place in layout.items()
      if name != "num_shards"
  }


@pytest.mark.parametrize("policy", ["parallel_shards", "max_shard_size"])
@pytest.mark.parametrize("impl", tl.IMPLS)
@pytest.mark.parametrize("pieces", ["whole", "in_pieces"])
def test_each_thread_reads_whole_data_files(tmp_path, monkeypatch,
                                            restores_in_pairs, policy, impl,
                                            pieces):
  path = _write(impl, str(tmp_path / "ckpt"), policy)
  file_of = _file_of_each_key(path)
  # In pieces: a limit of four variables, pieces of one for each thread.
  limit = 4 * _ELEMENTS * 4 if pieces == "in_pieces" else None
  variables = _variables(zeros=True)
  tf_objckpt.Checkpoint(v=variables).read(
      path, options=tf_objckpt.CheckpointOptions(
          max_restore_memory=limit)).assert_consumed()
  for index, variable in enumerate(variables):
    np.testing.assert_array_equal(variable.numpy(), index)
  assert restores_in_pairs
  for names in restores_in_pairs:
    assert len({file_of[name] for name in names}) == 1, names
  files_read = {file_of[name] for names in restores_in_pairs for name in names}
  assert len(files_read) == 2
  if pieces == "in_pieces":  # Each piece: one variable per thread.
    assert all(len(names) == 1 for names in restores_in_pairs)
