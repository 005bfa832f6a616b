"""Runs benchmark measurements in fresh processes and prints medians.

A job saves and restores once per process start, and TensorFlow builds a
kernel for each new op signature on first use, so "first" calls are timed
in a new process each: the parent runs the benchmark script again with
`--child=<json>`; the child times its calls and prints one result line.
Libraries alternate their order between repetitions, so that load on the
machine hits both alike.
"""

import compileall
import functools
import glob
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

_RESULT_PREFIX = "fresh_process result: "
LIBRARIES = ("tensorflow", "tf_objckpt")


def timed(fn):
  """Seconds `fn()` takes."""
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def _status_bytes(field):
  """A size from /proc/self/status (`VmRSS`, `VmHWM`), in bytes."""
  with open("/proc/self/status") as status:
    for line in status:
      if line.startswith(field + ":"):
        return int(line.split()[1]) * 1024
  raise KeyError(field)


def reset_peak_memory():
  """Makes the peak resident size (`VmHWM`) the current one; returns it."""
  with open("/proc/self/clear_refs", "w") as clear_refs:
    clear_refs.write("5")
  return _status_bytes("VmRSS")


def peak_memory_added(since):
  """Bytes the peak resident size rose above `since` (`reset_peak_memory`)."""
  return _status_bytes("VmHWM") - since


def timed_with_peak(fn):
  """Seconds `fn()` takes, and the bytes it added to the peak memory."""
  before = reset_peak_memory()
  seconds = timed(fn)
  return seconds, peak_memory_added(before)


def recycle_memory(byte_count):
  """Touches and frees `byte_count` bytes of new memory, just before a timing.

  Virtual machines that hand freed memory back to their host (free page
  reporting, as this project's CI machines do) make the next touch of that
  memory cost the host's work, 1 to 2 s a GiB here: a write's new page
  cache or a read's new values then take as long as the host makes them.
  Memory freed just now is still the guest's, and the kernel hands it out
  first, so after this the timed call costs what it costs on a machine
  that keeps its memory, whichever library makes it.
  """
  pages = np.ones(byte_count, np.uint8)
  del pages


def clear(*prefixes):
  """Removes the files of `prefixes` and flushes the disk, before a write.

  Each write is timed into a new checkpoint on a quiet disk: replacing an
  earlier round's files, or writing while the disk still flushes them,
  makes a write's time swing by several times (ext4 allocates a replaced
  file's blocks at once), whichever library writes.
  """
  for prefix in prefixes:
    for path in glob.glob(glob.escape(prefix) + "*"):
      if os.path.isfile(path):
        os.remove(path)
  os.sync()


def emit(result):
  """Prints a child's `{measurement: seconds}` for the parent."""
  print(_RESULT_PREFIX + json.dumps(result), flush=True)


def run_child(script, extra_args=(), **request):
  """Runs `script --child=<request>` in a new process; returns its result.

  The disk is flushed first, so that no earlier child's writes are still
  being written out while this one is timed. Other lines the child prints
  (a profile, say) are printed here.
  """
  _compile_tf_objckpt()
  os.sync()
  completed = subprocess.run(
      [sys.executable, script, *extra_args, "--child=" + json.dumps(request)],
      capture_output=True,
      text=True,
      check=False)
  result = None
  for line in completed.stdout.splitlines():
    if line.startswith(_RESULT_PREFIX):
      result = json.loads(line[len(_RESULT_PREFIX):])
    else:
      print(line)
  if result is None:
    raise RuntimeError(
        f"{script} {request} failed:\n{completed.stderr[-3000:]}")
  return result


@functools.lru_cache(maxsize=None)
def _compile_tf_objckpt():
  """Compiles tf_objckpt's modules to bytecode, once, as `pip install` does.

  TensorFlow's modules come compiled with it; ours, run from a checkout
  where PYTHONDONTWRITEBYTECODE is set (as on this project's machines),
  would otherwise be compiled again by every child on its first call
  (0.2 to 0.4 s of a first read), which no installed copy pays.
  """
  spec = importlib.util.find_spec("tf_objckpt")
  for directory in spec.submodule_search_locations or ():
    compileall.compile_dir(directory, quiet=1)


def repeated(repeats, measure):
  """`{library: {measurement: [seconds...]}}` over `repeats` rounds.

  `measure(library)` returns one round's `{measurement: seconds}`.
  """
  results = {library: {} for library in LIBRARIES}
  for round_index in range(repeats):
    order = LIBRARIES if round_index % 2 == 0 else LIBRARIES[::-1]
    for library in order:
      for name, seconds in measure(library).items():
        results[library].setdefault(name, []).append(seconds)
  return results


def print_medians(workload, results):
  """One line per measurement: both medians and TensorFlow's / ours."""
  theirs, ours = results["tensorflow"], results["tf_objckpt"]
  for name in ours:
    our_median = statistics.median(ours[name])
    if name not in theirs:
      print(f"{workload:>9} {name:<26} tf_objckpt {our_median:8.3f}s",
            flush=True)
      continue
    tf_median = statistics.median(theirs[name])
    print(
        f"{workload:>9} {name:<26} tensorflow {tf_median:8.3f}s  "
        f"tf_objckpt {our_median:8.3f}s  "
        f"speedup x{tf_median / our_median:6.2f}",
        flush=True)
