"""What failed and interrupted saves leave is removed, and only that.

The leftovers here are the files a save killed at some point leaves (as
`interrupted_saves_test.py` produces them by killing processes): copies of
real checkpoint files under the names TensorFlow's ops give them while a
save runs. A manager starting, or any save of ours, removes those of its
own prefixes once no save runs in the directory; TensorFlow removes none.
Complete checkpoints, listed or not, other prefixes and other files stay.

Covers: tf_objckpt.engine.commit, tf_objckpt.checkpoint_management,
tf_objckpt.api.checkpoint_manager, tf_objckpt.engine.leftovers,
tf_objckpt.engine.temporary_names.
"""

import os
import threading
import time

import tensorflow as tf

import testlib as tl
import tf_objckpt
from tf_objckpt.engine import leftovers

# Left by saves killed at different points, with the directory they were
# written in. Their prefixes are all numbered from "ckpt".
_LEFTOVERS = (
    "ckpt-3.data-00000-of-00001",  # Data renamed into place, no index yet.
    "ckpt-4_temp/part-00000-of-00002.data-00000-of-00001",  # Sharded save.
    "ckpt-4_temp/part-00000-of-00002.index",
    "ckpt-5.data-00000-of-00001.tempstate1234567",  # SaveV2 writing.
    "ckpt-6.index.tempstate7654321",  # SaveV2 writing the index.
    # An eager sharded save's own directory, and its S3 form.
    "ckpt-7_temp_0123456789abcdef0123456789abcdef/part-00001-of-00003.index",
    "ckpt-8_temp_0123456789abcdef0123456789abcdef.part-00000-of-00002.index",
    "checkpoint.tmp0123456789abcdef0123456789abcdef",  # The state file.
)
# Files no interrupted save of "ckpt-<n>" left: they stay.
_OTHERS = (
    "ckpt-9.data-00000-of-00001",  # A complete checkpoint nobody lists.
    "ckpt-9.index",
    "other-1.data-00000-of-00001.tempstate1",  # Another prefix's.
    "ckpt.data-00000-of-00001.tempstate1",  # Not numbered from "ckpt".
    "notes.txt",
)


def _join(directory, name):
  return directory.rstrip("/") + "/" + name


def _add_files(directory, names, source):
  """Copies `source` (a real data file) to each of `names` in `directory`."""
  for name in names:
    path = _join(directory, name)
    tf.io.gfile.makedirs(os.path.dirname(path))
    tf.io.gfile.copy(source, path, overwrite=True)


def _files(directory):
  """Every file below `directory`, relative to it, sorted."""
  return sorted(
      os.path.relpath(_join(root, name), directory) if "://" not in
      directory else _join(root, name)[len(directory.rstrip("/")) + 1:]
      for root, _, names in tf.io.gfile.walk(directory)
      for name in names)


def _directory_with_leftovers(directory, impl="ours"):
  """Two managed checkpoints, then the leftovers of interrupted saves."""
  checkpoint = tl.IMPLS[impl].Checkpoint(v=tf.Variable(1.))
  manager = tl.IMPLS[impl].CheckpointManager(checkpoint,
                                             directory,
                                             max_to_keep=2)
  manager.save()
  manager.save()
  source = _join(directory, "ckpt-2.data-00000-of-00001")
  _add_files(directory, _LEFTOVERS + _OTHERS, source)
  return checkpoint


# What stays: the two checkpoints, the state file and the other files.
_KEPT = sorted([
    "checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index",
    "ckpt-2.data-00000-of-00001", "ckpt-2.index", *_OTHERS
])


def test_a_starting_manager_removes_leftovers(tmp_path):
  kept = {}
  for impl in tl.IMPLS:
    directory = str(tmp_path / impl)
    checkpoint = _directory_with_leftovers(directory)
    before = _files(directory)
    tl.IMPLS[impl].CheckpointManager(checkpoint, directory, max_to_keep=2)
    kept[impl] = _files(directory)
    if impl == "tf":
      assert kept["tf"] == before  # TensorFlow removes nothing.
  assert kept["ours"] == _KEPT


