"""`CheckpointOptions(experimental_enable_async_checkpoint=True)` saves.

`save()` and `write()` return once the values are read; a background thread
writes and commits them. These tests hold the checkpoint directory's lock
(a real `flock`, as another process's save would) to keep a background
commit from starting, which shows that `save()` returned before writing and
that what happens meanwhile does not reach the checkpoint.

TensorFlow 2.21 numbers asynchronous saves with a second, internal save
counter: the user's `save_counter` does not move and a later synchronous
`save()` reuses the number. tf_objckpt numbers every save once, as a
synchronous run does.

Covers: tf_objckpt.engine.async_checkpoint, tf_objckpt.api.save_transaction,
tf_objckpt.engine.commit, tf_objckpt.checkpoint,
tf_objckpt.checkpoint_management, tf_objckpt.api.object_checkpoints,
tf_objckpt.api.checkpoint_manager.
"""

import contextlib
import fcntl
import os
import threading

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt

_ASYNC = tf.train.CheckpointOptions(experimental_enable_async_checkpoint=True)
_KEY = "v/.ATTRIBUTES/VARIABLE_VALUE"


@contextlib.contextmanager
def directory_locked(directory):
  """Holds `directory`'s exclusive `flock`: no save of ours commits there."""
  os.makedirs(directory, exist_ok=True)
  fd = os.open(directory, os.O_RDONLY)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX)
    yield
  finally:
    os.close(fd)


def _saved(path, key=_KEY):
  return tf.train.load_variable(path, key)


def test_async_save_writes_tensorflows_checkpoint(tmp_path):
  paths = {}
  for impl, lib in tl.IMPLS.items():
    checkpoint = lib.Checkpoint(v=tf.Variable([1.0, 2.0]), step=tf.Variable(3))
    paths[impl] = checkpoint.save(os.fspath(tmp_path / impl / "s"),
                                  options=_ASYNC)
    checkpoint.sync()
  tl.assert_same_checkpoint(paths["tf"], paths["ours"])
  assert tf.train.latest_checkpoint(tmp_path / "ours") == paths["ours"]


def test_save_returns_before_writing_and_later_values_stay_out(tmp_path):
  directory = tmp_path / "ours"
  variable = tf.Variable(np.arange(6, dtype=np.float32))
  checkpoint = tf_objckpt.Checkpoint(v=variable)
  with directory_locked(directory):
    path = checkpoint.save(os.fspath(directory / "s"), options=_ASYNC)
    # Returned while the commit cannot start: nothing is written yet.
    assert os.listdir(directory) == []
    assert int(checkpoint.save_counter.numpy()) == 1
    variable.assign_add(tf.ones(6))
    variable.assign(tf.fill([6], 7.0))
    variable.scatter_update(
        tf.IndexedSlices(tf.constant([9.0]), tf.constant([0])))
  checkpoint.sync()
  np.testing.assert_array_equal(_saved(path), np.arange(6))
  assert tf.train.latest_checkpoint(directory) == path


@pytest.mark.parametrize("impl", tl.IMPLS)
def test_values_assigned_after_write_are_not_written(tmp_path, impl):
  variable = tf.Variable(np.full([256, 256], 1.0, np.float32))
  optimizer_step = tf.Variable(0, dtype=tf.int64)
  checkpoint = tl.IMPLS[impl].Checkpoint(v=variable, step=optimizer_step)
  path = checkpoint.write(os.fspath(tmp_path / "w"), options=_ASYNC)
  variable.assign_add(tf.ones([256, 256]))
  optimizer_step.assign(5)
  checkpoint.sync()
  np.testing.assert_array_equal(_saved(path), np.full([256, 256], 1.0))
  assert _saved(path, "step/.ATTRIBUTES/VARIABLE_VALUE") == 0


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


def _manager_run(directory, options, saves=5):
  """Saves `saves` times through a manager; returns what a reader sees."""
  variable = tf.Variable(0.0)
  checkpoint = tf_objckpt.Checkpoint(v=variable)
  manager = tf_objckpt.CheckpointManager(checkpoint, directory, max_to_keep=2)
  returned = []
  for step in range(saves):
    variable.assign(float(step))
    returned.append(os.path.basename(manager.save(options=options)))
    variable.assign(-1.0)  # Never saved.
  manager.sync()
  state = tf.train.get_checkpoint_state(directory)
  kept = [os.path.basename(path) for path in state.all_model_checkpoint_paths]
  return {
      "returned": returned,
      "kept": kept,
      "manager": [os.path.basename(path) for path in manager.checkpoints],
      "latest": os.path.basename(state.model_checkpoint_path),
      "values": [float(_saved(os.path.join(directory, name))) for name in kept],
      "save_counter": int(checkpoint.save_counter.numpy()),
      "files": sorted(os.listdir(directory)),
  }


def test_manager_async_saves_commit_in_order_like_synchronous_ones(tmp_path):
  synchronous = _manager_run(tmp_path / "sync", None)
  asynchronous = _manager_run(tmp_path / "async", _ASYNC)
  assert asynchronous == synchronous
  assert synchronous["kept"] == ["ckpt-4", "ckpt-5"]
  assert synchronous["values"] == [3.0, 4.0]
  assert synchronous["save_counter"] == 5


