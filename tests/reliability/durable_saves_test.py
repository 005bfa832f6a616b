"""Durable saves: `tf_objckpt.CheckpointOptions(durable=True)`.

A durable save flushes the checkpoint's data files, its index and its
directory to disk before the state file lists it, and the state file
before older checkpoints are deleted. TensorFlow has no such option (its
file layer cannot fsync); its classes accept ours and ignore `durable`.
The files are TensorFlow's either way.

Which flushes happen is watched by wrapping `os.fsync` (calling the real
one): a power loss cannot be simulated in a test.

Covers: tf_objckpt.engine.commit, tf_objckpt.api.save_transaction,
tf_objckpt.api.trackable_saver, tf_objckpt.checkpoint_management,
tf_objckpt.api.checkpoint_manager, tf_objckpt.engine.local_paths.
"""

import os
import time

import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt

_DURABLE = tf_objckpt.CheckpointOptions(durable=True)


def _save_by(impl, directory, how, options):
  lib = tl.IMPLS[impl]
  checkpoint = lib.Checkpoint(v=tf.Variable([1., 2.]), n=tf.Variable(3))
  if how == "write":
    checkpoint.write(os.path.join(directory, "ckpt"), options=options)
  elif how == "save":
    for _ in range(2):
      checkpoint.save(os.path.join(directory, "ckpt"), options=options)
  else:
    manager = lib.CheckpointManager(checkpoint, directory, max_to_keep=1)
    for _ in range(2):
      manager.save(options=options)


@pytest.mark.parametrize("how", ["write", "save", "manager"])
def test_durable_saves_write_tensorflows_files(tmp_path, monkeypatch, how):
  monkeypatch.setattr(time, "time", lambda: 1e9)  # The state's timestamps.
  for impl in tl.IMPLS:
    _save_by(impl, str(tmp_path / impl), how, _DURABLE)
  tl.assert_same_files(tmp_path)


@pytest.fixture
def flushed(monkeypatch):
  """Records each fsync: (path, the state file's text at the time)."""
  calls = []
  real_fsync = os.fsync

  def fsync(fd):
    path = os.readlink(f"/proc/self/fd/{fd}")
    state = os.path.join(path if os.path.isdir(path) else os.path.dirname(path),
                         "checkpoint")
    calls.append((path, open(state).read() if os.path.exists(state) else ""))
    real_fsync(fd)

  monkeypatch.setattr(os, "fsync", fsync)
  return calls


# The last save of each way in `_save_by`.
_LAST_SAVE = {"write": "ckpt", "save": "ckpt-2", "manager": "ckpt-2"}


@pytest.mark.parametrize("how", ["write", "save", "manager"])
def test_files_are_flushed_before_the_state_file_lists_them(
    tmp_path, flushed, how):
  directory = str(tmp_path)
  _save_by("ours", directory, how, _DURABLE)
  name = _LAST_SAVE[how]
  listed = f'"{name}"'
  files = [
      os.path.join(directory, name + suffix)
      for suffix in (".data-00000-of-00001", ".index")
  ]
  for path in files:
    states = [state for flushed_path, state in flushed if flushed_path == path]
    assert states and all(listed not in state for state in states), path
  # The files are flushed under their final names, so after their renames.
  # The directory (which records the renames) after them, and before the
  # state file lists the checkpoint: an earlier save's flush is no proof.
  last_file_flush = max(
      i for i, (path, _) in enumerate(flushed) if path in files)
  assert [
      state for path, state in flushed[last_file_flush:]
      if path == directory and listed not in state
  ], flushed
  if how == "write":
    return  # No state file.
  # The directory after the state file too.
  directory_flushes = [state for path, state in flushed if path == directory]
  assert listed in directory_flushes[-1]
  # The state file itself, under its temporary name before the rename.
  assert any(
      os.path.basename(path).startswith("checkpoint.tmp")
      for path, _ in flushed)


_SHARDING_POLICIES = {
    "parallel_shards":
        lambda: tf_objckpt.ParallelShardsPolicy(max_shards=3, min_shard_bytes=1
                                               ),
    "max_shard_size":
        lambda: tf.train.experimental.MaxShardSizePolicy(8),
}


@pytest.mark.parametrize("policy", _SHARDING_POLICIES)
def test_every_shard_is_flushed_before_the_state_file_lists_it(
    tmp_path, monkeypatch, flushed, policy):
  """Saves of several data files (written at once) flush each of them."""
  monkeypatch.setattr(time, "time", lambda: 1e9)  # The state's timestamps.
  options = tf_objckpt.CheckpointOptions(
      durable=True, experimental_sharding_callback=_SHARDING_POLICIES[policy]())
  for impl in tl.IMPLS:
    _save_by(impl, str(tmp_path / impl), "manager", options)
  tl.assert_same_files(tmp_path)
  directory = tmp_path / "ours"
  files = [
      str(directory / name)
      for name in os.listdir(directory)
      if name.startswith("ckpt-2.")
  ]
  assert len(files) >= 4, files  # The index and three data files or more.
  for path in files:
    states = [state for flushed_path, state in flushed if flushed_path == path]
    assert states and all('"ckpt-2"' not in state for state in states), path


def test_saves_without_the_option_flush_nothing(tmp_path, flushed):
  _save_by("ours", str(tmp_path), "manager", None)
  _save_by("ours", str(tmp_path / "plain"), "save",
           tf_objckpt.CheckpointOptions())
  assert not flushed


@pytest.mark.parametrize("how", ["write", "save", "manager"])
def test_durable_saves_are_refused_off_local_paths(how):
  directory = f"ram://durable_saves_test_{how}"
  with pytest.raises(tf.errors.UnimplementedError, match="local paths only"):
    _save_by("ours", directory, how, _DURABLE)
  assert not tf.io.gfile.exists(directory) or not tf.io.gfile.listdir(directory)


def _recorder(names):
  """A write callback that appends the name of each checkpoint to `names`."""
  return lambda path: names.append(os.path.basename(path))


# The checkpoints each way in `_save_by` writes, in order.
_WRITTEN = {
    "write": ["ckpt"],
    "save": ["ckpt-1", "ckpt-2"],
    "manager": ["ckpt-1", "ckpt-2"]
}


@pytest.mark.parametrize("how", ["write", "save", "manager"])
def test_tensorflow_accepts_our_options(tmp_path, monkeypatch, flushed, how):
  """TensorFlow's classes take ours and ignore `durable`; we flush.

  The rest of the options (here, write callbacks) works in both, and the
  files are the same.
  """
  monkeypatch.setattr(time, "time", lambda: 1e9)  # The state's timestamps.
  written, flushes = {}, {}
  for impl in tl.IMPLS:
    written[impl] = []
    options = tf_objckpt.CheckpointOptions(
        durable=True, experimental_write_callbacks=[_recorder(written[impl])])
    before = len(flushed)
    _save_by(impl, str(tmp_path / impl), how, options)
    flushes[impl] = [path for path, _ in flushed[before:]]
  assert not flushes["tf"]
  assert os.path.join(str(tmp_path / "ours"),
                      _LAST_SAVE[how] + ".index") in (flushes["ours"])
  assert written["tf"] == written["ours"] == _WRITTEN[how]
  tl.assert_same_files(tmp_path)
