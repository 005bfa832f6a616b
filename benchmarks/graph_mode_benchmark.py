"""Times graph-mode CheckpointV1 against tf.compat.v1.train.Checkpoint.

Workloads (as in checkpoint_benchmark.py): (b1024) 1024 and (b) 4096
variables of 64x64 float32, (c) 20,000 scalar variables, all `tf.compat.v1.get_variable`
resource variables in one `tf.Graph` and `tf.compat.v1.Session`, tracked
as a list on an AutoTrackable.

For each library, as when a job starts: the first `save()` (which builds
the save ops) and the first `restore()` + `run_restore_ops()` (which builds
the restore ops), each in a fresh graph and a fresh process, and a later
restore in that process (medians of --first_repeats processes per library,
the libraries alternating); then later saves, and the ops added after 1, 2
and 10 saves. Later saves of both libraries and of the name-based v1
`tf.compat.v1.train.Saver` (for reference) are interleaved, each writing a
new numbered checkpoint after the disk has caught up with earlier writes
(`os.sync`), so that disk and page-cache effects hit all alike; the median
is printed, with every sample. A bare `SaveV2` of the same bytes in a
session, interleaved the same way, is the floor of a later save (its time
flips between two modes from save to save, whatever wraps it). The first
restore is also split into `restore()`, the first `run_restore_ops()`
and the same run again, to show the session's own setup of new ops, and
shown beside the first run of a no-op in a fresh process's same graph: the
part of a first run that any first run of a session pays. The
v1 Saver is timed without writing its meta graph
(the save alone), and with it (its default), which costs more than the save
for graphs this large.

Run: python benchmarks/graph_mode_benchmark.py [--workloads=b1024,b,c]
     [--repeats=7] [--first_repeats=3] [--profile=<library>:<operation>]
"""

import cProfile
import glob
import json
import os
import pstats
import statistics
import tempfile
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf
from tensorflow.python.trackable import autotrackable as tf_autotrackable

import fresh_process
import tf_objckpt

_WORKLOADS = flags.DEFINE_list("workloads", ["b1024", "b", "c"],
                               "Which workloads.")
_REPEATS = flags.DEFINE_integer("repeats", 7, "Timed later saves.")
_CHILD = flags.DEFINE_string(
    "child", None, "Internal: the first save or the restores to time in "
    "this process.")
_FIRST_REPEATS = flags.DEFINE_integer(
    "first_repeats", 3, "Fresh processes timing each library's first save "
    "and restores.")
_PROFILE = flags.DEFINE_string(
    "profile", None, "Profile one measurement of one library, e.g. "
    "'tf_objckpt:first save' or 'tensorflow:first restore'.")

_LIBRARIES = {
    "tensorflow":
        (tf_autotrackable.AutoTrackable, tf.compat.v1.train.Checkpoint),
    "tf_objckpt": (tf_objckpt.AutoTrackable, tf_objckpt.CheckpointV1),
}
_SHAPES = {"b1024": ([64, 64], 1024), "b": ([64, 64], 4096), "c": ([], 20000)}


class _Program:
  """A graph and session holding one workload's variables."""

  def __init__(self, library, workload, initial_value):
    autotrackable_cls, checkpoint_cls = _LIBRARIES[library]
    shape, count = _SHAPES[workload]
    self.graph = tf.Graph()
    with self.graph.as_default():
      self.variables = [
          tf.compat.v1.get_variable(
              f"v{i}",
              shape,
              initializer=tf.constant_initializer(initial_value))
          for i in range(count)
      ]
      self.root = autotrackable_cls()
      self.root.variables = self.variables
      self.checkpoint = checkpoint_cls(root=self.root)
      self.session = tf.compat.v1.Session()

  def num_ops(self):
    return len(self.graph.get_operations())


def _timed(label, fn):
  """Returns (seconds, fn()); profiles the call if --profile names `label`."""
  profiler = cProfile.Profile() if label == _PROFILE.value else None
  start = time.perf_counter()
  if profiler:
    profiler.enable()
  result = fn()
  if profiler:
    profiler.disable()
  seconds = time.perf_counter() - start
  if profiler:
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
  return seconds, result


def _remove(path):
  """Deletes the files of a checkpoint (untimed), to keep disk use flat."""
  for filename in glob.glob(path + ".*"):
    os.remove(filename)


