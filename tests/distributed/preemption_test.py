"""`PreemptionCheckpointHandler` with our manager and checkpoint.

A training job (a child process, `cluster_programs.py preemption`) gets a
real SIGTERM mid-training: the handler saves a checkpoint and exits with
its restart code, and the restarted job resumes from that checkpoint. The
same with TensorFlow's manager, for reference.

Covers: tf_objckpt.checkpoint_management, tf_objckpt.api.checkpoint_manager.
"""

import pytest
import tensorflow as tf

import testlib as tl

pytestmark = pytest.mark.distributed

_RESTART_CODE = 42  # What the handler exits with after its save.


def _train_until_preempted(directory, impl, kind, preempt_after):
  """Runs the job, SIGTERMs it after step `preempt_after`; returns its code."""
  process = tl.start_python(
      [tl.CLUSTER_PROGRAMS, "preemption", directory, impl, kind, 1000])
  try:
    assert process.stdout.readline().startswith('{"resumed_at": 0}')
    code, stderr = tl.terminate_after_line(process, f"step {preempt_after}")
  finally:
    tl.kill_group(process)
  assert code == _RESTART_CODE, stderr[-5000:]


@pytest.mark.parametrize("impl,kind", [("ours", "manager"),
                                       ("ours", "checkpoint"),
                                       ("tf", "manager")])
def test_sigterm_saves_and_the_restarted_job_resumes(tmp_path, impl, kind):
  directory = str(tmp_path)
  _train_until_preempted(directory, impl, kind, preempt_after=3)
  saved = tf.train.latest_checkpoint(directory)
  assert saved is not None
  saved_step = tf.train.load_checkpoint(saved).get_tensor(
      "step/.ATTRIBUTES/VARIABLE_VALUE")
  # The handler saves at the step after the signal.
  assert saved_step >= 4
  result = tl.run_cluster_program("preemption", directory, impl, kind,
                                  saved_step + 3, saved_step)
  assert result["finished_at"] == saved_step + 3
  assert result["latest"] == saved  # Read, not rewritten, by the new job.


def test_our_manager_is_recognised_but_runs_only_our_code(tmp_path):
  """A `tf.train.CheckpointManager` by type; no TensorFlow method is used."""
  manager = tl.IMPLS["ours"].CheckpointManager(
      tl.IMPLS["ours"].Checkpoint(v=tf.Variable(1.)), str(tmp_path), 1)
  assert isinstance(manager, tf.train.CheckpointManager)
  ours = type(manager)
  for name in dir(tf.train.CheckpointManager):
    if name.startswith("__") or name.startswith("_tf_api"):
      continue
    owner = next(cls for cls in ours.__mro__ if name in vars(cls))
    assert owner is ours, f"{name} comes from {owner}"
