"""Distributed runs: free localhost ports and cluster programs.

`run_cluster_program` runs one scenario of tests/distributed/
cluster_programs.py in a child process group, killed on timeout.
"""

import json
import os
import socket

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


def run_cluster_program(scenario, directory, *args, timeout=90, env=None):
  """Runs one scenario of `cluster_programs.py`; returns what it printed.

  The program runs in its own process group (servers and workers it
  starts included), killed on timeout or when this process dies.

  Returns:
    The JSON value the program printed last.

  Raises:
    AssertionError: If it fails or times out, with its output.
  """
  process = processes.start_python(
      [CLUSTER_PROGRAMS, scenario, directory, *args], env=env)
  code, stdout, stderr = processes.finish(process, timeout)
  assert code == 0, (
      f"{scenario} {args} {'timed out' if code is None else f'exited {code}'}"
      f":\n{stdout[-3000:]}\n{stderr[-6000:]}")
  return json.loads(stdout.strip().splitlines()[-1])
