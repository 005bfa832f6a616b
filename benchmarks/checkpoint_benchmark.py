"""Times tf_objckpt against tf.train.Checkpoint on the same workloads (eager).

Workloads: (a) one 256 MiB float32 variable, (b) 4096 variables of 16 KiB,
(c) 20,000 scalar variables, (d) a Keras model of 8 Dense(512) layers with
Adam. Operations: `write`, `read` into existing variables, and
restore-on-create (restore first, then create the variables one by one as
attributes of a module, or build the Keras model).

Run: python benchmarks/checkpoint_benchmark.py [--workloads=a,b,c,d]
     [--repeats=3]
Prints one line per (workload, operation): the median seconds of each
library and TensorFlow's time divided by ours (above 1 means we are faster).
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

_WORKLOADS = flags.DEFINE_list("workloads", ["a", "b", "c", "d"],
                               "Which workloads to run.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed runs per measurement.")
_ON_CREATE_LIMIT = flags.DEFINE_integer(
    "on_create_limit", 4096,
    "Restore-on-create creates at most this many variables (TensorFlow's "
    "cost grows with the count; (c) in full takes it about half an hour).")

_LIBRARIES = {"tensorflow": tf.train.Checkpoint,
              "tf_objckpt": tf_objckpt.Checkpoint}


def _variable_values(workload):
  """The initial values of a workload's variables, as numpy arrays."""
  if workload == "a":
    return [np.ones([64, 1024, 1024], np.float32)]
  if workload == "b":
    return [np.full([64, 64], i, np.float32) for i in range(4096)]
  if workload == "c":
    return [np.float32(i) for i in range(20000)]
  raise ValueError(workload)


def _module_with(values):
  module = tf.Module()
  module.variables_list = [tf.Variable(v) for v in values]
  return module


def _attach_one_by_one(values):
  """Creates a module, then its variables one by one as attributes."""
  module = tf.Module()
  for index, value in enumerate(values):
    setattr(module, "v%d" % index, tf.Variable(value))
  return module


def _keras_model():
  model = tf.keras.Sequential(
      [tf.keras.Input([512])] +
      [tf.keras.layers.Dense(512) for _ in range(8)])
  optimizer = tf.keras.optimizers.Adam()
  x = np.ones([4, 512], np.float32)
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(model(x))
  optimizer.apply_gradients(
      zip(tape.gradient(loss, model.trainable_variables),
          model.trainable_variables))
  return model, optimizer


def _median_seconds(fn, repeats):
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def _bench_variables(workload, directory, repeats):
  """write / read / restore-on-create timings for a variables workload."""
  values = _variable_values(workload)
  results = {}
  for name, checkpoint_cls in _LIBRARIES.items():
    prefix = os.path.join(directory, f"{workload}_{name}")
    module = _module_with(values)
    checkpoint = checkpoint_cls(module=module)
    write = _median_seconds(lambda: checkpoint.write(prefix), repeats)
    read = _median_seconds(lambda: checkpoint.read(prefix), repeats)
    attached_prefix = os.path.join(directory, f"{workload}_{name}_attached")
    checkpoint_cls(module=_attach_one_by_one(values)).write(attached_prefix)
    created = values[:_ON_CREATE_LIMIT.value]

    def restore_on_create():
      module = tf.Module()
      status = checkpoint_cls(module=module).read(attached_prefix)
      for index, value in enumerate(created):
        setattr(module, "v%d" % index, tf.Variable(value))
      status.expect_partial()

    on_create = _median_seconds(restore_on_create, 1 if workload != "a"
                                else repeats)
    results[name] = {"write": write, "read": read,
                     "restore-on-create": on_create}
  create_only = _median_seconds(
      lambda: _attach_one_by_one(values[:_ON_CREATE_LIMIT.value]), 1)
  results["create without restoring"] = create_only
  return results


def _bench_keras(directory, repeats):
  """write / read / restore-on-create timings for the Keras workload."""
  results = {}
  for name, checkpoint_cls in _LIBRARIES.items():
    prefix = os.path.join(directory, f"keras_{name}")
    model, optimizer = _keras_model()
    checkpoint = checkpoint_cls(model=model, optimizer=optimizer)
    write = _median_seconds(lambda: checkpoint.write(prefix), repeats)
    read = _median_seconds(lambda: checkpoint.read(prefix), repeats)

    def restore_on_create():
      model = tf.keras.Sequential([tf.keras.layers.Dense(512)
                                   for _ in range(8)])
      status = checkpoint_cls(model=model).read(prefix)
      model.build([None, 512])
      status.expect_partial()

    on_create = _median_seconds(restore_on_create, repeats)
    results[name] = {"write": write, "read": read,
                     "restore-on-create": on_create}
  return results


def _print(workload, results):
  ours, theirs = results["tf_objckpt"], results["tensorflow"]
  for operation in ours:
    print(f"{workload:>2} {operation:<18} tensorflow {theirs[operation]:8.3f}s"
          f"  tf_objckpt {ours[operation]:8.3f}s"
          f"  speedup x{theirs[operation] / ours[operation]:6.2f}")
  if "create without restoring" in results:
    create = results["create without restoring"]
    print(f"{workload:>2} {'create only':<18} {create:8.3f}s; restore-on-create"
          f" / create: tf_objckpt x{ours['restore-on-create'] / create:.2f},"
          f" tensorflow x{theirs['restore-on-create'] / create:.2f}")


def main(argv):
  del argv
  with tempfile.TemporaryDirectory() as directory:
    for workload in _WORKLOADS.value:
      if workload == "d":
        results = _bench_keras(directory, _REPEATS.value)
      else:
        results = _bench_variables(workload, directory, _REPEATS.value)
      _print(workload, results)


if __name__ == "__main__":
  app.run(main)
