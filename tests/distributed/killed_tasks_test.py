"""Tasks killed with SIGKILL in the middle of a save.

A client (`remote_programs.killed_task_saves`) holds a 64 MiB variable on
a ps task and a small one on a worker task, each task a process of its
own, and saves with a manager. The test kills the ps task at several
moments of a save: as it starts, once its shard is being written, and a
moment later. Each time, our save must raise an error naming the task
within seconds, the previous checkpoint must still be the latest, and no
file of the failed save may be left. Once the task is back (the client
connects again), the latest checkpoint must restore and the next save
succeed, leaving no temporary file. TensorFlow's save, killed the same
way, raises too and keeps the previous checkpoint, and leaves its shards'
temporary folder.

The same with `MultiWorkerMirroredStrategy` (`strategy_programs`): the
chief is killed while it saves its 64 MiB variable, and the job restarted
whole. Its previous checkpoint stays the latest and restores, and once
both workers are started again their next saves succeed, and ours leave
nothing behind: the next save removes what the killed one was writing
(TensorFlow's leave its temporary folder).

Covers: tf_objckpt.engine.remote_tasks, tf_objckpt.engine.commit,
tf_objckpt.engine.writes, tf_objckpt.api.checkpoint_manager.
"""

import json
import os
import re
import signal
import subprocess
import time

import pytest
import tensorflow as tf

import testlib as tl

pytestmark = pytest.mark.distributed

TIME_LIMIT_SECONDS = 300
_MIB = 64
# Seconds a save may take to fail once a task it writes on is killed.
_FAILS_WITHIN_SECONDS = 30
_KILLED_TASK = "/job:ps/replica:0/task:0"


def _being_written(directory, skip=None):
  """Whether a file below `directory` has SaveV2's temporary name.

  Folders whose names start with `skip` are left out.
  """
  for _, folders, names in os.walk(directory):
    folders[:] = [
        folder for folder in folders if not (skip and folder.startswith(skip))
    ]
    if any(".tempstate" in name for name in names):
      return True
  return False


def _stop_at_the_moment(moment, pid, directory, skip=None):
  """Stops process `pid` (SIGSTOP) at `moment` of the save that started.

  For "shard_being_written" the process runs in slices of a few
  milliseconds, stopped between them, until a file of `directory` has
  SaveV2's temporary name (in folders not starting with `skip`): then it
  is stopped while the file is written.
  """
  if moment == "a_moment_later":
    time.sleep(0.05)
  elif moment == "shard_being_written":
    deadline = time.time() + 60
    while True:
      os.kill(pid, signal.SIGSTOP)
      if _being_written(directory, skip):
        return
      assert time.time() < deadline, "no shard was written"
      os.kill(pid, signal.SIGCONT)
      time.sleep(0.003)
  os.kill(pid, signal.SIGSTOP)


class _Client:
  """The client program, told what to do line by line."""

  def __init__(self, tmp_path, impl, servers, start="save"):
    self._stderr = open(tmp_path / f"{impl}_{start}.log", "w")  # pylint: disable=consider-using-with
    self.process = tl.start_cluster_program("killed_task_saves",
                                            str(tmp_path),
                                            impl,
                                            json.dumps(servers.cluster),
                                            _MIB,
                                            start,
                                            stdin=subprocess.PIPE,
                                            stderr=self._stderr)
    self.first = self.read()

  def tell(self, command):
    self.process.stdin.write(command + "\n")
    self.process.stdin.flush()

  def read(self, timeout=120):
    line = tl.read_line(self.process, timeout)
    return line if line == "saving" else json.loads(line)

  def close(self):
    tl.kill_group(self.process)
    self._stderr.close()


def _kill_during_saves(tmp_path, impl, moments, new_client=False):
  """Kills the ps task at each of `moments` of a save; returns what happened.

  After each, once the task is back, the client recovers: the same client
  process connecting again, or with `new_client` a new one (TensorFlow's
  restore, a function, fails in a client that connected again: the
  tasks still call its former address).

  Returns:
    `(first save's path, [(moment, failed save's result, recovery's)])`.
  """
  directory = str(tmp_path / impl)
  outcomes = []
  with tl.ServerProcesses({"ps": 1, "worker": 1}) as servers:
    servers.start().wait_until_serving()
    client = _Client(tmp_path, impl, servers)
    first_saved = client.first["saved"]
    try:
      for moment in moments:
        client.tell("save")
        assert client.read() == "saving"
        _stop_at_the_moment(moment, servers.pid("ps", 0), directory)
        servers.kill("ps", 0)
        failed = client.read()
        servers.start("ps", 0).wait_until_serving()
        if new_client:
          client.close()
          client = _Client(tmp_path, impl, servers, start="recover")
          recovered = client.first
        else:
          client.tell("recover")
          recovered = client.read()
        outcomes.append((moment, failed, recovered))
    finally:
      client.close()
  return first_saved, outcomes


