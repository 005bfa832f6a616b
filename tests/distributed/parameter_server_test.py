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

A write that fails on a live ps task (the checkpoint's relative path
leads nowhere from that task's working directory) raises TensorFlow's
error type, naming the task and the checkpoint; the previous checkpoint
stays the latest and restores, and no file of the failed save is left
on any task (`ps_failed_write`). TensorFlow's save raises the same type.

Covers: tf_objckpt.engine.remote_tasks, tf_objckpt.engine.writes,
tf_objckpt.engine.sharding, tf_objckpt.api.checkpoint_manager.
"""

import json
import os
import subprocess

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


@pytest.mark.parametrize("policy", ["none", "by_task"])
def test_a_write_failing_on_a_live_task_names_it(tmp_path, policy):
  """Through our one function, and through ops sent from a thread per task
  (`ShardByTaskPolicy`'s shards)."""
  elsewhere = tmp_path / "ps1"
  elsewhere.mkdir()
  for impl in tl.IMPLS:
    (tmp_path / impl).mkdir()
    (elsewhere / impl).symlink_to(tmp_path / impl)
  with tl.ServerProcesses({
      "ps": 2,
      "worker": 1
  }, clients={"chief": 1}) as servers:
    servers.start("ps", 0, working_directory=str(tmp_path))
    servers.start("ps", 1, working_directory=str(elsewhere))
    servers.start("worker", 0).wait_until_serving()
    with open(tmp_path / "stderr.txt", "w") as stderr:
      client = tl.start_cluster_program("ps_failed_write",
                                        str(tmp_path),
                                        policy,
                                        env=servers.env("chief", 0),
                                        stdin=subprocess.PIPE,
                                        stderr=stderr)
    try:
      saved = json.loads(tl.read_line(client, 120))["saved"]
      for impl in tl.IMPLS:
        (elsewhere / impl).unlink()
      client.stdin.write("save\n")
      client.stdin.flush()
      result = tl.finish_cluster_program(client, 120, "ps_failed_write")
    finally:
      tl.kill_group(client)
  print(json.dumps(result))
  ours, theirs = result["ours"], result["tf"]
  assert ours["error"] and theirs["error"], result
  assert ours["error"][0] == theirs["error"][0], result
  message = ours["error"][1]
  assert "/job:ps/replica:0/task:1" in message, message
  assert "/job:ps/replica:0/task:0" not in message, message
  assert f"checkpoint {os.path.join('ours', 'ckpt-2')}" in message, message
  for impl in tl.IMPLS:  # TensorFlow's too: its state file is written last.
    assert result[impl]["latest"] == saved[impl], result
  assert all(values == [1.] for values in ours["restored"].values()), ours
  assert ours["leftovers"] == {}, ours
  assert not os.listdir(elsewhere), os.listdir(elsewhere)
