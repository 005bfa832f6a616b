"""Times asynchronous saves against synchronous ones, and against TensorFlow.

Four float32 variables of 64 MiB each, saved by eager `Checkpoint.save()`
four ways: TensorFlow's and ours, synchronously and with
`CheckpointOptions(experimental_enable_async_checkpoint=True)`. For each
save it times how long `save()` blocks, and `save()` plus `sync()` (the
whole write). Between saves every variable is assigned, as a training step
would, so that each save has new values to write. The savers take turns;
each figure is the median of `--repeats` saves after one untimed one.

Targets: our asynchronous `save()` blocks for at most 15% of our own
synchronous save and no longer than TensorFlow's asynchronous `save()`;
our `save()` plus `sync()` is no slower than TensorFlow's.

Run: python benchmarks/async_benchmark.py [--repeats=5] [--directory=...]
"""

import statistics
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


def main(_):
  elements = _MIB.value << 18  # float32s.
  variables = [tf.Variable(tf.random.uniform([elements]))
               for _ in range(_VARIABLES.value)]
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
  print(f"{_VARIABLES.value} x {_MIB.value} MiB, medians of "
        f"{_REPEATS.value} saves (seconds):")
  print(f"{'saver':<18} {'save() blocks':>14} {'save()+sync()':>14}")
  medians = {}
  for name in savers:
    medians[name] = (statistics.median(blocked[name]),
                     statistics.median(total[name]))
    print(f"{name:<18} {medians[name][0]:>14.4f} {medians[name][1]:>14.4f}")
  ours_async, ours_sync = medians["tf_objckpt async"], medians["tf_objckpt sync"]
  tf_async = medians["tensorflow async"]
  print(f"our async save() blocks / our sync save(): "
        f"{ours_async[0] / ours_sync[0]:.1%} (target <= 15%)")
  print(f"our async save() blocks / TensorFlow's: "
        f"{ours_async[0] / tf_async[0]:.2f} (target <= 1)")
  print(f"our async save()+sync() / TensorFlow's: "
        f"{ours_async[1] / tf_async[1]:.2f} (target <= 1)")


if __name__ == "__main__":
  app.run(main)
