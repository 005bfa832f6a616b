"""Peak resident memory added by a save of 1 GiB of variables, vs TensorFlow.

Each measurement runs in a fresh process: it creates the variables (float32,
random), resets the peak resident set size (`echo 5 > clear_refs`), saves
once with `Checkpoint.save()` and reads the peak (`VmHWM` in
`/proc/self/status`). The figure is the peak minus the resident size before
the save: the memory the save itself added. Modes:

- `sync`: a synchronous save;
- `async`: `CheckpointOptions(experimental_enable_async_checkpoint=True)`,
  then `sync()`;
- `async+assign`: the same, assigning every variable while the write runs,
  as training would (ours then keeps the values it is writing; TensorFlow
  keeps its copies in any case).

Layouts: `4x256MiB` and `16384x64KiB` (1 GiB as 16,384 variables), to show
that the cost does not grow with the number of variables. Target: not above
TensorFlow's. Each figure is the median of `--repeats` processes.

Run: python benchmarks/memory_benchmark.py [--repeats=3]
     [--layouts=4x256MiB,16384x64KiB] [--modes=sync,async,async+assign]
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

from absl import app
from absl import flags

_REPEATS = flags.DEFINE_integer("repeats", 3, "Processes per figure.")
_LAYOUTS = flags.DEFINE_list("layouts", ["4x256MiB", "16384x64KiB"],
                             "COUNTxSIZE layouts of 1 GiB.")
_MODES = flags.DEFINE_list("modes", ["sync", "async", "async+assign"],
                           "How to save.")
_DIRECTORY = flags.DEFINE_string("directory", None,
                                 "Where to save (default: a temporary one).")

_IMPLS = ("tensorflow", "tf_objckpt")

# Runs in the child: argv = impl, mode, count, elements, prefix.
_CHILD = r"""
import gc, json, sys
import tensorflow as tf
import tf_objckpt

impl, mode, count, elements, prefix = sys.argv[1:]
count, elements = int(count), int(elements)


def status(field):
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith(field + ":"):
        return int(line.split()[1]) * 1024


variables = [tf.Variable(tf.random.uniform([elements])) for _ in range(count)]
lib = tf.train if impl == "tensorflow" else tf_objckpt
checkpoint = lib.Checkpoint(v=variables)
options = None
if mode.startswith("async"):
  options = tf.train.CheckpointOptions(experimental_enable_async_checkpoint=True)
gc.collect()
with open("/proc/self/clear_refs", "w") as f:
  f.write("5")  # Resets VmHWM to the current resident size.
before = status("VmRSS")
checkpoint.save(prefix, options=options)
if mode == "async+assign":
  for variable in variables:
    variable.assign_add(tf.ones_like(variable))
checkpoint.sync()
print(json.dumps({"before": before, "peak": status("VmHWM")}))
"""


def _layout(name):
  """(variable count, float32 elements each) of a COUNTxSIZE layout."""
  count, size = name.split("x")
  units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
  number, unit = size[:-3], size[-3:]
  return int(count), int(number) * units[unit] // 4


def _measure(impl, mode, layout, directory):
  """Bytes the save added to the peak, in a fresh process."""
  count, elements = _layout(layout)
  with tempfile.TemporaryDirectory(dir=directory) as save_directory:
    result = subprocess.run([
        sys.executable, "-c", _CHILD, impl, mode,
        str(count),
        str(elements),
        os.path.join(save_directory, "ckpt")
    ],
                            capture_output=True,
                            text=True,
                            check=False,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  if result.returncode:
    raise RuntimeError(f"{impl} {mode} {layout} failed:\n{result.stderr}")
  measured = json.loads(result.stdout.strip().splitlines()[-1])
  return measured["peak"] - measured["before"]


def main(_):
  print(f"Peak resident memory added by one save of 1 GiB (MiB), medians of "
        f"{_REPEATS.value} fresh processes:")
  print(f"{'layout':<13} {'mode':<13} {'tensorflow':>11} {'tf_objckpt':>11}"
        f" {'ratio':>6}  all measurements (tensorflow; tf_objckpt)")
  for layout in _LAYOUTS.value:
    for mode in _MODES.value:
      measured = {
          impl: [
              _measure(impl, mode, layout, _DIRECTORY.value) / (1 << 20)
              for _ in range(_REPEATS.value)
          ] for impl in _IMPLS
      }
      added = {
          impl: statistics.median(values) for impl, values in measured.items()
      }
      ratio = added["tf_objckpt"] / max(added["tensorflow"], 1e-9)
      spread = "; ".join(" ".join(f"{value:.0f}"
                                  for value in measured[impl])
                         for impl in _IMPLS)
      print(
          f"{layout:<13} {mode:<13} {added['tensorflow']:>11.1f} "
          f"{added['tf_objckpt']:>11.1f} {ratio:>6.2f}  {spread}",
          flush=True)


if __name__ == "__main__":
  app.run(main)
