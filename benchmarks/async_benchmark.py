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

Last, two saves at once (`--two_saves`): two checkpoint objects of the
same size (a model and its moving averages, say), each saved
asynchronously into a directory of its own, then both synced; against one
of them saved alone. Saves into different directories do not wait for
each other (`save_transaction.one_save_at_a_time` locks per directory);
"cores busy", the process's CPU seconds per second, shows whether they
ran at once: two saves can only take about the time of one where a core
is free for each.

Targets: our asynchronous `save()` blocks for at most 15% of our own
synchronous save and no longer than TensorFlow's asynchronous `save()`;
our `save()` plus `sync()` is no slower than TensorFlow's; two saves at
once finish within 1.3x of one.

Run: python benchmarks/async_benchmark.py [--repeats=5] [--directory=...]
     [--notwo_saves]
"""

import json
import os
import shutil
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
_TWO_SAVES = flags.DEFINE_bool(
    "two_saves", True, "Also time two async saves into two directories.")

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


def _one_or_two_saves(library, variables, other, directory):
  """Seconds from the first `save()` to the last `sync()`: one, then two.

  Two: `variables` and `other`, each a checkpoint object of its own, saved
  asynchronously into directories of their own. Also the process's CPU
  seconds per second in that time: above 1 when the saves ran at once.
  """
  lib = tf.train if library == "tensorflow" else tf_objckpt
  checkpoints = [lib.Checkpoint(v=variables), lib.Checkpoint(v=other)]
  times = {"one": [], "two": []}
  cores_busy = {"one": [], "two": []}
  for repeat in range(_REPEATS.value + 1):
    for case, saving in (("one", checkpoints[:1]), ("two", checkpoints)):
      start, cpu_start = time.perf_counter(), time.process_time()
      for index, checkpoint in enumerate(saving):
        checkpoint.save(f"{directory}/{library}_{index}/ckpt", options=_ASYNC)
      for checkpoint in saving:
        checkpoint.sync()
      if repeat:
        times[case].append(time.perf_counter() - start)
        cores_busy[case].append(
            (time.process_time() - cpu_start) / times[case][-1])
      for index in range(len(saving)):  # Untimed: keeps disk use flat.
        shutil.rmtree(f"{directory}/{library}_{index}")
  return times, cores_busy


def _print_two_saves(variables, directory):
  """Prints one save against two at once, for each library."""
  other = [tf.Variable(tf.random.uniform(v.shape)) for v in variables]
  print(f"two async saves of {_VARIABLES.value} x {_MIB.value} MiB into two "
        f"directories against one, save() to sync(), medians of "
        f"{_REPEATS.value} [fastest-slowest] (target: two <= 1.3x one):")
  for library in ("tensorflow", "tf_objckpt"):
    times, cores_busy = _one_or_two_saves(library, variables, other, directory)
    one, two = (statistics.median(times[case]) for case in ("one", "two"))
    ranges = {
        case: f"[{min(values):.3f}-{max(values):.3f}]"
        for case, values in times.items()
    }
    busy = {
        case: statistics.median(values) for case, values in cores_busy.items()
    }
    print(f"{library:<11} one {one:.3f} s {ranges['one']}, two "
          f"{two:.3f} s {ranges['two']}: {two / one:.2f}x; cores busy: "
          f"one {busy['one']:.2f}, two {busy['two']:.2f}")


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
    if _TWO_SAVES.value:
      _print_two_saves(variables, directory)
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
