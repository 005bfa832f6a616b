"""Times tf_objckpt against tf.train.Checkpoint on the same workloads (eager).

Workloads: (a) one 256 MiB float32 variable, (b) 4096 variables of 64x64
float32 (16 KiB), (c) 20,000 scalar variables, (d) a Keras model of 8
Dense(512) layers with Adam. Each measurement runs in a fresh process
(`fresh_process`): the first and second `write()`; the first and second
`read()` into existing variables, of that checkpoint, in another process;
and restore-on-create (restore first, then create the variables one by one
as attributes of a module, or build the Keras model), next to creating the
same variables without a restore, in one more process.

Run: python benchmarks/checkpoint_benchmark.py [--workloads=a,b,c,d]
     [--repeats=3] [--on_create_limit=4096]
Prints one line per (workload, measurement): the median seconds of each
library and TensorFlow's time divided by ours (above 1 means we are faster),
then the ratio of restore-on-create to creating alone.
"""

import json
import os
import statistics
import tempfile

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

import fresh_process
import tf_objckpt

_WORKLOADS = flags.DEFINE_list("workloads", ["a", "b", "c", "d"],
                               "Which workloads to run.")
_REPEATS = flags.DEFINE_integer(
    "repeats", 3, "Fresh processes per "
    "measurement and library.")
_ON_CREATE_LIMIT = flags.DEFINE_integer(
    "on_create_limit", 4096,
    "Restore-on-create creates at most this many variables (TensorFlow's "
    "cost grows with the count; (c) in full takes it about half an hour).")
_TENSORFLOW_ON_CREATE = flags.DEFINE_bool(
    "tensorflow_on_create", True,
    "Also time TensorFlow's restore-on-create (minutes for (b) and (c)).")
_CHILD = flags.DEFINE_string("child", None, "Internal: one measurement.")

_LIBRARIES = {
    "tensorflow": tf.train.Checkpoint,
    "tf_objckpt": tf_objckpt.Checkpoint
}


def _variable_values(workload, fill):
  """The values of a workload's variables, as numpy arrays."""
  if workload == "a":
    return [np.full([64, 1024, 1024], fill, np.float32)]
  if workload == "b":
    return [np.full([64, 64], fill + i, np.float32) for i in range(4096)]
  if workload == "c":
    return [np.float32(fill + i) for i in range(20000)]
  raise ValueError(workload)


def _keras_state():
  """The Keras workload's model and Adam optimizer, slots built."""
  model = tf.keras.Sequential([tf.keras.Input([512])] +
                              [tf.keras.layers.Dense(512) for _ in range(8)])
  optimizer = tf.keras.optimizers.Adam()
  optimizer.build(model.trainable_variables)
  return {"model": model, "optimizer": optimizer}


def _state(workload, fill):
  if workload == "d":
    return _keras_state()
  module = tf.Module()
  module.variables_list = [
      tf.Variable(v) for v in _variable_values(workload, fill)
  ]
  return {"module": module}


def _attach_one_by_one(values, module=None):
  """Creates the variables of `values` one by one as attributes."""
  module = module or tf.Module()
  for index, value in enumerate(values):
    setattr(module, "v%d" % index, tf.Variable(value))
  return module


def _time_write(checkpoint_cls, workload, prefix):
  checkpoint = checkpoint_cls(**_state(workload, fill=1.))
  fresh_process.clear(prefix, prefix + "_again")
  return {
      "first write":
          fresh_process.timed(lambda: checkpoint.write(prefix)),
      "second write":
          fresh_process.timed(lambda: checkpoint.write(prefix + "_again"))
  }


def _time_read(checkpoint_cls, workload, prefix):
  checkpoint = checkpoint_cls(**_state(workload, fill=0.))
  return {
      "first read": fresh_process.timed(lambda: checkpoint.read(prefix)),
      "second read": fresh_process.timed(lambda: checkpoint.read(prefix))
  }


def _time_on_create(checkpoint_cls, workload, prefix):
  """Creating variables alone, then restore-on-create of as many."""
  if workload == "d":
    checkpoint_cls(**_keras_state()).write(prefix)

    def restore_on_create():
      model = tf.keras.Sequential(
          [tf.keras.layers.Dense(512) for _ in range(8)])
      checkpoint_cls(model=model).read(prefix).expect_partial()
      model.build([None, 512])

    return {"restore-on-create": fresh_process.timed(restore_on_create)}
  values = _variable_values(workload, fill=0.)[:_ON_CREATE_LIMIT.value]
  checkpoint_cls(module=_attach_one_by_one(values)).write(prefix)
  create = fresh_process.timed(lambda: _attach_one_by_one(values))

  def restore_on_create():
    module = tf.Module()
    status = checkpoint_cls(module=module).read(prefix)
    _attach_one_by_one(values, module)
    status.expect_partial()

  return {
      "create only": create,
      "restore-on-create": fresh_process.timed(restore_on_create)
  }


_OPERATIONS = {
    "write": _time_write,
    "read": _time_read,
    "on_create": _time_on_create
}


def _run_child(request):
  fresh_process.emit(_OPERATIONS[request["operation"]](
      _LIBRARIES[request["library"]], request["workload"], request["prefix"]))


def _bench(workload, directory, repeats):

  def measure(library):
    prefix = os.path.join(directory, f"{workload}_{library}")
    result = {}
    operations = ["write", "read"]
    if library == "tf_objckpt" or _TENSORFLOW_ON_CREATE.value:
      operations.append("on_create")
    for operation in operations:
      result.update(
          fresh_process.run_child(
              __file__,
              library=library,
              workload=workload,
              operation=operation,
              prefix=prefix +
              ("_attached" if operation == "on_create" else "")))
    return result

  return fresh_process.repeated(repeats, measure)


def _print_on_create(workload, results):
  for library, measured in results.items():
    if "create only" in measured:
      ratio = (statistics.median(measured["restore-on-create"]) /
               statistics.median(measured["create only"]))
      print(
          f"{workload:>9} restore-on-create / create only: {library} "
          f"x{ratio:.2f}",
          flush=True)


def main(argv):
  del argv
  if _CHILD.value:
    _run_child(json.loads(_CHILD.value))
    return
  with tempfile.TemporaryDirectory() as directory:
    for workload in _WORKLOADS.value:
      results = _bench(workload, directory, _REPEATS.value)
      fresh_process.print_medians(workload, results)
      _print_on_create(workload, results)


if __name__ == "__main__":
  app.run(main)
