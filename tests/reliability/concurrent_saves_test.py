"""Saves from several threads at once: each a distinct, complete checkpoint.

TensorFlow's `Checkpoint.save` and `CheckpointManager.save` race when called
from two threads: two saves may get one number, and a checkpoint's
`save_counter` may differ from the number in its name. Ours into one
directory run one at a time (a departure listed in API.md); saves into
different directories run at the same time.

Covers: tf_objckpt.api.save_transaction, tf_objckpt.checkpoint,
tf_objckpt.checkpoint_management, tf_objckpt.api.object_checkpoints,
tf_objckpt.api.checkpoint_manager, tf_objckpt.engine.directory_lock.
"""

import concurrent.futures
import os
import threading

import pytest

import tensorflow as tf

import testlib as tl
import tf_objckpt

_THREADS = 2
_SAVES_PER_THREAD = 20


def _in_threads(save):
  """Calls `save(thread, index)` from each thread; returns the results."""
  with concurrent.futures.ThreadPoolExecutor(_THREADS) as pool:
    futures = [
        pool.submit(lambda t=thread:
                    [save(t, index)
                     for index in range(_SAVES_PER_THREAD)])
        for thread in range(_THREADS)
    ]
    return [path for future in futures for path in future.result()]


def _save_counter(path):
  return int(
      tf.train.load_checkpoint(path).get_tensor(
          "save_counter/.ATTRIBUTES/VARIABLE_VALUE"))


def _saved_values(path):
  """The value each thread's variable has in the checkpoint at `path`."""
  reader = tf.train.load_checkpoint(path)
  return [
      float(reader.get_tensor(f"values/{thread}/.ATTRIBUTES/"
                              "VARIABLE_VALUE")) for thread in range(_THREADS)
  ]


def test_concurrent_checkpoint_saves_are_serialized(tmp_path):
  """Each thread saves its own variable's values 1, 2, ... in turn.

  A checkpoint holds what its caller assigned, and, in the order of the
  numbers, never an older value of any thread than the one before it.
  """
  values = [tf.Variable(0.) for _ in range(_THREADS)]
  checkpoint = tf_objckpt.Checkpoint(values=values)
  prefix = str(tmp_path / "ckpt")

  def save(thread, index):
    values[thread].assign(index + 1)
    return thread, index + 1, checkpoint.save(prefix)

  saves = _in_threads(save)
  paths = [path for _, _, path in saves]
  assert len(set(paths)) == len(paths) == _THREADS * _SAVES_PER_THREAD
  for thread, value, path in saves:
    assert _save_counter(path) == int(path.rsplit("-", 1)[1])
    assert _saved_values(path)[thread] == value, path
  assert sorted(_save_counter(path) for path in paths) == list(
      range(1,
            len(paths) + 1))
  in_order = [_saved_values(f"{prefix}-{n}") for n in range(1, len(paths) + 1)]
  for older, newer in zip(in_order, in_order[1:]):
    assert all(map(float.__le__, older, newer)), in_order
  assert in_order[-1] == [float(_SAVES_PER_THREAD)] * _THREADS
  assert tf_objckpt.latest_checkpoint(str(tmp_path)) == f"{prefix}-{len(paths)}"


def test_concurrent_manager_saves_are_serialized(tmp_path):
  checkpoint = tf_objckpt.Checkpoint(value=tf.Variable(1.))
  manager = tf_objckpt.CheckpointManager(checkpoint,
                                         str(tmp_path),
                                         max_to_keep=None)
  paths = _in_threads(lambda thread, index: manager.save())
  assert len(set(paths)) == len(paths) == _THREADS * _SAVES_PER_THREAD
  for path in paths:
    assert os.path.exists(path + ".index")
    assert _save_counter(path) == int(path.rsplit("-", 1)[1])
  assert manager.checkpoints == sorted(
      paths, key=lambda path: int(path.rsplit("-", 1)[1]))


def test_concurrent_writes_each_write_their_own_values(tmp_path):
  """`write()` from threads: every file holds what its caller wrote."""
  values = {thread: tf.Variable(float(thread)) for thread in range(_THREADS)}
  checkpoints = {
      thread: tl.IMPLS["ours"].Checkpoint(value=values[thread])
      for thread in values
  }

  def write(thread, index):
    path = str(tmp_path / f"thread{thread}-{index}")
    return thread, checkpoints[thread].write(path)

  for thread, path in _in_threads(write):
    assert float(
        tf.train.load_checkpoint(path).get_tensor(
            "value/.ATTRIBUTES/VARIABLE_VALUE")) == float(thread)


def _save_into(kind, directory, options):
  """Saves a new checkpoint object's variable into `directory`."""
  checkpoint = tf_objckpt.Checkpoint(value=tf.Variable(1.))
  if kind == "manager":
    return tf_objckpt.CheckpointManager(checkpoint, directory,
                                        max_to_keep=2).save(options=options)
  return checkpoint.save(os.path.join(directory, "ckpt"), options=options)


@pytest.mark.parametrize("kind", ["checkpoint", "manager"])
def test_saves_into_different_directories_are_in_flight_at_once(tmp_path, kind):
  """The first save waits, inside its write callback, for the second save
  (into another directory) to run its own: saves serialized across
  directories would never let it. The waits give up after a minute, so
  that a regression fails rather than hangs."""
  first_waits = threading.Event()
  second_wrote = threading.Event()
  second_seen = []

  def first_callback():
    first_waits.set()
    second_seen.append(second_wrote.wait(timeout=60))

  first = concurrent.futures.ThreadPoolExecutor(1).submit(
      _save_into, kind, str(tmp_path / "first"),
      tf.train.CheckpointOptions(experimental_write_callbacks=[first_callback]))
  assert first_waits.wait(timeout=60)
  second_path = _save_into(
      kind, str(tmp_path / "second"),
      tf.train.CheckpointOptions(
          experimental_write_callbacks=[second_wrote.set]))
  first_path = first.result()
  assert second_seen == [True]
  assert tf_objckpt.latest_checkpoint(str(tmp_path / "first")) == first_path
  assert tf_objckpt.latest_checkpoint(str(tmp_path / "second")) == second_path