def _bench_saves(workload, directory, repeats):
  """Later save times and op counts of both libraries, in this process."""
  results = {library: {} for library in _LIBRARIES}
  programs = {
      library: _Program(library, workload, initial_value=1.)
      for library in _LIBRARIES
  }
  paths = {}
  for library, program in programs.items():
    prefix = os.path.join(directory, workload, library, "ckpt")
    with program.graph.as_default():
      program.session.run(tf.compat.v1.global_variables_initializer())
      start_ops = program.num_ops()

      def save(program=program, prefix=prefix):
        with program.graph.as_default():
          return program.checkpoint.save(prefix, session=program.session)

      paths[library] = save()
      counts = [program.num_ops() - start_ops]
      for index in range(9):
        _remove(paths[library])
        paths[library] = save()
        if index == 0:
          counts.append(program.num_ops() - start_ops)
      counts.append(program.num_ops() - start_ops)
      results[library]["ops after 1/2/10 saves"] = counts
      results[library]["save"] = save

  v1_program = _Program("tensorflow", workload, initial_value=1.)
  with v1_program.graph.as_default():
    v1_saver = tf.compat.v1.train.Saver(v1_program.variables, max_to_keep=None)
    v1_program.session.run(tf.compat.v1.global_variables_initializer())
  v1_prefix = os.path.join(directory, workload, "v1_saver", "model")
  v1_step = [0]

  def v1_save(write_meta_graph=False):
    v1_step[0] += 1
    with v1_program.graph.as_default():
      return v1_saver.save(v1_program.session,
                           v1_prefix,
                           global_step=v1_step[0],
                           write_meta_graph=write_meta_graph)

  paths["v1"] = paths["v1 with meta graph"] = v1_save()
  saves = {library: results[library]["save"] for library in _LIBRARIES}
  saves["v1"] = v1_save
  saves["v1 with meta graph"] = lambda: v1_save(write_meta_graph=True)
  saves["SaveV2 alone"] = _bare_save_v2(workload, directory)
  paths["SaveV2 alone"] = saves["SaveV2 alone"]()
  later = {name: [] for name in saves}
  for _ in range(repeats):
    for name, save in saves.items():
      old = paths[name]
      os.sync()  # Earlier saves' writeback would land in this one's time.
      seconds, paths[name] = _timed(f"{name}:later save", save)
      later[name].append(seconds)
      _remove(old)
  for name, seconds in later.items():
    print(f"  later saves of {name}, ms: " +
          " ".join(f"{second * 1000:.0f}" for second in seconds))
  results["tensorflow"]["SaveV2 alone"] = statistics.median(
      later["SaveV2 alone"])
  for library in _LIBRARIES:
    results[library]["later save"] = statistics.median(later[library])
    del results[library]["save"]
    programs[library].session.close()
  v1_program.session.close()
  v1_times = [
      statistics.median(later[name]) for name in ("v1", "v1 with meta graph")
  ]
  return results, v1_times, paths


def _bare_save_v2(workload, directory):
  """A function running one `SaveV2` of the workload's bytes in a session.

  The floor of a later save: the op that writes the data file, without a
  checkpoint library around it (its run time moves between two modes from
  one save to the next, whatever wraps it).
  """
  shape, count = _SHAPES[workload]
  graph = tf.Graph()
  with graph.as_default():
    values = [tf.constant(np.ones(shape, np.float32)) for _ in range(count)]
    prefix = tf.compat.v1.placeholder(tf.string, [])
    save = tf.raw_ops.SaveV2(prefix=prefix,
                             tensor_names=[f"v{i}" for i in range(count)],
                             shape_and_slices=[""] * count,
                             tensors=values)
    session = tf.compat.v1.Session()
  step = [0]

  def run():
    step[0] += 1
    path = os.path.join(directory, workload, "save_v2", f"bare-{step[0]}")
    session.run(save, {prefix: path})
    return path

  return run


def _bench_first_calls(workload, directory, paths, results, repeats):
  """Times each library's first save and restores in fresh processes.

  A job saves and restores first right after it starts, where it pays for
  nothing the other library left; the libraries alternate, and the medians
  of `repeats` processes are kept.
  """

  def measure(library):
    save_prefix = os.path.join(directory, workload, library, "first")
    measured = {}
    for operation, path in (("save", save_prefix), ("restore", paths[library]),
                            ("no-op", None)):
      measured.update(
          fresh_process.run_child(
              __file__,
              extra_args=[f"--profile={_PROFILE.value or ''}"],
              operation=operation,
              library=library,
              workload=workload,
              path=path))
    fresh_process.clear(save_prefix)
    return measured

  for library, measured in fresh_process.repeated(repeats, measure).items():
    for name, values in measured.items():
      results[library][name] = statistics.median(values)


def _first_save_time(library, workload, prefix):
  """The first save of a fresh graph (it builds the save ops)."""
  program = _Program(library, workload, initial_value=1.)
  with program.graph.as_default():
    program.session.run(tf.compat.v1.global_variables_initializer())
    seconds, _ = _timed(
        f"{library}:first save",
        lambda: program.checkpoint.save(prefix, session=program.session))
  program.session.close()
  return {"first save": seconds}