def test_one_snapshot_in_flight_next_save_waits(tmp_path):
  directory = tmp_path / "d"
  variable = tf.Variable(1.0)
  checkpoint = tf_objckpt.Checkpoint(v=variable)
  second = {}
  with directory_locked(directory):
    checkpoint.save(os.fspath(directory / "s"), options=_ASYNC)
    variable.assign(2.0)

    def save_again():
      second["path"] = checkpoint.save(os.fspath(directory / "s"),
                                       options=_ASYNC)

    thread = threading.Thread(target=save_again)
    thread.start()
    thread.join(timeout=2)
    # Waiting for the first write, which waits for the lock.
    assert thread.is_alive() and not second
  thread.join()
  checkpoint.sync()
  assert [
      float(_saved(os.fspath(directory / name))) for name in ("s-1", "s-2")
  ] == [1.0, 2.0]
  assert tf.train.latest_checkpoint(directory) == second["path"]


def _blocked_prefix(directory, name):
  """A prefix whose index cannot be written: a directory is in the way."""
  os.makedirs(os.path.join(directory, name + ".index", "occupied"))
  return os.fspath(os.path.join(directory, name))


def _synchronous_error(tmp_path, impl):
  checkpoint = tl.IMPLS[impl].Checkpoint(v=tf.Variable(1.0))
  prefix = _blocked_prefix(tmp_path / f"sync_{impl}", "w")
  return tl.outcome(checkpoint.write, prefix).error


@pytest.mark.parametrize(
    "raised_by", ["sync", "save", "write", "restore", "read", "manager_save"])
def test_background_error_is_raised_at_the_next_call(tmp_path, raised_by):
  expected = _synchronous_error(tmp_path, "tf")
  assert type(_synchronous_error(tmp_path, "ours")) is type(expected)
  variable = tf.Variable(1.0)
  checkpoint = tf_objckpt.Checkpoint(v=variable)
  good = checkpoint.write(os.fspath(tmp_path / "good"))
  prefix = _blocked_prefix(tmp_path / "d", "ckpt-1")
  assert checkpoint.save(os.fspath(tmp_path / "d" / "ckpt"),
                         options=_ASYNC) == prefix
  calls = {
      "sync":
          checkpoint.sync,
      "save":
          lambda: checkpoint.save(os.fspath(tmp_path / "other")),
      "write":
          lambda: checkpoint.write(os.fspath(tmp_path / "other")),
      "restore":
          lambda: checkpoint.restore(good),
      "read":
          lambda: checkpoint.read(good),
      "manager_save":
          tf_objckpt.CheckpointManager(checkpoint,
                                       tmp_path / "managed",
                                       max_to_keep=1).save,
  }
  error = tl.outcome(calls[raised_by]).error
  assert type(error) is type(expected), error
  assert prefix in str(error)
  # Raised once; the failed save left nothing and recorded nothing.
  checkpoint.sync()
  assert sorted(os.listdir(tmp_path / "d")) == ["ckpt-1.index"]
  assert tf.train.latest_checkpoint(tmp_path / "d") is None
  assert not os.path.exists(tmp_path / "other.index")
  # The call that raised did nothing else: the next one works.
  path = checkpoint.save(os.fspath(tmp_path / "d" / "ckpt"), options=_ASYNC)
  checkpoint.sync()
  assert os.path.basename(path) == "ckpt-2"
  assert tf.train.latest_checkpoint(tmp_path / "d") == path


def test_manager_async_error_leaves_the_state_file_alone(tmp_path):
  variable = tf.Variable(1.0)
  checkpoint = tf_objckpt.Checkpoint(v=variable)
  manager = tf_objckpt.CheckpointManager(checkpoint, tmp_path, max_to_keep=3)
  first = manager.save(options=_ASYNC)
  manager.sync()
  _blocked_prefix(tmp_path, "ckpt-2")
  manager.save(options=_ASYNC)
  error = tl.outcome(manager.sync).error
  assert isinstance(error, tf.errors.OpError), error
  assert manager.checkpoints == [first]
  assert tf.train.get_checkpoint_state(tmp_path).all_model_checkpoint_paths \
      == [first]
  assert sorted(os.listdir(tmp_path)) == [
      "checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index", "ckpt-2.index"
  ]


@pytest.mark.parametrize("how", ["save", "manager"])
def test_durable_async_saves_flush_in_the_background_before_listing(
    tmp_path, monkeypatch, how):
  flushed = []  # (path, in the main thread, the state file's text).
  real_fsync = os.fsync

  def fsync(fd):
    path = os.readlink(f"/proc/self/fd/{fd}")
    state = tmp_path / "checkpoint"
    flushed.append((path, threading.current_thread() is threading.main_thread(),
                    state.read_text() if state.exists() else ""))
    real_fsync(fd)

  monkeypatch.setattr(os, "fsync", fsync)
  options = tf_objckpt.CheckpointOptions(
      durable=True, experimental_enable_async_checkpoint=True)
  checkpoint = tf_objckpt.Checkpoint(v=tf.Variable(1.0))
  if how == "save":
    path = checkpoint.save(os.fspath(tmp_path / "ckpt"), options=options)
  else:
    path = tf_objckpt.CheckpointManager(checkpoint, tmp_path,
                                        1).save(options=options)
  checkpoint.sync()
  assert tf.train.latest_checkpoint(tmp_path) == path
  for name in ("ckpt-1.data-00000-of-00001", "ckpt-1.index"):
    flushes = [(main, state)
               for flushed_path, main, state in flushed
               if flushed_path == os.fspath(tmp_path / name)]
    assert flushes and all(
        not main and '"ckpt-1"' not in state for main, state in flushes), name
  assert '"ckpt-1"' in [
      state for flushed_path, _, state in flushed
      if flushed_path == os.fspath(tmp_path)
  ][-1]
