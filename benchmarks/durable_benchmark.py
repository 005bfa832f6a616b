"""Times durable saves (fsync) against plain ones, and against TensorFlow.

Eager `CheckpointManager.save()` with `max_to_keep=2`, of the workloads of
the other benchmarks: (a) one 256 MiB float32 variable, (b) 4096 variables
of 16 KiB, and (s) one small variable, where the fixed cost of the flushes
shows. Three ways: TensorFlow's manager and checkpoint, ours, and ours with
`tf_objckpt.CheckpointOptions(durable=True)`, which flushes the data files,
the index, the directory and the state file to disk. The savers take
turns; each figure is the median of `--repeats` saves after one untimed
one. Flushes cost what the disk takes to write the data for good, so the
figures depend on the disk (and are near zero on tmpfs).

Run: python benchmarks/durable_benchmark.py [--workloads=a,b,s] [--repeats=5]
     [--directory=/path/on/the/disk/to/measure]
Prints the seconds and the durable save's time divided by the plain one's.
"""

import statistics
import tempfile
import time

from absl import app
from absl import flags
import tensorflow as tf

import tf_objckpt

_WORKLOADS = flags.DEFINE_list("workloads", ["a", "b", "s"], "Which workloads.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed saves per measurement.")
_DIRECTORY = flags.DEFINE_string("directory", None,
                                 "Where to save (default: a temporary one).")

_SHAPES = {"a": ([64 << 20], 1), "b": ([4096], 4096), "s": ([16], 1)}


def _managers(workload, directory):
  """{name: (manager, options)} for the three ways of saving."""
  shape, count = _SHAPES[workload]
  variables = [tf.Variable(tf.ones(shape)) for _ in range(count)]
  return {
      "tensorflow":
          (tf.train.CheckpointManager(tf.train.Checkpoint(v=variables),
                                      f"{directory}/tf", 2), None),
      "tf_objckpt":
          (tf_objckpt.CheckpointManager(tf_objckpt.Checkpoint(v=variables),
                                        f"{directory}/ours", 2), None),
      "tf_objckpt durable":
          (tf_objckpt.CheckpointManager(tf_objckpt.Checkpoint(v=variables),
                                        f"{directory}/durable", 2),
           tf_objckpt.CheckpointOptions(durable=True)),
  }


def main(_):
  for workload in _WORKLOADS.value:
    with tempfile.TemporaryDirectory(dir=_DIRECTORY.value) as directory:
      managers = _managers(workload, directory)
      times = {name: [] for name in managers}
      for repeat in range(_REPEATS.value + 1):
        for name, (manager, options) in managers.items():
          start = time.perf_counter()
          manager.save(options=options)
          if repeat:
            times[name].append(time.perf_counter() - start)
      medians = {
          name: statistics.median(values) for name, values in times.items()
      }
      print(f"workload {workload}: " + ", ".join(
          f"{name} {seconds:.4f} s" for name, seconds in medians.items()) +
            f"; durable / plain: "
            f"{medians['tf_objckpt durable'] / medians['tf_objckpt']:.2f}")


if __name__ == "__main__":
  app.run(main)
