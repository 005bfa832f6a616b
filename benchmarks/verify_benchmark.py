"""Times `tf-objckpt verify` against reading every value with TensorFlow.

The checkpoint (1 GiB by default: 64 float32 variables of 16 MiB, plus 4096
small ones) is written once; the page cache is then warmed by reading it.
TensorFlow's baseline is `tf.train.load_checkpoint` and `get_tensor` of
every key; ours is `verify_checkpoint.verify`, which reads every value
(checksums checked) and checks the object graph, and the whole command in a
fresh process (`python -m tf_objckpt verify`, which adds the interpreter's
and TensorFlow's start-up). The two take turns; each figure is the median
of `--repeats` runs. The target is verify <= 1.5x TensorFlow's read.

Run: python benchmarks/verify_benchmark.py [--gib=1] [--repeats=3]
     [--directory=/path/on/the/disk/to/measure]
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

import tf_objckpt
from tf_objckpt.inspection import checkpoint_listing
from tf_objckpt.inspection import verify_checkpoint

_GIB = flags.DEFINE_float("gib", 1.0, "Size of the large values, in GiB.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed runs of each.")
_DIRECTORY = flags.DEFINE_string("directory", None,
                                 "Where to write (default: a temporary one).")
_PROCESS = flags.DEFINE_bool("process", True,
                             "Also time the command in a fresh process.")


def _write(prefix):
  count = max(1, int(_GIB.value * 64))
  large = [tf.Variable(tf.random.uniform([4 << 20])) for _ in range(count)]
  small = [
      tf.Variable(np.full([64], index, np.float32)) for index in range(4096)
  ]
  return tf_objckpt.Checkpoint(large=large, small=small).write(prefix)


def _tensorflow_read_all(path):
  reader = tf.train.load_checkpoint(path)
  for key in reader.get_variable_to_shape_map():
    reader.get_tensor(key)


def _verify(path):
  listing = checkpoint_listing.open_listing(path, strict=False)
  result = verify_checkpoint.verify(listing)
  assert not result.errors, result.errors


def _verify_process(path):
  subprocess.run([sys.executable, "-m", "tf_objckpt", "verify", path],
                 check=True,
                 capture_output=True,
                 env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


def _median_seconds(function, path):
  start = time.perf_counter()
  function(path)
  return time.perf_counter() - start


def main(_):
  with tempfile.TemporaryDirectory(dir=_DIRECTORY.value) as directory:
    path = _write(os.path.join(directory, "ckpt"))
    size = sum(
        os.path.getsize(os.path.join(directory, name))
        for name in os.listdir(directory))
    print(f"checkpoint: {size / (1 << 30):.2f} GiB, "
          f"{len(tf.train.list_variables(path))} keys")
    runs = {
        "tensorflow read all": _tensorflow_read_all,
        "tf_objckpt verify": _verify
    }
    if _PROCESS.value:
      runs["tf-objckpt verify (process)"] = _verify_process
    _tensorflow_read_all(path)  # Warms the page cache.
    times = {name: [] for name in runs}
    for _ in range(_REPEATS.value):
      for name, function in runs.items():
        times[name].append(_median_seconds(function, path))
    baseline = statistics.median(times["tensorflow read all"])
    for name, seconds in times.items():
      median = statistics.median(seconds)
      print(f"{name:30s} {median:7.3f} s  {median / baseline:5.2f}x  "
            f"({size / median / 1e6:7.1f} MB/s)")


if __name__ == "__main__":
  app.run(main)
