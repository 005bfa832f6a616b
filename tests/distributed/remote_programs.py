"""Cluster programs of eager variables on remote tasks (`connect_to_cluster`).

Scenarios of `cluster_programs.py` (which runs them): this process is the
client of a cluster whose tasks are servers, in this process or in
processes of their own (`tl.ServerProcesses`, given as their cluster's
JSON). Eager ops on a remote task that return nothing (`SaveV2`, an
assign) run asynchronously there, so these programs check every value a
save wrote and every value a restore assigned.
"""

import json
import os
import time

import numpy as np
import tensorflow as tf

import testlib as tl

_FLOAT_BYTES = 4
_ASYNC = tf.train.CheckpointOptions(experimental_enable_async_checkpoint=True)


def _connect(where, jobs):
  """Connects to the cluster: `where` is "in_process" or its JSON.

  In process, a server for every task of `jobs` (`{job: tasks}`) starts
  here first.
  """
  if where == "in_process":
    cluster = {job: tl.localhost_addresses(count) for job, count in jobs.items()}
    spec = tl.start_servers_in_process(cluster, list(jobs))
  else:
    spec = tf.train.ClusterSpec(json.loads(where))
  tf.config.experimental_connect_to_cluster(spec)


def _remote_variables(tasks, mib, job="worker"):
  """One float variable of `mib` MiB on each task of `job`, zeros."""
  size = int(float(mib) * 2**20) // _FLOAT_BYTES
  variables = {}
  for index in range(tasks):
    with tf.device(f"/job:{job}/task:{index}/cpu:0"):
      variables[f"v{index}"] = tf.Variable(tf.zeros([size]))
  return variables


def _round_values(variables, number):
  """Each variable's value in round `number`: distinct everywhere."""
  return {
      name: float(number * len(variables) + index)
      for index, name in enumerate(variables)
  }


def _assign(variables, values):
  for name, variable in variables.items():
    variable.assign(tf.fill(variable.shape, values[name]))


def _wrong_values(actual, expected):
  """`{name: first value}` of the arrays of `actual` not all `expected`."""
  return {
      name: float(np.asarray(value).ravel()[0])
      for name, value in actual.items()
      if not np.all(np.asarray(value) == expected[name])
  }


def _file_values(path, names):
  reader = tf.train.load_checkpoint(path)
  return {
      name: reader.get_tensor(f"{name}/.ATTRIBUTES/VARIABLE_VALUE")
      for name in names
  }


def _read_in_a_function(variables):
  """The variables' values, read by a function as a training step would.

  The function's reads on each task are sent apart from eager ops, so
  they see an assign only once it has run there.
  """
  return {
      name: value.numpy() for name, value in _function_read(variables).items()
  }


@tf.function
def _function_read(variables):
  return {name: variable.read_value() for name, variable in variables.items()}


class _Failures:
  """Failed rounds by kind, with the first few messages of each kind."""

  KINDS = ("write", "file_values", "restore", "restored_values", "assign")

  def __init__(self):
    self.counts = dict.fromkeys(self.KINDS, 0)
    self.messages = {kind: [] for kind in self.KINDS}

  def add(self, kind, number, what):
    self.counts[kind] += 1
    if len(self.messages[kind]) < 3:
      self.messages[kind].append(f"round {number}: {what}"[:600])


def remote_rounds(directory, impl, rounds, mib, where, kind="write", tasks=3):
  """Rounds of assign, write, check the file, restore, check the variables.

  One variable of `mib` MiB on each of `tasks` tasks, every round written
  to the same prefix with `impl`'s `Checkpoint.write` (`kind` "write"), or
  an asynchronous one followed by the next round's assigns, then `sync()`
  ("async"). A round fails if
  anything raises, if the file holds another value than the round's (an
  assign the save did not wait for, or a shard of an earlier save), or if
  the restore assigns another value.

  Prints `{"failures": {kind: rounds}, "messages": ..., "path": prefix,
  "leftovers": files no checkpoint owns, "seconds": ...}`.
  """
  _connect(where, {"worker": int(tasks)})
  variables = _remote_variables(int(tasks), mib)
  checkpoint = tl.IMPLS[impl].Checkpoint(**variables)
  directory = os.path.join(directory, impl)
  prefix = os.path.join(directory, "ckpt")
  failures = _Failures()
  started = time.time()
  for number in range(int(rounds)):
    _one_round(checkpoint, variables, prefix, number, failures, kind)
  return {
      "failures": failures.counts,
      "messages": failures.messages,
      "path": prefix,
      "leftovers": tl.leftovers(directory),
      "seconds": time.time() - started
  }


def _one_round(checkpoint, variables, prefix, number, failures, kind):
  """One round of `remote_rounds`; its failures are added to `failures`."""
  expected = _round_values(variables, number)
  try:
    _assign(variables, expected)
  except tf.errors.OpError as e:
    failures.add("assign", number, f"{type(e).__name__}: {e}")
    return
  try:
    if kind == "async":
      path = checkpoint.write(prefix, options=_ASYNC)
      # Assigned while the write runs: the snapshot keeps the values.
      _assign(variables, _round_values(variables, number + 1))
      checkpoint.sync()
    else:
      path = checkpoint.write(prefix)
  except tf.errors.OpError as e:
    failures.add("write", number, f"{type(e).__name__}: {e}")
    return
  wrong = _wrong_values(_file_values(path, variables), expected)
  if wrong:
    failures.add("file_values", number, f"the file holds {wrong}")
  try:
    _assign(variables, dict.fromkeys(variables, -1.))
    checkpoint.read(path).assert_consumed()
    restored = _read_in_a_function(variables)
  except tf.errors.OpError as e:
    failures.add("restore", number, f"{type(e).__name__}: {e}")
    return
  wrong = _wrong_values(restored, expected)
  if wrong:
    failures.add("restored_values", number, f"restored {wrong}")


SCENARIOS = {"remote_rounds": remote_rounds}