_MOMENTS = ("as_it_starts", "shard_being_written", "a_moment_later")


def test_a_ps_task_killed_during_our_save(tmp_path):
  latest, outcomes = _kill_during_saves(tmp_path, "ours", _MOMENTS)
  for moment, failed, recovered in outcomes:
    print(moment, json.dumps(failed))
    assert failed["error"] is not None, (moment, failed)
    error_type, message = failed["error"]
    assert error_type in ("UnavailableError", "AbortedError", "InternalError",
                          "NotFoundError", "CancelledError"), (moment, failed)
    assert _KILLED_TASK in message, (moment, message)
    assert re.match(r"Cannot save checkpoint '.*ckpt-\d+'", message), message
    assert failed["seconds"] < _FAILS_WITHIN_SECONDS, (moment, failed)
    assert failed["latest"] == latest, (moment, failed)
    assert failed["leftovers"] == {}, (moment, failed)
    assert recovered["restored"] == latest, (moment, recovered)
    assert recovered["leftovers"] == {}, (moment, recovered)
    latest = recovered["saved"]
  assert tf.train.latest_checkpoint(str(tmp_path / "ours")) == latest
  assert not tl.leftovers(tmp_path / "ours")
  assert sorted(os.listdir(tmp_path)) == ["ours", "ours_save.log"]


def test_a_ps_task_killed_during_tensorflows_save(tmp_path):
  """TensorFlow's save fails and keeps the previous checkpoint too."""
  latest, outcomes = _kill_during_saves(tmp_path,
                                        "tf", ["shard_being_written"],
                                        new_client=True)
  (_, failed, recovered), = outcomes
  print("TensorFlow's killed save:", json.dumps(failed))
  print("TensorFlow's recovery:", json.dumps(recovered))
  assert failed["error"] is not None, failed
  assert failed["latest"] == latest, failed
  # Its shards' folder stays, where ours is removed.
  assert failed["leftovers"] == {"ckpt-2": ["ckpt-2_temp"]}, failed
  assert recovered["restored"] == latest, recovered


def _mwms_workers(cluster, tmp_path, impl, start):
  """Starts both workers of `cluster` on `mwms_killed_save`."""
  return [
      tl.start_cluster_program(
          "mwms_killed_save",
          str(tmp_path),
          impl,
          start,
          _MIB,
          env=cluster.env("worker", index),
          stderr=open(  # pylint: disable=consider-using-with
              tmp_path / f"{impl}_{start}_{index}.log", "w"))
      for index in range(2)
  ]


def _kill_the_chief_while_it_saves(tmp_path, impl):
  """Kills the chief while it writes; then both workers start again.

  Returns:
    `(the first save's path, the latest checkpoint and leftovers after the
    kill, what the chief printed once started again)`.
  """
  directory = tmp_path / impl
  workers = _mwms_workers(tl.ServerProcesses({}, clients={"worker": 2}),
                          tmp_path, impl, "save")
  try:
    first = [json.loads(tl.read_line(worker, 120)) for worker in workers]
    assert tl.read_line(workers[0], 120) == "saving"
    _stop_at_the_moment("shard_being_written",
                        workers[0].pid,
                        directory,
                        skip="workertemp_")
  finally:
    for worker in workers:  # The chief first; the job is restarted whole.
      tl.kill_group(worker)
  after_kill = {
      "latest": tf.train.latest_checkpoint(str(directory)),
      "left": tl.leftovers(directory)
  }
  workers = _mwms_workers(tl.ServerProcesses({}, clients={"worker": 2}),
                          tmp_path, impl, "recover")
  try:
    chief, _ = [
        tl.finish_cluster_program(worker, 120, f"worker {index}")
        for index, worker in enumerate(workers)
    ]
  finally:
    for worker in workers:
      tl.kill_group(worker)
  return first[0]["saved"], after_kill, chief


def test_the_chief_of_multi_worker_mirrored_killed_while_saving(tmp_path):
  results = {
      impl: _kill_the_chief_while_it_saves(tmp_path, impl) for impl in tl.IMPLS
  }
  print(json.dumps(results))
  for impl, (first, after_kill, chief) in results.items():
    assert after_kill["latest"] == first, impl
    assert chief["restored"] == first, impl
    assert chief["saved"].endswith("ckpt-2"), impl
  # What the killed processes were writing stays until the next save.
  _, after_kill, chief = results["ours"]
  assert set(after_kill["left"]) <= {"ckpt-2", "workertemp_1"}, after_kill
  assert chief["left"] == {}, chief
  assert chief["files"] == [
      "checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index",
      "ckpt-2.data-00000-of-00001", "ckpt-2.index"
  ]
