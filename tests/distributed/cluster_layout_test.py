"""Checkpoints of values on several tasks and devices, on real clusters.

Each test runs `cluster_programs.py` in a child process: it starts
`tf.distribute.Server`s on localhost, saves the same model with TensorFlow
and with tf_objckpt (save, write with each sharding policy, a manager's
save), restores every checkpoint with both libraries and checks the values.
Here the checkpoints' `.index` files are compared: every key and slice must
be in the same data file, at the same offset, as in TensorFlow's.

Covers: tf_objckpt.engine.sharding, tf_objckpt.engine.writes,
tf_objckpt.engine.variable_values, tf_objckpt.engine.multi_device_saver,
tf_objckpt.checkpoint, tf_objckpt.api.object_checkpoints.
"""

import json
import os

import pytest

import testlib as tl

pytestmark = pytest.mark.distributed


def _assert_same_layouts(result):
  """Each kind of checkpoint has TensorFlow's data files, key by key."""
  for kind, tf_path in result["paths"]["tf"].items():
    expected = tl.file_layout(tf_path)
    actual = tl.file_layout(result["paths"]["ours"][kind])
    assert actual == expected, f"{kind}: ours (left), TensorFlow's (right)"


def _run(scenario, directory, *args):
  result = tl.run_cluster_program(scenario, str(directory), *args)
  _assert_same_layouts(result)
  with open(directory / "result.json", "w") as f:
    json.dump(result, f)
  return result


@pytest.fixture(scope="module")
def two_ps(tmp_path_factory):
  """ShardedVariables split in two, over two ps tasks."""
  directory = tmp_path_factory.mktemp("two_ps")
  result = _run("ps_strategy", directory, 2, "fixed")
  assert result["shards"] == {"emb": 2, "dense": 2, "scalar": 1}
  return directory


@pytest.fixture(scope="module")
def plain_model(tmp_path_factory, two_ps):
  """Plain variables in one process, restoring the two-ps checkpoints."""
  directory = tmp_path_factory.mktemp("plain")
  _run("plain", directory, two_ps / "result.json")
  return directory


def test_graph_mode_checkpoint_v1_over_two_ps_tasks(tmp_path):
  """Between-graph CheckpointV1: files numbered in the order tasks are met."""
  result = _run("ps_graph", tmp_path)
  layout = tl.file_layout(result["paths"]["ours"]["save"])
  # a is on ps 1 and met first, b on ps 0; the counter and the object
  # graph, on the worker's CPU, come last.
  assert layout["num_shards"] == 3
  assert layout[repr(b"a/.ATTRIBUTES/VARIABLE_VALUE")][0] == 0
  assert layout[repr(b"b/.ATTRIBUTES/VARIABLE_VALUE")][0] == 1
  assert layout[repr(tl.OBJECT_GRAPH_KEY.encode())][0] == 2
  assert tl.file_layout(
      result["paths"]["ours"]["write_max_size"])["num_shards"] > 3


def test_parameter_server_strategy_sharded_variables(two_ps):
  """Same topology: layouts compared and values restored in the child."""
  layout = tl.file_layout(str(two_ps / "ours" / "write_by_task"))
  assert layout["num_shards"] == 3


def test_plain_model_restores_sharded_variables(plain_model):
  """The plain model restored the two-ps checkpoints (in the child)."""
  assert tl.file_layout(str(plain_model / "ours" / "ckpt-1"))["num_shards"] == 1


@pytest.fixture(scope="module")
def three_ps(tmp_path_factory, two_ps, plain_model):
  """Three ps tasks, min-size partitioning: restores two-ps and plain saves."""
  directory = tmp_path_factory.mktemp("three_ps")
  result = _run("ps_strategy", directory, 3, "min_size", two_ps / "result.json",
                plain_model / "result.json")
  assert result["shards"] == {"emb": 3, "dense": 1, "scalar": 1}
  return directory


def test_more_ps_tasks_restore_fewer(three_ps):
  """The three-ps run restored the two-ps and plain checkpoints (child)."""
  assert tl.file_layout(str(three_ps / "ours" / "ckpt-1"))["num_shards"] == 4


def test_fewer_ps_tasks_restore_more(tmp_path, three_ps):
  """Two ps tasks, two shards each, restore the three-ps checkpoints."""
  _run("ps_strategy", tmp_path, 2, "fixed", three_ps / "result.json")


def test_max_size_partitions_restore_both_ways(tmp_path, two_ps, plain_model):
  """Max-size partitioning over three ps: restores two-ps and plain saves."""
  result = _run("ps_strategy", tmp_path, 3, "max_size", two_ps / "result.json",
                plain_model / "result.json")
  assert result["shards"]["emb"] == 4


def test_several_local_devices(tmp_path):
  """Three logical CPUs of one task: one file, as in TensorFlow."""
  result = _run("local_devices", tmp_path)
  assert tl.file_layout(result["paths"]["ours"]["save"])["num_shards"] == 1


def test_parameter_servers_in_processes_of_their_own(tmp_path, two_ps):
  """Worker and ps tasks are processes started with TF_CONFIG."""
  cluster = {
      job: [f"localhost:{port}" for port in tl.free_ports(count)]
      for job, count in (("chief", 1), ("worker", 1), ("ps", 2))
  }

  def env(job, index):
    return tl.child_env(TF_CONFIG=json.dumps({
        "cluster": cluster,
        "task": {
            "type": job,
            "index": index
        }
    }))

  servers = [
      tl.start_python([tl.CLUSTER_PROGRAMS, "server", "-"],
                      env=env(job, index),
                      capture=False)
      for job in ("worker", "ps")
      for index in range(len(cluster[job]))
  ]
  try:
    result = tl.run_cluster_program("ps_strategy",
                                    str(tmp_path),
                                    2,
                                    "fixed",
                                    two_ps / "result.json",
                                    env=env("chief", 0))
  finally:
    for process in servers:
      tl.kill_group(process)
  _assert_same_layouts(result)
  assert all(process.returncode == -9 for process in servers)
  assert os.path.exists(result["paths"]["ours"]["save"] + ".index")
