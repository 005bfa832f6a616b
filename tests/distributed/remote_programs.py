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
import sys
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


def killed_task_saves(directory, impl, where, mib, start="save"):
  """Saves that the test kills a task during, driven by lines on stdin.

  A variable of `mib` MiB on `ps:0` and a small one on `worker:0`, saved
  by `impl`'s manager into `directory/impl`. First a save (`start` "save"),
  printing `{"saved": path}`, or what "recover" does ("recover"). Then, per
  line read:

  - "save": assigns the next values, prints "saving", saves, and prints
    `{"error": [type, message] or None, "seconds": ..., "latest": the
    state file's latest checkpoint, "leftovers": ...}`;
  - "recover": connects again (the test restarted the killed task), makes
    the variables anew, restores the latest checkpoint, checks its values
    (those of the last save that succeeded), saves, checks that save's
    values, and prints `{"restored": path, "saved": path, "leftovers":
    ...}`.
  """
  directory = os.path.join(directory, impl)
  state = _KilledTaskState(impl, where, mib, directory)
  if start == "recover":
    print(json.dumps(state.recover(connect=False)), flush=True)
  else:
    print(json.dumps({"saved": state.save()}), flush=True)
  for line in sys.stdin:
    command = line.strip()
    if command == "save":
      print(json.dumps(state.save_to_be_killed()), flush=True)
    elif command == "recover":
      print(json.dumps(state.recover()), flush=True)
    else:
      break
  return {"commands": "done"}


class _KilledTaskState:
  """The variables, manager and expected values of `killed_task_saves`."""

  def __init__(self, impl, where, mib, directory):
    self._lib = tl.IMPLS[impl]
    self._where = where
    self._mib = mib
    self._directory = directory
    self._number = 0
    self._saved_values = None
    self._connect()

  def _connect(self):
    _connect(self._where, {"ps": 1, "worker": 1})
    self._variables = _remote_variables(1, self._mib, job="ps")
    self._variables.update(small=_remote_variables(1, 1 /
                                                   1024, job="worker")["v0"])
    self._manager = self._lib.CheckpointManager(
        self._lib.Checkpoint(**self._variables), self._directory, 3)

  def save(self):
    """Assigns the next values and saves them; returns the path."""
    values = self._assign_next()
    path = self._manager.save()
    self._saved_values = values
    return path

  def _assign_next(self):
    """Assigns the next values; returns them once every task has them."""
    self._number += 1
    values = _round_values(self._variables, self._number)
    _assign(self._variables, values)
    for variable in self._variables.values():
      variable[:1].numpy()  # Read after the assign, on its task.
    return values

  def save_to_be_killed(self):
    """Saves new values, the test killing a task meanwhile; says how."""
    values = self._assign_next()
    print("saving", flush=True)
    started = time.time()
    error = None
    try:
      self._manager.save()
      self._saved_values = values
    except tf.errors.OpError as e:
      error = [type(e).__name__, e.message]
    return {
        "error": error,
        "seconds": time.time() - started,
        "latest": tf.train.latest_checkpoint(self._directory),
        "leftovers": tl.leftovers(self._directory)
    }

  def recover(self, connect=True):
    """Restores the latest checkpoint, then saves; says how it went.

    With `connect`, connects to the cluster again first (a task restarted).
    The values restored must be those of the last save that succeeded (in
    a new process, those the checkpoint holds).
    """
    if connect:
      self._connect()
    restored = self._manager.latest_checkpoint
    if self._saved_values is None:
      self._saved_values = _file_values(restored, self._variables)
    self._manager.checkpoint.restore(restored).assert_consumed()
    wrong = _wrong_values(_values(self._variables), self._saved_values)
    assert not wrong, f"{restored} restored {wrong}"
    saved = self.save()
    wrong = _wrong_values(_file_values(saved, self._variables),
                          self._saved_values)
    assert not wrong, f"{saved} holds {wrong}"
    return {
        "restored": restored,
        "saved": saved,
        "leftovers": tl.leftovers(self._directory)
    }


def _values(variables):
  return {name: variable.numpy() for name, variable in variables.items()}


_DAMAGED_RESTORES = 8


def remote_damaged_restore(directory, impl, where, mib, damaged="v1"):
  """Restores a checkpoint one of whose values is damaged, on remote tasks.

  The library `impl` writes one variable of `mib` MiB per task;
  `damaged`'s stored bytes are then flipped, new values assigned, and the
  library restores its checkpoint, `_DAMAGED_RESTORES` times: which
  task's wait an error surfaces in varies from one restore to the next.
  Each library runs in a client of its own: an error one leaves on a task
  must not surface in the other's ops. Prints each restore's error (type,
  message) and the names of the variables the failed restores assigned.
  """
  _connect(where, {"worker": 3})
  variables = _remote_variables(3, mib)
  lib = tl.IMPLS[impl]
  _assign(variables, _round_values(variables, 0))
  path = lib.Checkpoint(**variables).write(os.path.join(directory, impl))
  tl.damage(path, "flipped", f"{damaged}/.ATTRIBUTES/VARIABLE_VALUE")
  after = _round_values(variables, 1)
  _assign(variables, after)
  errors = []
  for _ in range(_DAMAGED_RESTORES):
    try:
      lib.Checkpoint(**variables).read(path)
      errors.append(None)
    except tf.errors.OpError as e:
      errors.append([type(e).__name__, e.message])
  return {
      "errors": errors,
      "assigned": sorted(_wrong_values(_values(variables), after))
  }


SCENARIOS["killed_task_saves"] = killed_task_saves
SCENARIOS["remote_damaged_restore"] = remote_damaged_restore


def stopped_task_saves(directory, impl, where, mib):
  """Saves that the test stops a task during, driven by lines on stdin.

  A variable of `mib` MiB on each of two ps tasks, saved by `impl` into
  `directory/impl`. Prints "ready"; then, per line read ("save"), prints
  "saving", writes the next checkpoint, and prints `{"error": [type,
  message] or None, "leftovers": ...}`.
  """
  _connect(where, {"ps": 2})
  variables = _remote_variables(2, mib, job="ps")
  checkpoint = tl.IMPLS[impl].Checkpoint(**variables)
  directory = os.path.join(directory, impl)
  print("ready", flush=True)
  for number, _ in enumerate(sys.stdin):
    print("saving", flush=True)
    error = None
    try:
      checkpoint.write(os.path.join(directory, f"ckpt-{number}"))
    except tf.errors.OpError as e:
      error = [type(e).__name__, e.message]
    print(json.dumps({
        "error": error,
        "leftovers": tl.leftovers(directory)
    }),
          flush=True)
  return {"commands": "done"}


SCENARIOS["stopped_task_saves"] = stopped_task_saves
