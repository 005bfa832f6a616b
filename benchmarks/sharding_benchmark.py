"""Times saves split by `MaxShardSizePolicy` against numpy's raw writes.

A 256 MiB model (`--variables` float32 variables) is written by eager
`Checkpoint.write` with `CheckpointOptions(experimental_sharding_callback=
MaxShardSizePolicy(256 MiB / --shards))`, by TensorFlow and by tf_objckpt,
and the same bytes are written by numpy (`ndarray.tofile`, one file, no
checkpoint format): the file bandwidth a save can hope for on this disk.
tf_objckpt writes the shards from parallel threads; the target is at least
half of numpy's bandwidth. The writers take turns; each figure is the
median of `--repeats` writes after one untimed one, each to a fresh prefix
(the previous one deleted).

Run: python benchmarks/sharding_benchmark.py [--repeats=5] [--shards=4]
     [--variables=4] [--directory=/path/on/the/disk/to/measure]
Prints seconds, MiB/s and each save's bandwidth as a fraction of numpy's.
"""

import os
import shutil
import statistics
import tempfile
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

import tf_objckpt

_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed writes per writer.")
_SHARDS = flags.DEFINE_integer("shards", 4, "Shards the policy makes.")
_VARIABLES = flags.DEFINE_integer("variables", 4, "Variables of the model.")
_DIRECTORY = flags.DEFINE_string("directory", None,
                                 "Where to write (default: a temporary one).")

_MODEL_BYTES = 256 << 20


def _writers(directory):
  """{name: write(index)} for numpy, TensorFlow and tf_objckpt."""
  count = _VARIABLES.value
  elements = _MODEL_BYTES // 4 // count
  variables = [tf.Variable(tf.random.uniform([elements])) for _ in
               range(count)]
  array = np.concatenate([variable.numpy() for variable in variables])
  options = tf.train.CheckpointOptions(
      experimental_sharding_callback=tf.train.experimental.MaxShardSizePolicy(
          _MODEL_BYTES // _SHARDS.value))
  checkpoints = {"tensorflow": tf.train.Checkpoint(v=variables),
                 "tf_objckpt": tf_objckpt.Checkpoint(v=variables)}

  def numpy_write(path):
    array.tofile(path)

  def checkpoint_write(name):
    return lambda path: checkpoints[name].write(path, options=options)

  writers = {"numpy": numpy_write}
  writers.update((name, checkpoint_write(name)) for name in checkpoints)
  return writers


def _timed(write, directory):
  path = os.path.join(directory, "prefix")
  start = time.perf_counter()
  write(path)
  elapsed = time.perf_counter() - start
  shutil.rmtree(directory)
  os.makedirs(directory)
  return elapsed


def main(_):
  with tempfile.TemporaryDirectory(dir=_DIRECTORY.value) as directory:
    writers = _writers(directory)
    times = {name: [] for name in writers}
    for repeat in range(_REPEATS.value + 1):
      for name, write in writers.items():
        subdirectory = os.path.join(directory, name)
        os.makedirs(subdirectory, exist_ok=True)
        elapsed = _timed(write, subdirectory)
        if repeat:
          times[name].append(elapsed)
  mib = _MODEL_BYTES / (1 << 20)
  medians = {name: statistics.median(values) for name, values in times.items()}
  print(f"{mib:.0f} MiB in {_VARIABLES.value} variables, "
        f"MaxShardSizePolicy into {_SHARDS.value} shards, "
        f"{os.cpu_count()} cores; median of {_REPEATS.value}")
  for name, seconds in medians.items():
    print(f"  {name:<11} {seconds:7.3f} s  {mib / seconds:8.0f} MiB/s  "
          f"{medians['numpy'] / seconds:5.2f} of numpy's bandwidth")


if __name__ == "__main__":
  app.run(main)
