"""`CheckpointOptions(experimental_enable_async_checkpoint=True)` saves.

tf_objckpt accepts the option and writes synchronously: the files are
complete when `save()` returns, `sync()` has nothing to wait for, and
checkpoints are numbered by `save_counter` as any save is. The checkpoint
is the one TensorFlow's asynchronous save writes.

TensorFlow 2.21 differs in one way these tests pin down: its asynchronous
saves count with a second, internal save counter, so the user's
`save_counter` does not move and a later synchronous `save()` reuses the
number. tf_objckpt numbers every save once.
"""

import os

import tensorflow as tf

import testlib as tl
import tf_objckpt

_ASYNC = tf.train.CheckpointOptions(experimental_enable_async_checkpoint=True)


def test_async_save_writes_tensorflows_checkpoint(tmp_path):
  paths = {}
  for impl, lib in tl.IMPLS.items():
    checkpoint = lib.Checkpoint(v=tf.Variable([1.0, 2.0]), step=tf.Variable(3))
    paths[impl] = checkpoint.save(os.fspath(tmp_path / impl / "s"),
                                  options=_ASYNC)
    if impl == "ours":  # Already written and recorded: nothing is pending.
      assert tf.train.latest_checkpoint(tmp_path / impl) == paths[impl]
      before_sync = tl.values(paths[impl])
    checkpoint.sync()
  tl.assert_same_checkpoint(paths["tf"], paths["ours"])
  # What we had written before sync() is all TensorFlow writes.
  tl.assert_values_equal(tl.values(paths["tf"]), before_sync)


def test_async_saves_are_numbered_like_other_saves(tmp_path):
  numbers = {}
  for impl, lib in tl.IMPLS.items():
    checkpoint = lib.Checkpoint(v=tf.Variable(1.0))
    prefix = os.fspath(tmp_path / impl / "s")
    paths = [checkpoint.save(prefix, options=_ASYNC)]
    checkpoint.sync()
    paths.append(checkpoint.save(prefix))
    numbers[impl] = ([os.path.basename(path) for path in paths],
                     int(checkpoint.save_counter.numpy()))
  assert numbers["tf"] == (["s-1", "s-1"], 1)
  assert numbers["ours"] == (["s-1", "s-2"], 2)


def test_manager_with_async_saves_keeps_its_checkpoints(tmp_path):
  variable = tf.Variable(0.0)
  checkpoint = tf_objckpt.Checkpoint(v=variable)
  manager = tf_objckpt.CheckpointManager(checkpoint, tmp_path, max_to_keep=2)
  for step in range(3):
    variable.assign(float(step))
    manager.save(options=_ASYNC)
  manager.sync()
  assert [os.path.basename(path) for path in manager.checkpoints] == [
      "ckpt-2", "ckpt-3"]
  variable.assign(-1.0)
  checkpoint.restore(manager.latest_checkpoint).assert_consumed()
  assert float(variable.numpy()) == 2.0