def test_a_manager_save_removes_leftovers_of_its_prefixes(tmp_path):
  directory = str(tmp_path)
  checkpoint = _directory_with_leftovers(directory)
  manager = tf_objckpt.CheckpointManager(checkpoint, directory, max_to_keep=5)
  _add_files(
      directory,
      _LEFTOVERS,  # Left by another process meanwhile.
      _join(directory, "ckpt-2.data-00000-of-00001"))
  manager.save(checkpoint_number=7)
  assert _files(directory) == sorted(
      _KEPT + ["ckpt-7.data-00000-of-00001", "ckpt-7.index"])


def test_a_checkpoint_save_removes_leftovers_of_its_prefixes(tmp_path):
  directory = str(tmp_path)
  checkpoint = _directory_with_leftovers(directory, impl="tf")
  tf_objckpt.Checkpoint(v=checkpoint.v).save(os.path.join(directory, "ckpt"))
  assert _files(directory) == _KEPT  # ckpt-1 is written again.


def test_a_write_removes_leftovers_of_its_own_prefix_only(tmp_path):
  directory = str(tmp_path)
  _directory_with_leftovers(directory, impl="tf")
  tf_objckpt.Checkpoint(v=tf.Variable(2.)).write(
      os.path.join(directory, "ckpt-5"))
  files = _files(directory)
  assert "ckpt-5.data-00000-of-00001.tempstate1234567" not in files
  assert "ckpt-5.index" in files
  assert "ckpt-3.data-00000-of-00001" in files  # Not its prefix.


def test_leftovers_stay_while_a_save_runs_in_the_directory(tmp_path):
  """A save in progress holds the directory: nothing is removed meanwhile."""
  directory = str(tmp_path)
  checkpoint = _directory_with_leftovers(directory, impl="tf")
  saving, release = threading.Event(), threading.Event()

  def hold(_):
    saving.set()
    release.wait(60)

  writer = tf_objckpt.Checkpoint(v=tf.Variable(3.))
  options = tf.train.CheckpointOptions(experimental_write_callbacks=[hold])
  thread = threading.Thread(target=writer.write,
                            args=(os.path.join(directory,
                                               "elsewhere"), options))
  thread.start()
  try:
    assert saving.wait(60)
    before = _files(directory)
    tf_objckpt.CheckpointManager(checkpoint, directory, max_to_keep=2)
    assert _files(directory) == before
  finally:
    release.set()
    thread.join()
  tf_objckpt.CheckpointManager(checkpoint, directory, max_to_keep=2)
  assert _files(directory) == sorted(
      _KEPT + ["elsewhere.data-00000-of-00001", "elsewhere.index"])


def test_cleanup_under_ram_filesystem():
  """Without locks: `ram://` reports no modification times, so leftovers
  of prefixes this process is not saving are stale at once."""
  directory = "ram://save_cleanup_test"
  checkpoint = _directory_with_leftovers(directory)
  manager = tf_objckpt.CheckpointManager(checkpoint, directory, max_to_keep=2)
  assert _files(directory) == _KEPT
  _add_files(directory, _LEFTOVERS,
             _join(directory, "ckpt-2.data-00000-of-00001"))
  manager.save()
  assert _files(directory) == sorted([
      "checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index",
      "ckpt-3.data-00000-of-00001", "ckpt-3.index", *_OTHERS
  ])
  tf.io.gfile.rmtree(directory)


def test_remote_leftovers_wait_for_the_staleness_delay(monkeypatch):
  """Leftovers younger than `REMOTE_STALE_AFTER_SECONDS` stay.

  `ram://` files are modified at time 0; the clock says when it is now.
  """
  directory = "ram://save_cleanup_delay_test"
  checkpoint = _directory_with_leftovers(directory)
  now = [60.]
  monkeypatch.setattr(time, "time", lambda: now[0])
  tf_objckpt.CheckpointManager(checkpoint, directory, max_to_keep=2)
  assert _files(directory) == sorted(_KEPT + list(_LEFTOVERS))
  now[0] = leftovers.REMOTE_STALE_AFTER_SECONDS + 1.
  tf_objckpt.CheckpointManager(checkpoint, directory, max_to_keep=2)
  assert _files(directory) == _KEPT
  tf.io.gfile.rmtree(directory)
