"""`ParameterServerStrategy` with every task a process of its own.

A coordinator (`strategy_programs.ps_rounds`), two ps tasks and a worker,
each an OS process on localhost. The model has a partitioned variable (a
`ShardedVariable`, two shards) and plain ones on the ps tasks. In rounds,
a step scheduled on the worker trains, then the coordinator saves with
TensorFlow's manager and with ours, checks what each file holds, and
restores each checkpoint with each library. Here each round's checkpoints
must have the same data-file layout, and the last ones be byte-identical.

Then every process is started again, with three ps tasks and another
partitioning, and each library restores each library's latest checkpoint
(`ps_restore`): the values are the last round's, as TensorFlow reshards.

Covers: tf_objckpt.engine.remote_tasks, tf_objckpt.engine.writes,
tf_objckpt.engine.sharding, tf_objckpt.api.checkpoint_manager.
"""

import json

import pytest

import testlib as tl

pytestmark = pytest.mark.distributed

_ROUNDS = 3


def _run_on_cluster(scenario, directory, ps_tasks, *args):
  """Runs `scenario` as the coordinator of a new cluster; returns its JSON."""
  with tl.ServerProcesses({
      "ps": ps_tasks,
      "worker": 1
  }, clients={"chief": 1}) as servers:
    servers.start().wait_until_serving()
    return tl.run_cluster_program(scenario,
                                  str(directory),
                                  *args,
                                  env=servers.env("chief", 0),
                                  timeout=120)


def test_rounds_then_three_ps_tasks_restore_two(tmp_path):
  result = _run_on_cluster("ps_rounds", tmp_path, 2, _ROUNDS, "fixed")
  assert result["shards"] == {"emb": 2, "dense": 2, "scalar": 1}
  # The managers keep the last two.
  for tf_path, our_path in zip(result["paths"]["tf"][-2:],
                               result["paths"]["ours"][-2:],
                               strict=True):
    layout = tl.file_layout(our_path)
    assert layout == tl.file_layout(tf_path), our_path
    # The ps tasks' shards, then the coordinator's.
    assert layout["num_shards"] == 3
    for suffix in [".index"
                  ] + [f".data-{shard:05d}-of-00003" for shard in range(3)]:
      with open(our_path + suffix, "rb") as ours, open(tf_path + suffix,
                                                       "rb") as theirs:
        assert ours.read() == theirs.read(), our_path + suffix
  assert not tl.leftovers(tmp_path / "ours")
  source = tmp_path / "rounds.json"
  source.write_text(json.dumps(result))
  resharded = _run_on_cluster("ps_restore", tmp_path, 3, source, "min_size")
  assert resharded["shards"] == {"emb": 3, "dense": 2, "scalar": 1}
