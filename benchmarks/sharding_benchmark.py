"""Times sharded saves and restores against TensorFlow's and numpy's.

A model of `--gib` GiB in `--variables` float32 variables is written and
read back, each write and each read in a fresh process (`fresh_process`),
in these layouts (cases):

  numpy               the same bytes, `ndarray.tofile` to one file and
                      `np.fromfile` back: the disk's bandwidth for one
                      writer, no checkpoint format;
  numpy_parallel      the same bytes in one file per core, written and read
                      by one thread each: the bandwidth of all the cores;
  tensorflow          `tf.train.Checkpoint` write/read, default options
                      (one data file);
  restore_v2          TensorFlow's write; the read is one `RestoreV2` op of
                      every value, nothing assigned: the op any read runs,
                      alone, the floor of a read through `RestoreV2`. The
                      kernel reads each value of more than 16M elements
                      (64 MiB of float32) on its own pool of eight
                      threads, the smaller ones one after the other on
                      one thread;
  tf_objckpt          `tf_objckpt.Checkpoint`, default options;
  *_parallel          with `CheckpointOptions(experimental_sharding_callback=
                      tf_objckpt.ParallelShardsPolicy())`: one file per
                      core (TensorFlow writes our policy's files too);
  *_max_size          with TensorFlow's `MaxShardSizePolicy`, into
                      `--shards` files;
  *_graph_max_size    the same with `CheckpointV1` in a `tf.compat.v1`
                      session (the session runs independent ops at once);
  *_saver_sharded     the v1 `Saver(sharded=True)` in a session with two CPU
                      devices, the variables alternating between them (one
                      file per device).

Reads restore into existing variables (zeros), from the page cache (the
file was just written). The cases take turns, each round in a new order;
each figure is the median of `--repeats` fresh processes, with the range
(fastest to slowest). Ratios divide TensorFlow's default time by the
case's: above 1 is faster than TensorFlow's one-file checkpoint. "Files
at once" is the most data files one more write had under their temporary
names at the same time (1: its shards were written one after the other).
"Peak MiB" is what the write and the read added to the process's peak
resident size (`VmHWM`), medians.

Each timed write and read first touches and frees twice the model's bytes
(`--recycle`): on a VM that returns freed memory to its host, as this
project's machines do, new memory costs the host's work on first touch,
and the page cache a write fills (or the values a read makes) would then
time the host, by several times either way from one process to the next.
`--norecycle` measures that too. The machine's load average is printed
before and after: on a loaded machine, threads wait for a core and the
ratios shrink.

With `--phases`, it then shows where the time of our one-file read goes,
in `--repeats` more fresh processes (each phase after the memory
recycling): `np.fromfile` of the data file (the copy from the page cache
into new memory); one `RestoreV2` op of every value (TensorFlow's kernel:
that copy, plus each value's checksum and allocation; on its pool of
readers for values over 16M elements, see `restore_v2`); the same split across our read threads
(`reads.eager_restore_v2`); assigning the values read to the variables
(TensorFlow hands a value nothing else holds to the variable, no copy);
and `read()` itself (one pass under the memory limit).

Run: python benchmarks/sharding_benchmark.py [--gib=1] [--variables=16]
     [--repeats=5] [--shards=4] [--cases=numpy,tensorflow,...]
     [--directory=/path/on/the/disk/to/measure] [--norecycle] [--phases]
"""

import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

from absl import app
from absl import flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fresh_process  # pylint: disable=g-import-not-at-top

_GIB = flags.DEFINE_float("gib", 1, "Size of the model in GiB.")
_VARIABLES = flags.DEFINE_integer("variables", 16, "Variables of the model.")
_REPEATS = flags.DEFINE_integer("repeats", 5,
                                "Fresh processes per write and read.")
_SHARDS = flags.DEFINE_integer("shards", 4,
                               "Files MaxShardSizePolicy splits into.")
