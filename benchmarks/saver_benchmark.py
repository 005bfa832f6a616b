"""Times the v1 name-based tf_objckpt.Saver against tf.compat.v1.train.Saver.

Graph mode. Workloads (as in the other benchmarks): (b) 4096 variables of
64x64 float32, (c) 20,000 scalar variables, all `tf.compat.v1.get_variable`
resource variables in one `tf.Graph`, alternating between /cpu:0 and
/cpu:1 of a `tf.compat.v1.Session` with two CPU devices.

For each library: building the `Saver` (once in the saving graph, once in
the restoring one), `save()` without the meta graph, unsharded and sharded
(one shard per device), and `restore()` into a fresh graph. Saves and
restores are the median of `--repeats` runs after one untimed run (the
first run of a new op in a session pays for preparing the graph); the
savers take turns.

Run: python benchmarks/saver_benchmark.py [--workloads=b,c] [--repeats=15]
Prints the seconds, TensorFlow's time divided by ours (above 1 means we are
faster), and sharded / unsharded save time (below 1 means sharding pays).
"""

import os
import statistics
import tempfile
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

import tf_objckpt

_WORKLOADS = flags.DEFINE_list("workloads", ["b", "c"], "Which workloads.")
_REPEATS = flags.DEFINE_integer("repeats", 15, "Timed runs per measurement.")

_SAVERS = {
    "tensorflow": tf.compat.v1.train.Saver,
    "tf_objckpt": tf_objckpt.Saver
}
_SHAPES = {"b": ([64, 64], 4096), "c": ([], 20000)}


class _Program:
  """A graph and a two-CPU session holding one workload's variables."""

  def __init__(self, workload, initial_value):
    shape, count = _SHAPES[workload]
    self.graph = tf.Graph()
    initializer = tf.constant_initializer(initial_value)
    with self.graph.as_default():
      self.variables = []
      for i in range(count):
        with tf.device(f"/cpu:{i % 2}"):
          self.variables.append(
              tf.compat.v1.get_variable(f"v{i}", shape,
                                        initializer=initializer))
      self._initialize = tf.compat.v1.global_variables_initializer()
    config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
    self.session = tf.compat.v1.Session(graph=self.graph, config=config)
    self.initialize()

  def initialize(self):
    self.session.run(self._initialize)

  def saver(self, library, **kwargs):
    with self.graph.as_default():
      return _SAVERS[library](self.variables, **kwargs)

  def save(self, saver, path):
    with self.graph.as_default():
      saver.save(self.session, path, write_meta_graph=False)

  def restore(self, saver, path):
    with self.graph.as_default():
      saver.restore(self.session, path)

  def check(self, value):
    first, last = self.session.run([self.variables[0], self.variables[-1]])
    assert np.all(first == value) and np.all(last == value), (
        f"expected {value}, got {first} and {last}")


def _timed(fn):
  """(seconds, result) of `fn()`."""
  start = time.perf_counter()
  result = fn()
  return time.perf_counter() - start, result


def _medians(runs, repeats):
  """Medians of `{label: fn}` over `repeats` runs after an untimed one.

  The functions take turns, in alternating order, so slow phases of the
  machine and the order of runs hit all alike.
  """
  for fn in runs.values():
    fn()
  times = {label: [] for label in runs}
  order = list(runs)
  for _ in range(repeats):
    for label in order:
      times[label].append(_timed(runs[label])[0])
    order.reverse()
  return {label: statistics.median(t) for label, t in times.items()}


def _bench(workload, directory, repeats):
  """{measurement: {library: seconds}}."""
  source = _Program(workload, 1.)
  build = {library: [] for library in _SAVERS}
  savers = {}
  for library in _SAVERS:
    for kind in ("unsharded", "sharded"):
      seconds, savers[library, kind] = _timed(
          lambda lib=library, k=kind: source.saver(lib, sharded=k == "sharded"))
      if kind == "unsharded":
        build[library].append(seconds)
  paths = {
      key: os.path.join(directory, "_".join((workload,) + key)) for key in savers
  }
  saves = _medians(
      {key: lambda k=key: source.save(savers[k], paths[k]) for key in savers},
      repeats)
  source.session.close()

  target = _Program(workload, 0.)
  restorers = {}
  for library in reversed(_SAVERS):  # The graph grows: the other order.
    seconds, restorers[library] = _timed(lambda lib=library: target.saver(lib))
    build[library].append(seconds)
    target.initialize()
    target.restore(restorers[library], paths[library, "unsharded"])
    target.check(1.)
  restores = _medians(
      {
          library:
              lambda lib=library: target.restore(restorers[lib], paths[
                  lib, "unsharded"]) for library in _SAVERS
      }, repeats)
  target.session.close()

  results = {"build": {lib: statistics.median(t) for lib, t in build.items()}}
  for kind in ("unsharded", "sharded"):
    results[f"save, {kind}"] = {lib: saves[lib, kind] for lib in _SAVERS}
  results["restore"] = restores
  return results


def _report(workload, results):
  shape, count = _SHAPES[workload]
  print(f"workload {workload}: {count} variables of shape {shape} on two "
        "CPUs")
  for measurement, seconds in results.items():
    theirs, ours = seconds["tensorflow"], seconds["tf_objckpt"]
    print(f"  {measurement:<16} tensorflow {theirs:8.3f}s  tf_objckpt "
          f"{ours:8.3f}s  speedup x{theirs / ours:5.2f}")
  for library in _SAVERS:
    ratio = (results["save, sharded"][library] /
             results["save, unsharded"][library])
    print(f"  sharded / unsharded save, {library}: x{ratio:5.2f}")


def main(argv):
  del argv
  with tempfile.TemporaryDirectory() as directory:
    for workload in _WORKLOADS.value:
      _report(workload, _bench(workload, directory, _REPEATS.value))


if __name__ == "__main__":
  app.run(main)
