"""Times `restore_or_initialize()` on an intact checkpoint against a restore.

Before it could fall back to an older checkpoint, `restore_or_initialize()`
was `checkpoint.restore(latest)`. Now its restore reads every value before
it assigns any (`check_values_first`), so that a damaged checkpoint assigns
nothing, values restored later (on creation, by graph-mode restore ops)
included. Eagerly, the values it reads are the ones the restore assigns, so
the target is at most 1.1x the plain restore. Graph building, the plain
restore only builds ops, so checking costs a read of every value.

Each case is a checkpoint of `--mib` MiB (and one of 1 MiB, many small
variables) restored into existing variables, into variables created after
the restore, and graph building; the two take turns, each figure is the
median of `--repeats` runs.

Run: python benchmarks/self_healing_benchmark.py [--mib=256] [--repeats=5]
"""

import os
import statistics
import tempfile
import time

from absl import app
from absl import flags
import tensorflow as tf

import tf_objckpt

_MIB = flags.DEFINE_integer("mib", 256, "Size of the large checkpoint.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed runs of each.")


def _shapes(mib, variable_count):
  return [[max(1, (mib << 18) // variable_count)]] * variable_count


def _write(directory, shapes):
  model = tf.Module()
  model.variables_ = [tf.Variable(tf.random.uniform(shape)) for shape in shapes]
  manager = tf_objckpt.CheckpointManager(
      tf_objckpt.Checkpoint(model=model), directory, max_to_keep=1)
  return manager.save()


def _eager(directory, shapes, on_create, heal):
  model = tf.Module()
  if not on_create:
    model.variables_ = [tf.Variable(tf.zeros(shape)) for shape in shapes]
  checkpoint = tf_objckpt.Checkpoint(model=model)
  manager = tf_objckpt.CheckpointManager(checkpoint, directory, max_to_keep=1)
  start = time.perf_counter()
  if heal:
    manager.restore_or_initialize()
  else:
    checkpoint.restore(manager.latest_checkpoint)
  if on_create:
    model.variables_ = [tf.Variable(tf.zeros(shape)) for shape in shapes]
  return time.perf_counter() - start


def _graph(directory, shapes, heal):
  with tf.Graph().as_default(), tf.compat.v1.Session():
    model = tf.Module()
    model.variables_ = [tf.Variable(tf.zeros(shape)) for shape in shapes]
    checkpoint = tf_objckpt.Checkpoint(model=model)
    manager = tf_objckpt.CheckpointManager(checkpoint, directory,
                                           max_to_keep=1)
    start = time.perf_counter()
    if heal:
      manager.restore_or_initialize()
    else:
      checkpoint.restore(manager.latest_checkpoint)
    return time.perf_counter() - start


def _compare(name, run):
  run(False), run(True)  # Warm up: caches, page cache.
  times = {False: [], True: []}
  for _ in range(_REPEATS.value):
    for heal in (False, True):
      times[heal].append(run(heal))
  plain, heal = (statistics.median(times[key]) for key in (False, True))
  print(f"{name:40s} restore {plain * 1e3:8.1f} ms   restore_or_initialize "
        f"{heal * 1e3:8.1f} ms   {heal / plain:5.2f}x")


def main(argv):
  del argv
  tf.get_logger().setLevel("WARNING")
  with tempfile.TemporaryDirectory() as root:
    for mib, count in ((1, 200), (_MIB.value, 64)):
      shapes = _shapes(mib, count)
      directory = os.path.join(root, f"{mib}")
      _write(directory, shapes)
      label = f"{mib} MiB, {count} variables"
      _compare(f"{label}, existing",
               lambda heal: _eager(directory, shapes, False, heal))
      _compare(f"{label}, on creation",
               lambda heal: _eager(directory, shapes, True, heal))
      _compare(f"{label}, graph building",
               lambda heal: _graph(directory, shapes, heal))


if __name__ == "__main__":
  app.run(main)
