"""Every save runs one transaction: plan, write shards, commit, record state.

Each case makes a real save and records what happens, in order:
- "plan": a `SavePlan` is made (the save is numbered and planned);
- "open": `commit.saving` is entered (it opens the save: cleanup, undo);
- "write": a new `.index` file is in the directory (seen at the next
  event, or when the save is over);
- "sync": a durable save flushes one of the checkpoint's files;
- "callback": a write callback of the options runs;
- "record": the state file is written.
Repeats of "plan", "write", "sync" and "record" count once (a manager
writes the state file twice, a plan may be copied); "open" counts each
time. Each save must show the steps in the transaction's order, with
`commit.saving` entered once (`api/save_transaction.py`).

Covers: tf_objckpt.api.save_transaction, tf_objckpt.engine.commit,
tf_objckpt.engine.state_file.
"""

import contextlib
import glob
import os

import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt
from tf_objckpt.api import save_transaction
from tf_objckpt.engine import commit
from tf_objckpt.engine import state_file
from tf_objckpt import graph_view

_REPEATABLE = ("plan", "write", "sync", "record")


class _Steps:
  """The steps a save in `directory` takes, as they happen."""

  def __init__(self, directory):
    self.directory = os.fspath(directory)
    self._events = []
    self._indexes = set()

  def event(self, name):
    """Records `name`, after "write" if an index appeared since the last."""
    indexes = set(glob.glob(os.path.join(self.directory, "*.index")))
    if indexes - self._indexes:
      self._events.append("write")
    self._indexes = indexes
    self._events.append(name)

  def callback(self, path):
    del path  # Any write callback: it takes the path.
    self.event("callback")

  def taken(self):
    """The steps so far, repeats counted once; then starts again."""
    self.event("end")
    steps = []
    for name in self._events[:-1]:
      if not (steps and name == steps[-1] and name in _REPEATABLE):
        steps.append(name)
    self._events = []
    return steps


@pytest.fixture
def steps(tmp_path, monkeypatch):
  """Records the steps of saves in `tmp_path`."""
  recorder = _Steps(tmp_path)
  real_init = save_transaction.SavePlan.__init__
  real_saving = commit.saving
  real_atomic_write = state_file._atomic_write  # pylint: disable=protected-access
  real_fsync = os.fsync

  def init(self, *args, **kwargs):
    real_init(self, *args, **kwargs)
    recorder.event("plan")

  @contextlib.contextmanager
  def saving(*args, **kwargs):
    recorder.event("open")
    with real_saving(*args, **kwargs) as save:
      yield save

  def atomic_write(*args, **kwargs):
    recorder.event("record")
    return real_atomic_write(*args, **kwargs)

  def fsync(fd):
    name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
    if name.endswith(".index") or ".data-" in name:
      recorder.event("sync")
    real_fsync(fd)

  monkeypatch.setattr(save_transaction.SavePlan, "__init__", init)
  monkeypatch.setattr(commit, "saving", saving)
  monkeypatch.setattr(state_file, "_atomic_write", atomic_write)
  monkeypatch.setattr(os, "fsync", fsync)
  return recorder


def _options(steps, durable=False, asynchronous=False):
  return tf_objckpt.CheckpointOptions(
      durable=durable,
      experimental_enable_async_checkpoint=asynchronous,
      experimental_write_callbacks=[steps.callback])


_SAVED = ["plan", "open", "write", "sync", "callback", "record"]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_checkpoint_save(tmp_path, steps, asynchronous):
  checkpoint = tf_objckpt.Checkpoint(v=tf.Variable([1., 2.]))
  for _ in range(2):
    checkpoint.save(os.fspath(tmp_path / "ckpt"),
                    options=_options(steps, True, asynchronous))
    checkpoint.sync()
    assert steps.taken() == _SAVED


@pytest.mark.parametrize("asynchronous", [False, True])
def test_checkpoint_write(tmp_path, steps, asynchronous):
  checkpoint = tf_objckpt.Checkpoint(v=tf.Variable([1., 2.]))
  checkpoint.write(os.fspath(tmp_path / "ckpt"),
                   options=_options(steps, asynchronous=asynchronous))
  checkpoint.sync()
  assert steps.taken() == ["plan", "open", "write", "callback"]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_manager_save(tmp_path, steps, asynchronous):
  checkpoint = tf_objckpt.Checkpoint(v=tf.Variable([1., 2.]))
  manager = tf_objckpt.CheckpointManager(checkpoint, tmp_path, max_to_keep=1)
  for _ in range(2):
    manager.save(options=_options(steps, True, asynchronous))
    manager.sync()
    assert steps.taken() == _SAVED


@pytest.mark.parametrize("asynchronous", [False, True])
def test_manager_save_of_tensorflows_checkpoint(tmp_path, steps, asynchronous):
  checkpoint = tf.train.Checkpoint(v=tf.Variable([1., 2.]))
  manager = tf_objckpt.CheckpointManager(checkpoint, tmp_path, max_to_keep=1)
  manager.save(options=_options(steps, asynchronous=asynchronous))
  manager.sync()
  assert steps.taken() == ["plan", "open", "write", "callback", "record"]


def test_trackable_saver_save(tmp_path, steps):
  root = tf_objckpt.Checkpoint(v=tf.Variable(1.))
  saver = tf_objckpt.TrackableSaver(graph_view.ObjectGraphView(root))
  saver.save(os.fspath(tmp_path / "ckpt"), checkpoint_number=3)
  assert steps.taken() == ["plan", "open", "write"]


def test_graph_mode_checkpoint_save(tmp_path, steps):
  with tl.GraphProgram("ours") as program:
    program.track([program.variable("v", [1., 2.])])
    for _ in range(2):
      program.checkpoint.save(os.fspath(tmp_path / "ckpt"),
                              session=program.session,
                              options=_options(steps, durable=True))
      assert steps.taken() == _SAVED


def test_graph_mode_v1_saver_save(tmp_path, steps):
  with tl.GraphProgram("ours") as program:
    program.variable("v", [1., 2.])
    saver = tl.IMPLS["ours"].Saver()
    program.initialize()
    for step in range(2):
      saver.save(program.session,
                 os.fspath(tmp_path / "ckpt"),
                 global_step=step)
      assert steps.taken() == ["plan", "open", "write", "record"]


def test_eager_v1_saver_save(tmp_path, steps):
  saver = tl.IMPLS["ours"].Saver([tf.Variable(1., name="v")])
  saver.save(None, os.fspath(tmp_path / "ckpt"))
  assert steps.taken() == ["plan", "open", "write", "record"]