_CASES = flags.DEFINE_list("cases", [
    "numpy", "numpy_parallel", "tensorflow", "restore_v2", "tf_objckpt",
    "tensorflow_parallel", "tf_objckpt_parallel", "tensorflow_max_size",
    "tf_objckpt_max_size", "tensorflow_graph_max_size",
    "tf_objckpt_graph_max_size", "tensorflow_saver_sharded",
    "tf_objckpt_saver_sharded"
], "Which layouts to time (see the module docstring).")
_DIRECTORY = flags.DEFINE_string("directory", None,
                                 "Where to write (default: a temporary one).")
_CONCURRENCY = flags.DEFINE_bool(
    "concurrency", True,
    "Also count, in one more write per case, the most data files being "
    "written at the same time (files under their temporary names).")
_RECYCLE = flags.DEFINE_bool(
    "recycle", True,
    "Before each timed write and read, touch and free twice the model's "
    "bytes of memory (`fresh_process.recycle_memory`), so that the page "
    "cache and values it fills are memory the VM's host has backed; "
    "--norecycle times them with the memory the process finds.")
_PHASES = flags.DEFINE_bool(
    "phases", False, "Also time the phases of our one-file read (see the "
    "module docstring).")
_CHILD = flags.DEFINE_string("child", None, "Internal: one timed operation.")


def _elements():
  return int(_GIB.value * (1 << 30)) // 4 // _VARIABLES.value


def _timed(fn):
  """Seconds `fn()` takes and the bytes it adds to the peak (see --recycle)."""
  if _RECYCLE.value:
    fresh_process.recycle_memory(2 * _elements() * 4 * _VARIABLES.value)
  return fresh_process.timed_with_peak(fn)


def _variable_values(index):
  """The values written into variable `index`: random, distinct per page."""
  return np.random.default_rng(index).random(_elements(), np.float32)


def _first_value(index):
  return np.random.default_rng(index).random(1, np.float32)[0]


# Children -----------------------------------------------------------------


def _numpy_case(request, parallel):
  """`.tofile` or `np.fromfile`: the variables' bytes, one thread a file.

  One file, or one per core, each holding consecutive variables.
  """
  count = len(os.sched_getaffinity(0)) if parallel else 1
  paths = [f"{request['prefix']}.{index}" for index in range(count)]
  groups = np.array_split(np.arange(_VARIABLES.value), count)
  if request["op"] == "write":
    values = [[_variable_values(index) for index in group] for group in groups]
    fresh_process.clear(request["prefix"])

    def write(path, parts):
      with open(path, "wb") as f:
        for part in parts:
          part.tofile(f)

    work = [
        lambda path=path, parts=parts: write(path, parts)
        for path, parts in zip(paths, values)
    ]
  else:
    work = [lambda path=path: np.fromfile(path, np.float32) for path in paths]
  threads = [threading.Thread(target=item) for item in work]

  def run_threads():
    for thread in threads:
      thread.start()
    for thread in threads:
      thread.join()

  return _timed(run_threads)


