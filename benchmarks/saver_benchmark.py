"""Times the v1 name-based tf_objckpt.Saver against tf.compat.v1.train.Saver.

Graph mode. Workloads (as in the other benchmarks): (b) 4096 variables of
64x64 float32, (c) 20,000 scalar variables, all `tf.compat.v1.get_variable`
resource variables in one `tf.Graph` and `tf.compat.v1.Session`.

For each library: building the `Saver`, `save()` (without the meta graph)
and `restore()` into a fresh graph, each the median of `--repeats` runs,
the libraries taking turns. Then, in a session with two CPU devices and
half of the variables on each, a sharded save (one shard per device)
against an unsharded one, for each library.

Run: python benchmarks/saver_benchmark.py [--workloads=b,c] [--repeats=5]
Prints the median seconds and TensorFlow's time divided by ours (above 1
means we are faster), and sharded / unsharded save time ratios.
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
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed runs per measurement.")

_SAVERS = {"tensorflow": tf.compat.v1.train.Saver,
           "tf_objckpt": tf_objckpt.Saver}
_SHAPES = {"b": ([64, 64], 4096), "c": ([], 20000)}


class _Program:
  """A graph and a session holding one workload's variables.

  With `devices=2`, the session has two CPU devices and the variables
  alternate between them.
  """

  def __init__(self, workload, initial_value, devices=1):
    shape, count = _SHAPES[workload]
    self.graph = tf.Graph()
    initializer = tf.constant_initializer(initial_value)
    with self.graph.as_default():
      self.variables = []
      for i in range(count):
        with tf.device(f"/cpu:{i % devices}"):
          self.variables.append(tf.compat.v1.get_variable(
              f"v{i}", shape, initializer=initializer))
      initialize = tf.compat.v1.global_variables_initializer()
    config = tf.compat.v1.ConfigProto(device_count={"CPU": devices})
    self.session = tf.compat.v1.Session(graph=self.graph, config=config)
    self.session.run(initialize)

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
    last = self.session.run(self.variables[-1])
    assert np.all(last == value), f"expected {value}, got {last}"


def _seconds(fn):
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def _medians(runs, repeats):
  """Runs each of `{label: fn}` `repeats` times, taking turns; medians."""
  times = {label: [] for label in runs}
  for _ in range(repeats):
    for label, fn in runs.items():
      times[label].append(_seconds(fn))
  return {label: statistics.median(t) for label, t in times.items()}


def _bench(workload, directory, repeats):
  """{operation: {library: median seconds}} for build, save and restore."""
  sources = {library: _Program(workload, 1.) for library in _SAVERS}
  build = _medians({library: lambda p=program, l=library: p.saver(l)
                    for library, program in sources.items()}, repeats)
  savers = {library: program.saver(library)
            for library, program in sources.items()}
  paths = {library: os.path.join(directory, f"{workload}_{library}")
           for library in _SAVERS}

  results = {"build": build, "save": _medians(
      {library: lambda l=library: sources[l].save(savers[l], paths[l])
       for library in _SAVERS}, repeats)}
  for program in sources.values():
    program.session.close()

  targets = {library: _Program(workload, 0.) for library in _SAVERS}
  savers = {library: program.saver(library)
            for library, program in targets.items()}
  results["restore"] = _medians(
      {library: lambda l=library: targets[l].restore(savers[l], paths[l])
       for library in _SAVERS}, repeats)
  for program in targets.values():
    program.check(1.)
    program.session.close()
  return results


def _bench_sharded(workload, directory, repeats):
  """{library: {"sharded"/"unsharded": median save seconds}}, two devices."""
  program = _Program(workload, 1., devices=2)
  runs = {}
  for library in _SAVERS:
    for sharded in (True, False):
      label = (library, "sharded" if sharded else "unsharded")
      saver = program.saver(library, sharded=sharded)
      path = os.path.join(directory, "_".join((workload,) + label))
      runs[label] = lambda s=saver, p=path: program.save(s, p)
  medians = _medians(runs, repeats)
  program.session.close()
  results = {library: {} for library in _SAVERS}
  for (library, kind), seconds in medians.items():
    results[library][kind] = seconds
  return results


def _report(workload, results, sharded):
  shape, count = _SHAPES[workload]
  print(f"workload {workload}: {count} variables of shape {shape}")
  for operation, seconds in results.items():
    theirs, ours = seconds["tensorflow"], seconds["tf_objckpt"]
    print(f"  {operation:<8} tensorflow {theirs:8.3f}s  tf_objckpt "
          f"{ours:8.3f}s  speedup x{theirs / ours:6.2f}")
  for library, seconds in sharded.items():
    print(f"  two CPUs, {library:<10}: sharded save {seconds['sharded']:7.3f}s"
          f"  unsharded {seconds['unsharded']:7.3f}s  sharded / unsharded "
          f"x{seconds['sharded'] / seconds['unsharded']:5.2f}")


def main(argv):
  del argv
  with tempfile.TemporaryDirectory() as directory:
    for workload in _WORKLOADS.value:
      results = _bench(workload, directory, _REPEATS.value)
      sharded = _bench_sharded(workload, directory, _REPEATS.value)
      _report(workload, results, sharded)


if __name__ == "__main__":
  app.run(main)
