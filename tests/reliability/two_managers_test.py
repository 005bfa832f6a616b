"""Two `CheckpointManager`s writing into one directory.

TensorFlow's managers each keep their own list of checkpoints and rewrite
the state file from it, so two of them in one directory overwrite each
other's checkpoints and delete them as old. Ours notices that the state
file changed since it last read or wrote it, and refuses to save with
`FailedPreconditionError`; a manager created afterwards takes over.

Covers: tf_objckpt.checkpoint_management, tf_objckpt.engine.state_file,
tf_objckpt.api.checkpoint_manager, tf_objckpt.engine.directory_lock.
"""

import os
import textwrap

import pytest
import tensorflow as tf

import testlib as tl


def _managers(impl, directory):
  """Two managers of one directory, each of its own checkpoint object."""
  lib = tl.IMPLS[impl]
  return [
      lib.CheckpointManager(lib.Checkpoint(v=tf.Variable(float(index))),
                            directory,
                            max_to_keep=1) for index in range(2)
  ]


def test_second_manager_cannot_delete_the_firsts_checkpoints(tmp_path):
  kept = {}
  for impl in tl.IMPLS:
    directory = str(tmp_path / impl)
    first, second = _managers(impl, directory)
    path = first.save()
    outcome = tl.outcome(second.save)
    first.save()
    kept[impl] = (outcome, os.path.exists(path + ".index"))
    if impl == "tf":
      # The second overwrote the first's ckpt-1, which the first then
      # deleted as old: what the second returned is gone.
      assert outcome.result == path
      assert not os.path.exists(outcome.result + ".index")
  outcome, _ = kept["ours"]
  assert isinstance(outcome.error, tf.errors.FailedPreconditionError)
  assert "another CheckpointManager" in str(outcome.error)
  assert tf.train.latest_checkpoint(str(tmp_path / "ours")).endswith("ckpt-2")


def test_a_new_manager_takes_over(tmp_path):
  directory = str(tmp_path)
  first, _ = _managers("ours", directory)
  first.save()
  lib = tl.IMPLS["ours"]
  checkpoint = lib.Checkpoint(v=tf.Variable(5.))
  checkpoint.restore(tf.train.latest_checkpoint(directory))
  successor = lib.CheckpointManager(checkpoint, directory, max_to_keep=1)
  assert successor.save().endswith("ckpt-2")
  with pytest.raises(tf.errors.FailedPreconditionError):
    first.save()
  assert successor.save().endswith("ckpt-3")
  assert successor.checkpoints == [os.path.join(directory, "ckpt-3")]


def test_manager_after_a_failed_save_still_saves(tmp_path):
  """Only another writer's state counts: our own failed save does not."""
  directory = str(tmp_path)
  manager, _ = _managers("ours", directory)
  manager.save()
  os.makedirs(os.path.join(directory, "ckpt-2.index"))  # Blocks ckpt-2.
  assert tl.outcome(manager.save).error is not None
  os.rmdir(os.path.join(directory, "ckpt-2.index"))
  assert manager.save().endswith("ckpt-3")


_OTHER_PROCESS = textwrap.dedent("""
    import sys
    import tensorflow as tf
    import testlib as tl
    lib = tl.IMPLS[sys.argv[1]]
    manager = lib.CheckpointManager(lib.Checkpoint(v=tf.Variable(7.)),
                                    sys.argv[2], max_to_keep=1,
                                    checkpoint_name="other")
    print("SAVED", manager.save())
""")


def test_managers_in_two_processes(tmp_path):
  outcomes = {}
  for impl in tl.IMPLS:
    directory = str(tmp_path / impl)
    first, _ = _managers(impl, directory)
    first.save()
    result = tl.run_python(_OTHER_PROCESS, impl, directory)
    assert "SAVED" in result.stdout, result.stderr[-3000:]
    outcomes[impl] = tl.outcome(first.save)
    state = tf.train.get_checkpoint_state(directory)
    if impl == "tf":  # The other process's checkpoint is forgotten.
      assert outcomes["tf"].error is None
      assert [
          os.path.basename(path) for path in state.all_model_checkpoint_paths
      ] == ["ckpt-2"]
    else:
      assert state.model_checkpoint_path.endswith("other-1")
  assert isinstance(outcomes["ours"].error, tf.errors.FailedPreconditionError)
