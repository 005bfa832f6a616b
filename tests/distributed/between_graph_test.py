"""v1 between-graph replication: ps processes, a worker that restarts.

Two ps tasks are processes of their own; the worker (`strategy_programs.
v1_between_graph`, a process too) places its graph with
`replica_device_setter` and trains in a `MonitoredTrainingSession` whose
scaffold's `Saver(sharded=True)` (TensorFlow's, or ours) saves every 4
steps. The worker dies at step 6, after the save of step 4; the ps tasks
keep step 6's values. A new worker process must resume from the
checkpoint of step 4, then train on and save at its end. Both libraries'
checkpoints must hold the same shards, byte for byte.

Covers: tf_objckpt.v1.name_based_saver, tf_objckpt.v1.saver_builders,
tf_objckpt.engine.writes.
"""

import pytest
import tensorflow as tf

import testlib as tl

pytestmark = pytest.mark.distributed


def _train_with_a_restart(directory, impl):
  """The worker crashes at step 6; a new one trains to 10. Returns its JSON."""
  with tl.ServerProcesses({"ps": 2}, clients={"worker": 1}) as servers:
    servers.start().wait_until_serving()
    env = servers.env("worker", 0)
    first = tl.run_cluster_program("v1_between_graph",
                                   str(directory),
                                   impl,
                                   12,
                                   6,
                                   env=env)
    assert first["started_at"] == 0
    assert tf.train.latest_checkpoint(str(directory)).endswith("model.ckpt-4")
    return tl.run_cluster_program("v1_between_graph",
                                  str(directory),
                                  impl,
                                  10,
                                  env=env)


def test_a_restarted_worker_resumes_from_the_sharded_checkpoint(tmp_path):
  results = {
      impl: _train_with_a_restart(tmp_path / impl, impl) for impl in tl.IMPLS
  }
  assert results["ours"] == results["tf"]
  assert results["ours"] == {
      "started_at": 4,
      "weight": [4.] * 8,
      "finished_at": 10
  }
  for step in (4, 10):
    ours, theirs = (
        str(tmp_path / impl / f"model.ckpt-{step}") for impl in ("ours", "tf"))
    layout = tl.file_layout(ours)
    assert layout == tl.file_layout(theirs)
    assert layout["num_shards"] == 2  # One per ps task.
    for suffix in [".index"
                  ] + [f".data-{shard:05d}-of-00002" for shard in range(2)]:
      with open(ours + suffix, "rb") as f, open(theirs + suffix, "rb") as g:
        assert f.read() == g.read(), ours + suffix
  # The session's summaries and graph stay; no temporary file does.
  left = tl.leftovers(tmp_path / "ours")
  assert set(left) == {"events", "graph"}, left