def _options(tf, tf_objckpt, policy):
  if policy == "parallel":
    callback = tf_objckpt.ParallelShardsPolicy()
  elif policy == "max_size":
    callback = tf.train.experimental.MaxShardSizePolicy(
        -(-_elements() * 4 * _VARIABLES.value // _SHARDS.value))
  else:
    return None
  return tf.train.CheckpointOptions(experimental_sharding_callback=callback)


def _eager_case(request, library, policy):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_objckpt  # pylint: disable=g-import-not-at-top
  checkpoint_class = (tf_objckpt.Checkpoint
                      if library == "tf_objckpt" else tf.train.Checkpoint)
  options = _options(tf, tf_objckpt, policy)
  if request["op"] == "write":
    variables = [
        tf.Variable(_variable_values(index))
        for index in range(_VARIABLES.value)
    ]
  else:
    variables = [
        tf.Variable(tf.zeros([_elements()])) for _ in range(_VARIABLES.value)
    ]
  checkpoint = checkpoint_class(v=variables)
  if request["op"] == "write":
    fresh_process.clear(request["prefix"])
    return _timed(lambda: checkpoint.write(request["prefix"], options=options))
  measured = _timed(lambda: checkpoint.read(request["prefix"], options=options))
  _check_restored(variables[-1].numpy())
  return measured


def _restore_v2_case(request):
  """TensorFlow's write, or one `RestoreV2` of every value it wrote."""
  if request["op"] == "write":
    return _eager_case(request, "tensorflow", None)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow.python.ops import io_ops  # pylint: disable=g-import-not-at-top
  count = _VARIABLES.value
  values = []
  measured = _timed(lambda: values.extend(
      io_ops.restore_v2(request["prefix"], _keys(), [""] * count, [tf.float32] *
                        count)))
  _check_restored(values[-1].numpy())
  return measured


def _keys():
  """The checkpoint keys of the variables (`Checkpoint(v=variables)`)."""
  return [
      f"v/{index}/.ATTRIBUTES/VARIABLE_VALUE"
      for index in range(_VARIABLES.value)
  ]


def _check_restored(last_variable_value):
  if last_variable_value[0] != _first_value(_VARIABLES.value - 1):
    raise AssertionError("The restore did not restore the values.")


def _graph_case(request, library, policy):
  """`CheckpointV1` (policy "max_size") or the v1 `Saver(sharded=True)`."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_objckpt  # pylint: disable=g-import-not-at-top
  writing = request["op"] == "write"
  saver_sharded = policy == "saver_sharded"
  config = tf.compat.v1.ConfigProto(
      device_count={"CPU": 2 if saver_sharded else 1})
  with tf.Graph().as_default(), tf.compat.v1.Session(config=config) as session:
    variables = []
    for index in range(_VARIABLES.value):
      with tf.device(f"/cpu:{index % 2}" if saver_sharded else "/cpu:0"):
        variables.append(
            tf.compat.v1.get_variable(f"v{index}", [_elements()],
                                      initializer=tf.zeros_initializer()))
    session.run(tf.compat.v1.global_variables_initializer())
    if writing:
      for index, variable in enumerate(variables):
        variable.load(_variable_values(index), session)
    if saver_sharded:
      saver_class = (tf_objckpt.Saver
                     if library == "tf_objckpt" else tf.compat.v1.train.Saver)
      saver = saver_class(variables, sharded=True)
      if writing:
        fresh_process.clear(request["prefix"])
        measured = _timed(lambda: saver.save(
            session, request["prefix"], write_meta_graph=False))
      else:
        measured = _timed(lambda: saver.restore(session, request["prefix"]))
    else:
      checkpoint_class = (tf_objckpt.CheckpointV1 if library == "tf_objckpt"
                          else tf.compat.v1.train.Checkpoint)
      checkpoint = checkpoint_class(v=variables)
      options = _options(tf, tf_objckpt, "max_size")
      if writing:
        fresh_process.clear(request["prefix"])
        measured = _timed(lambda: checkpoint.write(
            request["prefix"], session=session, options=options))
      else:
        measured = _timed(lambda: checkpoint.restore(request["prefix"]).
                          run_restore_ops(session))
    if not writing:
      _check_restored(session.run(variables[-1]))
  return measured


class _ConcurrencyWatch:
  """Counts the most files of a directory being written at the same time.

  SaveV2 writes each data file under a temporary name (`.tempstate`) and
  renames it when complete; a thread polls for such names.
  """

  def __init__(self, directory):
    self._directory = directory
    self._stop = threading.Event()
    self.most = 0
    self._thread = threading.Thread(target=self._poll, daemon=True)
    self._thread.start()

  def _poll(self):
    while not self._stop.is_set():
      writing = sum(".tempstate" in name
                    for _, _, names in os.walk(self._directory)
                    for name in names
                    if ".data-" in name)
      self.most = max(self.most, writing)
      time.sleep(0.0005)

  def stop(self):
    self._stop.set()
    self._thread.join()
    return self.most


def _phases_child(request):
  """Seconds of each phase of a one-file read (module docstring)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow.python.ops import gen_resource_variable_ops  # pylint: disable=g-import-not-at-top
  from tensorflow.python.ops import io_ops  # pylint: disable=g-import-not-at-top
  import tf_objckpt  # pylint: disable=g-import-not-at-top
  from tf_objckpt.engine import reads  # pylint: disable=g-import-not-at-top
  prefix = request["prefix"]
  count = _VARIABLES.value
  variables = [tf.Variable(tf.zeros([_elements()])) for _ in range(count)]
  keys = _keys()
  size = _elements() * 4
  phases = {}
  phases["np.fromfile"], _ = _timed(
      lambda: np.fromfile(prefix + ".data-00000-of-00001", np.uint8))
  values = []
  phases["RestoreV2, one op"], _ = _timed(lambda: values.extend(
      io_ops.restore_v2(prefix, keys, [""] * count, [tf.float32] * count)))

  def assign():
    for variable, value in zip(variables, values):
      gen_resource_variable_ops.assign_variable_op(variable.handle, value)

  phases["assign"] = fresh_process.timed(assign)
  del values[:]
  phases["RestoreV2, our threads"], _ = _timed(lambda: reads.eager_restore_v2(
      tf.constant(prefix), keys, [""] * count, [tf.float32] * count, [size] *
      count, "/cpu:0"))
  phases["read()"], _ = _timed(
      lambda: tf_objckpt.Checkpoint(v=variables).read(prefix))
  _check_restored(variables[-1].numpy())
  return phases


def _run_child(request):
  """Seconds of one write or read and the bytes it added to the peak
  memory; or, for "watch", the most data files written at once by a
  write."""
  if request.get("phases"):
    return _phases_child(request)
  if request.get("watch"):
    watch = _ConcurrencyWatch(os.path.dirname(request["prefix"]))
    _run_case(request)
    return {"files": watch.stop()}
  seconds, peak_bytes = _run_case(request)
  return {"seconds": seconds, "peak_mib": peak_bytes / (1 << 20)}


def _run_case(request):
  case = request["case"]
  if case.startswith("numpy"):
    return _numpy_case(request, parallel=case == "numpy_parallel")
  if case == "restore_v2":
    return _restore_v2_case(request)
  library = "tf_objckpt" if case.startswith("tf_objckpt") else "tensorflow"
  layout = case[len(library) + 1:]  # "", "parallel", "max_size", ...
  if layout in ("graph_max_size", "saver_sharded"):
    return _graph_case(request, library, layout)
  return _eager_case(request, library, layout or None)


# Parent -------------------------------------------------------------------


def _measure(directory):
  """`{case: {op: [results...]}}`, each in a fresh process.

  A result is a child's `{"seconds": ..., "peak_mib": ...}`.
  """
  cases = list(_CASES.value)
  times = {case: {"write": [], "read": []} for case in cases}
  for round_index in range(_REPEATS.value):
    shift = round_index % len(cases)
    for case in cases[shift:] + cases[:shift]:
      prefix = os.path.join(directory, case, "ckpt")
      os.makedirs(os.path.dirname(prefix), exist_ok=True)
      for op in ("write", "read"):
        times[case][op].append(
            fresh_process.run_child(__file__,
                                    _flags(),
                                    case=case,
                                    op=op,
                                    prefix=prefix))
      shutil.rmtree(os.path.dirname(prefix))
  return times


def _concurrency(directory):
  """`{case: most data files written at once}` (checkpoint cases)."""
  found = {}
  for case in _CASES.value:
    if case.startswith("numpy") or case == "restore_v2":
      continue
    prefix = os.path.join(directory, case, "ckpt")
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    found[case] = fresh_process.run_child(__file__,
                                          _flags(),
                                          case=case,
                                          op="write",
                                          prefix=prefix,
                                          watch=True)["files"]
    shutil.rmtree(os.path.dirname(prefix))
  return found


def _phases(directory):
  """`{phase: [seconds...]}` of our one-file read, fresh processes."""
  phases = {}
  prefix = os.path.join(directory, "phases", "ckpt")
  os.makedirs(os.path.dirname(prefix), exist_ok=True)
  fresh_process.run_child(__file__,
                          _flags(),
                          case="tf_objckpt",
                          op="write",
                          prefix=prefix)
  for _ in range(_REPEATS.value):
    measured = fresh_process.run_child(__file__,
                                       _flags(),
                                       phases=True,
                                       prefix=prefix)
    for phase, seconds in measured.items():
      phases.setdefault(phase, []).append(seconds)
  shutil.rmtree(os.path.dirname(prefix))
  return phases


def _report_phases(phases):
  print(f"Where our one-file read of {_GIB.value:g} GiB goes, median "
        f"[fastest-slowest] of {_REPEATS.value} fresh processes, load "
        f"average {os.getloadavg()[0]:.2f}:")
  for phase, values in phases.items():
    print(
        f"  {phase:<24} {statistics.median(values):7.3f} s "
        f"[{min(values):.3f}-{max(values):.3f}]",
        flush=True)


def _flags():
  return [
      f"--gib={_GIB.value}", f"--variables={_VARIABLES.value}",
      f"--shards={_SHARDS.value}", f"--recycle={_RECYCLE.value}"
  ]


def _seconds(results):
  return [result["seconds"] for result in results]


def _report(times, loads, concurrency):
  baseline = ({
      op: statistics.median(_seconds(times["tensorflow"][op]))
      for op in ("write", "read")
  } if "tensorflow" in times else None)
  print(f"{_GIB.value:g} GiB in {_VARIABLES.value} float32 variables, "
        f"{len(os.sched_getaffinity(0))} cores, MaxShardSizePolicy into "
        f"{_SHARDS.value} files; median [fastest-slowest] of "
        f"{_REPEATS.value} fresh processes; load average "
        f"{loads[0]:.2f} before, {loads[1]:.2f} after; peak: MiB the "
        f"write / read added to the peak resident size (median)")
  print(f"{'case':<28}{'write s':>24}{'read s':>24}"
        f"{'TF default / this':>22}{'peak MiB':>14}{'files at once':>15}")
  for case, by_op in times.items():
    cells, ratios, peaks = [], [], []
    for op in ("write", "read"):
      values = _seconds(by_op[op])
      median = statistics.median(values)
      cells.append(f"{median:7.3f} [{min(values):.3f}-{max(values):.3f}]")
      peaks.append(f"{statistics.median(r['peak_mib'] for r in by_op[op]):.0f}")
      if baseline:
        ratios.append(f"{baseline[op] / median:5.2f}x")
    print(
        f"{case:<28}{cells[0]:>24}{cells[1]:>24}"
        f"{'  '.join(ratios):>22}{' / '.join(peaks):>14}"
        f"{concurrency.get(case, ''):>15}",
        flush=True)


def main(_):
  if _CHILD.value:
    fresh_process.emit(_run_child(json.loads(_CHILD.value)))
    return
  before = os.getloadavg()[0]
  with tempfile.TemporaryDirectory(dir=_DIRECTORY.value) as directory:
    times = _measure(directory)
    concurrency = _concurrency(directory) if _CONCURRENCY.value else {}
    _report(times, (before, os.getloadavg()[0]), concurrency)
    if _PHASES.value:
      _report_phases(_phases(directory))


if __name__ == "__main__":
  app.run(main)
