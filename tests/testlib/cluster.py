"""Distributed runs: free localhost ports, server processes, cluster programs.

`run_cluster_program` runs one scenario of tests/distributed/
cluster_programs.py in a child process group, killed on timeout.
`ServerProcesses` runs the tasks of a cluster, each a `tf.distribute.Server`
in a process of its own, which a test may kill and start again.
"""

import json
import os
import socket
import time

import tensorflow as tf

from testlib import processes

# The program tests/distributed/ runs in child processes.
CLUSTER_PROGRAMS = os.path.join(processes.REPO_ROOT, "tests", "distributed",
                                "cluster_programs.py")


def free_ports(count):
  """`count` distinct localhost ports that were free a moment ago."""
  sockets = [socket.socket() for _ in range(count)]
  try:
    for sock in sockets:
      sock.bind(("localhost", 0))
    return [sock.getsockname()[1] for sock in sockets]
  finally:
    for sock in sockets:
      sock.close()


def localhost_addresses(count):
  """`count` `localhost:<port>` addresses of free ports."""
  return [f"localhost:{port}" for port in free_ports(count)]


def start_servers_in_process(cluster, jobs):
  """Starts a server in this process for every task of `jobs` of `cluster`.

  Args:
    cluster: `{job: [address, ...]}`.
    jobs: The jobs whose tasks get a server here.

  Returns:
    The cluster's `tf.train.ClusterSpec`.
  """
  spec = tf.train.ClusterSpec(cluster)
  for job in jobs:
    for index in range(len(cluster[job])):
      tf.distribute.Server(spec,
                           job_name=job,
                           task_index=index,
                           protocol="grpc",
                           start=True)
  return spec


def run_cluster_program(scenario, directory, *args, timeout=90, env=None):
  """Runs one scenario of `cluster_programs.py`; returns what it printed.

  The program runs in its own process group (servers and workers it
  starts included), killed on timeout or when this process dies.

  Returns:
    The JSON value the program printed last.

  Raises:
    AssertionError: If it fails or times out, with its output.
  """
  process = start_cluster_program(scenario, directory, *args, env=env)
  return finish_cluster_program(process, timeout, f"{scenario} {args}")


def start_cluster_program(scenario, directory, *args, env=None, **popen):
  """Starts one scenario of `cluster_programs.py`; returns its `Popen`.

  Finish it with `finish_cluster_program`, or kill it with `kill_group`.
  `popen` are `start_python`'s other arguments (`stdin`, `stderr`).
  """
  return processes.start_python([CLUSTER_PROGRAMS, scenario, directory, *args],
                                env=env,
                                **popen)


def finish_cluster_program(process, timeout, what):
  """Waits for a cluster program; returns the JSON value it printed last.

  Raises:
    AssertionError: If it fails or times out, with its output.
  """
  code, stdout, stderr = processes.finish(process, timeout)
  stderr = stderr or "(its standard error went to a file)"
  assert code == 0, (
      f"{what} {'timed out' if code is None else f'exited {code}'}"
      f":\n{stdout[-3000:]}\n{stderr[-6000:]}")
  return json.loads(stdout.strip().splitlines()[-1])


class ServerProcesses:
  """The tasks of a localhost cluster, each a server in a process of its own.

  Every task of `jobs` gets a free port; `clients` are tasks of the cluster
  that run programs rather than servers (a `chief` coordinator). Use as a
  context manager: on exit every process still running is killed, with its
  process group, by pid.
  """

  def __init__(self, jobs, clients=None):
    """`jobs` and `clients`: `{job name: number of tasks}`."""
    clients = clients or {}
    self.server_jobs = dict(jobs)
    counts = {**clients, **jobs}
    ports = iter(free_ports(sum(counts.values())))
    self.cluster = {
        job: [f"localhost:{next(ports)}" for _ in range(count)]
        for job, count in counts.items()
    }
    self._processes = {}

  def env(self, job, index, **extra):
    """The environment of task `job:index`: TF_CONFIG names it."""
    return processes.child_env(TF_CONFIG=json.dumps({
        "cluster": self.cluster,
        "task": {
            "type": job,
            "index": index
        }
    }),
                               **extra)

  def tasks(self):
    """`(job, index)` of every server task."""
    return [(job, index)
            for job, count in self.server_jobs.items()
            for index in range(count)]

  def start(self, job=None, index=None, working_directory="-"):
    """Starts the server of one task (every task's, if none is given).

    It runs in `working_directory` if given, where relative paths of the
    ops it runs lead (else in this process's).
    """
    for task in [(job, index)] if job is not None else self.tasks():
      assert self._processes.get(task) is None, f"{task} is running"
      self._processes[task] = processes.start_python(
          [CLUSTER_PROGRAMS, "server", working_directory],
          env=self.env(*task),
          capture=False)
    return self

  def wait_until_serving(self, timeout=60):
    """Waits until every running server accepts connections on its port."""
    deadline = time.time() + timeout
    for (job, index), process in self._processes.items():
      port = int(self.cluster[job][index].rsplit(":", 1)[1])
      while True:
        assert process.poll() is None, f"server {job}:{index} exited"
        try:
          socket.create_connection(("localhost", port), timeout=1).close()
          break
        except OSError:
          assert time.time() < deadline, f"{job}:{index} is not serving"
          time.sleep(0.05)
    return self

  def pid(self, job, index):
    return self._processes[(job, index)].pid

  def kill(self, job=None, index=None):
    """Kills one task's server (every one, if none is given), by pid."""
    for task in [(job, index)] if job is not None else list(self._processes):
      process = self._processes.pop(task, None)
      if process is not None:
        processes.kill_group(process)

  def __enter__(self):
    return self

  def __exit__(self, *unused_exc_info):
    self.kill()