def _first_no_op_run_time(library, workload, path):
  """The first run of a fresh session, of a no-op in the graph of a restore.

  Any first run pays it (the whole graph sent to the session and placed):
  it is the floor of a first restore's first `run_restore_ops`.
  """
  del path  # Nothing is read.
  program = _Program(library, workload, initial_value=0.)
  with program.graph.as_default():
    no_op = tf.no_op()
    start = time.perf_counter()
    program.session.run(no_op)
    seconds = time.perf_counter() - start
  program.session.close()
  return {"first run of a no-op": seconds}


def _restore_times(library, workload, path):
  """A first and a later restore + run_restore_ops, in a fresh graph."""
  program = _Program(library, workload, initial_value=0.)
  times = {}
  with program.graph.as_default():

    def restore(phases):
      start = time.perf_counter()
      status = program.checkpoint.restore(path)
      built = time.perf_counter()
      status.run_restore_ops(program.session)
      phases.update(build=built - start, run=time.perf_counter() - built)

    first, later = {}, {}
    times["first restore"], _ = _timed(f"{library}:first restore",
                                       lambda: restore(first))
    ops_before = program.num_ops()
    times["later restore"], _ = _timed(f"{library}:later restore",
                                       lambda: restore(later))
    times["first restore: restore()"] = first["build"]
    times["first restore: first run"] = first["run"]
    times["first restore: the run again"] = later["run"]
    times["ops added by a later restore"] = program.num_ops() - ops_before
    restored = program.session.run(program.variables[-1])
    assert np.all(restored == 1.), "restored the wrong values"
  program.session.close()
  return times


def _report(workload, results, v1_times):
  ours, theirs = results["tf_objckpt"], results["tensorflow"]
  print(f"workload {workload}: {_SHAPES[workload][1]} variables of shape "
        f"{_SHAPES[workload][0]}")
  for operation in ("first save", "later save", "first restore",
                    "later restore"):
    print(f"  {operation:<14} tensorflow {theirs[operation]:8.3f}s  "
          f"tf_objckpt {ours[operation]:8.3f}s  "
          f"tensorflow / tf_objckpt x{theirs[operation] / ours[operation]:.2f}")
  print("  first restore, where the time goes: restore() (builds the ops), "
        "the first run_restore_ops (the session's setup of the new ops: "
        "its graph sent again and planned, the restore function "
        "instantiated; then the ops) and the same run again (the ops "
        "alone)")
  for library, measured in (("tensorflow", theirs), ("tf_objckpt", ours)):
    print(f"    {library:<10} restore() "
          f"{measured['first restore: restore()'] * 1000:6.0f} ms, "
          f"first run {measured['first restore: first run'] * 1000:6.0f} ms, "
          f"the run again "
          f"{measured['first restore: the run again'] * 1000:6.0f} ms")
  print("    a first run of a no-op in the same graph (what any first run "
        "pays: the graph sent to the session and placed): tensorflow "
        f"{theirs['first run of a no-op'] * 1000:.0f} ms, tf_objckpt "
        f"{ours['first run of a no-op'] * 1000:.0f} ms")
  print(f"  later save: SaveV2 of the same bytes alone "
        f"{theirs['SaveV2 alone']:8.3f}s")
  for label, v1_save in zip(("v1 Saver save", "  + meta graph"), v1_times):
    print(f"  {label:<14} {v1_save:8.3f}s; later saves / this: "
          f"tf_objckpt x{ours['later save'] / v1_save:.2f}, "
          f"tensorflow x{theirs['later save'] / v1_save:.2f}")
  for key in ("ops after 1/2/10 saves", "ops added by a later restore"):
    print(f"  {key}: tensorflow {theirs[key]}, tf_objckpt {ours[key]}")


def main(argv):
  del argv
  tf.get_logger().setLevel("ERROR")
  if _CHILD.value:
    request = json.loads(_CHILD.value)
    measure = {
        "save": _first_save_time,
        "restore": _restore_times,
        "no-op": _first_no_op_run_time
    }[request["operation"]]
    fresh_process.emit(
        measure(request["library"], request["workload"], request["path"]))
    return
  with tempfile.TemporaryDirectory() as directory:
    for workload in _WORKLOADS.value:
      results, v1_times, paths = _bench_saves(workload, directory,
                                              _REPEATS.value)
      _bench_first_calls(workload, directory, paths, results,
                         _FIRST_REPEATS.value)
      _report(workload, results, v1_times)


if __name__ == "__main__":
  app.run(main)
