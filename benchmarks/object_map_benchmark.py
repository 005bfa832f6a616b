"""Times a mapped restore (`CheckpointOptions(object_map=...)`) against an
unmapped restore of the same values, and TensorFlow's way to do the same.

The checkpoint holds `model/encoder/...`. Three restores put its values
into the same variables, a new model's `backbone`:

- "unmapped": ours, the backbone placed where the checkpoint has it
  (`Checkpoint(model=holder)`, `holder.encoder = backbone`);
- "mapped": ours, `Checkpoint(backbone=backbone).read(path,
  options=CheckpointOptions(object_map={"backbone": "model/encoder"}))`;
- "tensorflow": TensorFlow, the old structure rebuilt around the backbone
  (`tf.train.Checkpoint(model=tf.train.Checkpoint(encoder=backbone))`).

Workloads: 4096 variables of 16 KiB (`--variables`), and 1 GiB in 16
variables (`--gib`). The three take turns in one process, after one
warm-up each; each figure is the median, and in parentheses the range, of
`--repeats` restores. The mapped restore should cost no more than the
unmapped one plus 10%. Report the load (`uptime`) next to the figures.

Run: python benchmarks/object_map_benchmark.py [--repeats=7]
  [--variables=4096] [--gib=1]
"""

import os
import statistics
import tempfile
import time

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf

import tf_objckpt

_REPEATS = flags.DEFINE_integer("repeats", 7, "Restores timed per way.")
_VARIABLES = flags.DEFINE_integer("variables", 4096,
                                  "Variables of 16 KiB in the first workload.")
_GIB = flags.DEFINE_float("gib", 1.0, "Size of the second workload, in GiB.")

_MAP = {"backbone": "model/encoder"}


def _encoder(count, elements):
  encoder = tf.Module()
  encoder.layers = [
      tf.Variable(tf.fill([elements], float(index))) for index in range(count)
  ]
  return encoder


def _ways(path, backbone):
  """`{way: restore}` of the three restores into `backbone`."""
  options = tf_objckpt.CheckpointOptions(object_map=_MAP)

  def unmapped():
    holder = tf_objckpt.AutoTrackable()
    holder.encoder = backbone
    tf_objckpt.Checkpoint(model=holder).read(path).assert_consumed()

  def mapped():
    tf_objckpt.Checkpoint(backbone=backbone).read(
        path, options=options).assert_consumed()

  def tensorflow():
    tf.train.Checkpoint(model=tf.train.Checkpoint(
        encoder=backbone)).read(path).assert_consumed()

  return {"unmapped": unmapped, "mapped": mapped, "tensorflow": tensorflow}


def _measure(name, count, elements, directory):
  model = tf.Module()
  model.encoder = _encoder(count, elements)
  path = tf.train.Checkpoint(model=model).write(os.path.join(directory, name))
  del model
  ways = _ways(path, _encoder(count, elements))
  times = {way: [] for way in ways}
  for restore in ways.values():
    restore()  # Warm-up: kernels built, files in the page cache.
  for repeat in range(_REPEATS.value):
    order = list(ways) if repeat % 2 == 0 else list(reversed(ways))
    for way in order:
      start = time.perf_counter()
      ways[way]()
      times[way].append(time.perf_counter() - start)
  print(f"{name}:")
  for way, seconds in times.items():
    print(f"  {way:>10}: {statistics.median(seconds):.3f} s "
          f"({min(seconds):.3f} to {max(seconds):.3f})")
  ratio = statistics.median(times["mapped"]) / statistics.median(
      times["unmapped"])
  print(f"  mapped / unmapped: {ratio:.3f} (medians)")


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)  # Not each restore's transfer log.
  tf.get_logger().setLevel("WARNING")
  print("load:", open("/proc/loadavg").read().split()[:3])
  with tempfile.TemporaryDirectory() as directory:
    _measure(f"{_VARIABLES.value} variables of 16 KiB", _VARIABLES.value, 4096,
             directory)
    elements = int(_GIB.value * 2**30 / 4 / 16)
    _measure(f"{_GIB.value:g} GiB in 16 variables", 16, elements, directory)
  print("load:", open("/proc/loadavg").read().split()[:3])


if __name__ == "__main__":
  app.run(main)
