"""Times asynchronous saves against synchronous ones, and against TensorFlow.

Four float32 variables of 64 MiB each, saved by eager `Checkpoint.save()`
four ways: TensorFlow's and ours, synchronously and with
`CheckpointOptions(experimental_enable_async_checkpoint=True)`. For each
save it times how long `save()` blocks, and `save()` plus `sync()` (the
whole write). Between saves every variable is assigned, as a training step
would, so that each save has new values to write. The savers take turns;
each figure is the median of `--repeats` saves after one untimed one. Then
the first asynchronous save of a process, each in a fresh one
(`--first_repeats` of each library).

Targets: our asynchronous `save()` blocks for at most 15% of our own
synchronous save and no longer than TensorFlow's asynchronous `save()`;
our `save()` plus `sync()` is no slower than TensorFlow's.

Run: python benchmarks/async_benchmark.py [--repeats=5] [--directory=...]
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags
import tensorflow as tf

import tf_objckpt

_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed saves per saver.")
_DIRECTORY = flags.DEFINE_string("directory", None,
                                 "Where to save (default: a temporary one).")
_VARIABLES = flags.DEFINE_integer("variables", 4, "How many variables.")
_MIB = flags.DEFINE_integer("mib", 64, "MiB per variable.")
_FIRST_REPEATS = flags.DEFINE_integer(
    "first_repeats", 3, "Fresh processes timing the first async save().")

# Runs in a fresh process: times the first asynchronous save() there.
# argv = library, variables, elements each, prefix.
_FIRST_SAVE = r"""
import json, sys, time
import tensorflow as tf
import tf_objckpt

library, count, elements, prefix = sys.argv[1:]
variables = [tf.Variable(tf.random.uniform([int(elements)]))
             for _ in range(int(count))]
lib = tf.train if library == "tensorflow" else tf_objckpt
checkpoint = lib.Checkpoint(v=variables)
options = tf.train.CheckpointOptions(experimental_enable_async_checkpoint=True)
start = time.perf_counter()
checkpoint.save(prefix, options=options)
blocked = time.perf_counter() - start
checkpoint.sync()
print(json.dumps([blocked, time.perf_counter() - start]))
"""

_ASYNC = tf.train.CheckpointOptions(experimental_enable_async_checkpoint=True)


def _savers(variables):
  """{name: (checkpoint, options)}: the four ways of saving."""
  return {
      "tensorflow sync": (tf.train.Checkpoint(v=variables), None),
      "tensorflow async": (tf.train.Checkpoint(v=variables), _ASYNC),
      "tf_objckpt sync": (tf_objckpt.Checkpoint(v=variables), None),
      "tf_objckpt async": (tf_objckpt.Checkpoint(v=variables), _ASYNC),
  }


def _timed_save(checkpoint, prefix, options, variables):
  """Seconds `save()` blocked, and seconds until `sync()` returned."""
  start = time.perf_counter()
  checkpoint.save(prefix, options=options)
  blocked = time.perf_counter() - start
  for variable in variables:  # A training step's worth of assignments.
    variable.assign_add(tf.ones_like(variable))
  assigned = time.perf_counter()
  checkpoint.sync()
  synced = time.perf_counter()
  return blocked, blocked + (synced - assigned)


def _first_saves(elements, directory):
  """{library: (median blocked, median total)} of first saves of a process."""
  medians = {}
  for library in ("tensorflow", "tf_objckpt"):
    runs = []
    for repeat in range(_FIRST_REPEATS.value):
      result = subprocess.run([
          sys.executable, "-c", _FIRST_SAVE, library,
          str(_VARIABLES.value),
          str(elements), f"{directory}/first_{library}_{repeat}/ckpt"
      ],
                              capture_output=True,
                              text=True,
                              check=True,
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
      runs.append(json.loads(result.stdout.strip().splitlines()[-1]))
    medians[library] = tuple(
        statistics.median(run[i] for run in runs) for i in (0, 1))
  return medians


def main(_):
  elements = _MIB.value << 18  # float32s.
  variables = [
      tf.Variable(tf.random.uniform([elements]))
      for _ in range(_VARIABLES.value)
  ]
  savers = _savers(variables)
  blocked = {name: [] for name in savers}
  total = {name: [] for name in savers}
  with tempfile.TemporaryDirectory(dir=_DIRECTORY.value) as directory:
    for repeat in range(_REPEATS.value + 1):
      for index, (name, (checkpoint, options)) in enumerate(savers.items()):
        times = _timed_save(checkpoint, f"{directory}/{index}/ckpt", options,
                            variables)
        if repeat:
          blocked[name].append(times[0])
          total[name].append(times[1])
    first = _first_saves(elements, directory) if _FIRST_REPEATS.value else {}
  print(f"{_VARIABLES.value} x {_MIB.value} MiB, medians of "
        f"{_REPEATS.value} saves (seconds):")
  print(f"{'saver':<18} {'save() blocks':>14} {'save()+sync()':>14}")
  medians = {}
  for name in savers:
    medians[name] = (statistics.median(blocked[name]),
                     statistics.median(total[name]))
    print(f"{name:<18} {medians[name][0]:>14.4f} {medians[name][1]:>14.4f}")
  ours_async, ours_sync = medians["tf_objckpt async"], medians[
      "tf_objckpt sync"]
  tf_async = medians["tensorflow async"]
  print(f"our async save() blocks / our sync save(): "
        f"{ours_async[0] / ours_sync[0]:.1%} (target <= 15%)")
  print(f"our async save() blocks / TensorFlow's: "
        f"{ours_async[0] / tf_async[0]:.2f} (target <= 1)")
  print(f"our async save()+sync() / TensorFlow's: "
        f"{ours_async[1] / tf_async[1]:.2f} (target <= 1)")
  if first:
    print(f"first async save() of a fresh process, medians of "
          f"{_FIRST_REPEATS.value}: " + ", ".join(
              f"{library} blocks {times[0]:.4f} s, with sync() {times[1]:.4f}"
              f" s" for library, times in first.items()))


if __name__ == "__main__":
  app.run(main)
