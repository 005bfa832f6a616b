"""Times `restore_or_initialize()` on an intact checkpoint against a restore.

Before it could fall back to an older checkpoint, `restore_or_initialize()`
was `checkpoint.restore(latest)` ("restore" below). Now its restore reads
every value before it assigns any, so that a damaged checkpoint assigns
nothing, values restored later (on creation, by graph-mode restore ops)
included. Eagerly, the values it reads are the ones the restore assigns.
Graph building, the plain restore reads nothing, so the check is one more
read of the checkpoint, before the restore is built (building it already
sets Python state). A graph-mode user then runs the restore ops
(`checkpoint.restore(path).run_restore_ops()`): "build + run" is what
they wait for in all.

The cases: `--mib` MiB in 64 variables, 1 MiB in 200, and a tf_keras
ResNet50 (98 MiB in 321 variables), restored into existing variables,
into variables created after the restore, and graph building. The two
calls take turns; each figure is the median, and in parentheses the range,
of `--repeats` runs. A job restarting calls them once, in a new process:
`--fresh` times each call that way (`fresh_process`), where the first
`RestoreV2` of each signature builds its kernel.

Run: python benchmarks/self_healing_benchmark.py [--mib=256] [--repeats=5]
  [--fresh]
"""

import json
import os
import statistics
import tempfile
import time

from absl import app
from absl import flags
import tensorflow as tf
import tf_keras

import fresh_process
import tf_objckpt

_MIB = flags.DEFINE_integer("mib", 256, "Size of the large checkpoint.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed runs of each.")
_FRESH = flags.DEFINE_bool("fresh", False, "Time each call in a new process.")
_CHILD = flags.DEFINE_string("child", None,
                             "Internal: time one call (JSON request).")


def _variables_model(mib, count, on_create=False):
  """A model of `count` variables, `mib` MiB in all (None: created later)."""
  shape = [max(1, (mib << 18) // count)]
  model = tf.Module()

  def create():
    model.variables_ = [tf.Variable(tf.zeros(shape)) for _ in range(count)]

  if not on_create:
    create()
  return model, create


def _resnet(on_create=False):
  del on_create  # Not supported (see `_cases`).
  return tf_keras.applications.ResNet50(weights=None), lambda: None


def _write(directory, make_model):
  model, _ = make_model()
  tf_objckpt.CheckpointManager(tf_objckpt.Checkpoint(model=model),
                               directory,
                               max_to_keep=1).save()


def _eager(directory, make_model, on_create, heal):
  model, create = make_model(on_create=on_create)
  checkpoint = tf_objckpt.Checkpoint(model=model)
  manager = tf_objckpt.CheckpointManager(checkpoint, directory, max_to_keep=1)
  start = time.perf_counter()
  if heal:
    manager.restore_or_initialize()
  else:
    checkpoint.restore(manager.latest_checkpoint)
  if on_create:
    create()
  return time.perf_counter() - start


def _graph(directory, make_model, heal, run):
  """Graph building: the call, then (if `run`) restoring as a user does."""
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    model, _ = make_model()
    checkpoint = tf_objckpt.Checkpoint(model=model)
    manager = tf_objckpt.CheckpointManager(checkpoint, directory, max_to_keep=1)
    start = time.perf_counter()
    if heal:
      path = manager.restore_or_initialize()
    else:
      path = manager.latest_checkpoint
      checkpoint.restore(path)
    if run:
      checkpoint.restore(path).run_restore_ops(session)
    return time.perf_counter() - start


def _figure(times):
  return (f"{statistics.median(times) * 1e3:7.1f} ms "
          f"({min(times) * 1e3:.0f}-{max(times) * 1e3:.0f})")


def _compare(name, run):
  run(False), run(True)  # Warm up: caches, page cache.
  times = {False: [], True: []}
  for _ in range(_REPEATS.value):
    for heal in (False, True):
      times[heal].append(run(heal))
  _print(name, times)


def _print(name, times):
  ratio = statistics.median(times[True]) / statistics.median(times[False])
  print(f"{name:44s} restore {_figure(times[False])}   "
        f"restore_or_initialize {_figure(times[True])}   {ratio:5.2f}x")


def _cases():
  """`{label: (make_model, creates_later)}`.

  `make_model(on_create)` is `(model, create)`; `creates_later` says whether
  the model's variables can be created after the restore (Keras builds its
  variables with the model).
  """
  return {
      f"{_MIB.value} MiB, 64 variables":
          (lambda on_create=False: _variables_model(_MIB.value, 64, on_create),
           True),
      "1 MiB, 200 variables":
          (lambda on_create=False: _variables_model(1, 200, on_create), True),
      "ResNet50": (_resnet, False)
  }


def _timers(directory, make_model, creates_later):
  """`{way: time(heal)}`: the ways a model is restored."""
  timers = {"existing": lambda heal: _eager(directory, make_model, False, heal)}
  if creates_later:
    timers["on creation"] = lambda heal: _eager(directory, make_model, True,
                                                heal)
  timers["graph building"] = lambda heal: _graph(
      directory, make_model, heal, run=False)
  timers["graph build + run"] = lambda heal: _graph(
      directory, make_model, heal, run=True)
  return timers


def _child(request):
  """Times one call in this new process, for `--fresh`."""
  timers = _timers(request["directory"], *_cases()[request["case"]])
  seconds = timers[request["way"]](request["heal"])
  fresh_process.emit({"seconds": seconds})


def _compare_fresh(name, directory, case, way):
  times = {False: [], True: []}
  for _ in range(_REPEATS.value):
    for heal in (False, True):
      times[heal].append(
          fresh_process.run_child(__file__,
                                  extra_args=[f"--mib={_MIB.value}"],
                                  directory=directory,
                                  case=case,
                                  way=way,
                                  heal=heal)["seconds"])
  _print(name, times)


def main(argv):
  del argv
  tf.get_logger().setLevel("WARNING")
  if _CHILD.value:
    _child(json.loads(_CHILD.value))
    return
  with tempfile.TemporaryDirectory() as root:
    for label, (make_model, creates_later) in _cases().items():
      directory = os.path.join(root, label.split(",")[0].replace(" ", "_"))
      _write(directory, make_model)
      for way, timer in _timers(directory, make_model, creates_later).items():
        if _FRESH.value:
          _compare_fresh(f"{label}, {way}", directory, label, way)
        else:
          _compare(f"{label}, {way}", timer)


if __name__ == "__main__":
  app.run(main)
