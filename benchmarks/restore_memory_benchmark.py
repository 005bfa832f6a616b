"""Peak resident memory added by restores, ours vs TensorFlow's.

Each figure comes from a fresh process. It first allocates and frees a few
large numpy arrays and TensorFlow tensors, as a training program does
before it restores: glibc then serves later large blocks from heaps it
keeps rather than from fresh mappings, which decides whether a restore's
freed memory is given back. Then it builds the program's variables,
resets its peak resident size (`echo 5 > /proc/self/clear_refs`), restores
once and reports the peak minus the resident size before the restore: the
memory the restore itself added. The variables are float32, 64 MiB each
(`--variable_mib`).

Restore paths (`--paths`):
- `read`: `Checkpoint.read` into existing variables (eager);
- `on_create`: `Checkpoint.read`, then the variables are created with
  `add_variable` and take their checkpointed values as initial values;
- `restore_or_initialize`: `CheckpointManager.restore_or_initialize()`,
  which reads every value before restoring;
- `graph`: `CheckpointV1.restore(...).run_restore_ops()` in a session;
- `saver`: the v1 name-based `Saver.restore` in a session.

Ours restores with the automatic memory limit, or, with
`--max_restore_memory=BYTES`, with that limit: passed as
`CheckpointOptions(max_restore_memory=...)` on every path that takes
options, and set as `tuning.TUNING.default_max_restore_memory` for the v1
`Saver`, which takes none.

The same child measures the bounds in
`tests/reliability/restore_memory_test.py`.

Run: python benchmarks/restore_memory_benchmark.py [--gib=1,2,4]
     [--paths=read,on_create,restore_or_initialize,graph,saver]
     [--repeats=1] [--variable_mib=64] [--max_restore_memory=BYTES]
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fresh_process  # pylint: disable=g-import-not-at-top

_GIB = flags.DEFINE_list("gib", ["1", "2", "4"], "Model sizes, in GiB.")
_PATHS = flags.DEFINE_list(
    "paths", ["read", "on_create", "restore_or_initialize", "graph", "saver"],
    "Restore paths to measure.")
_REPEATS = flags.DEFINE_integer("repeats", 1, "Processes per figure.")
_VARIABLE_MIB = flags.DEFINE_integer("variable_mib", 64,
                                     "The size of each variable, in MiB.")
_ONEDNN = flags.DEFINE_enum(
    "onednn", "default", ["default", "on", "off"],
    "TensorFlow's oneDNN operations (TF_ENABLE_ONEDNN_OPTS), which bring "
    "an allocator of their own that keeps what it frees.")
_MAX_RESTORE_MEMORY = flags.DEFINE_integer(
    "max_restore_memory", None,
    "Our restores' memory limit, in bytes (default: automatic).")
_DIRECTORY = flags.DEFINE_string("directory", None,
                                 "Where to save (default: a temporary one).")
_CHILD = flags.DEFINE_string("child", None,
                             "Internal: a JSON request run in this process.")

_IMPLS = ("tensorflow", "tf_objckpt")
_RESULT_PREFIX = "restore_memory result: "


def _allocate_and_free_large_blocks():
  """What a program allocates before it restores: large blocks, freed."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  for mib in (64, 32, 24, 64):
    block = np.ones(mib << 20, np.uint8)
    del block
    tensor = tf.ones([mib << 18])
    del tensor


class _Program:
  """The variables of one restore path, and the restore to measure."""

  def __init__(self, request):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    import tf_objckpt  # pylint: disable=g-import-not-at-top
    self.tf = tf
    self.ours = request["impl"] == "tf_objckpt"
    self.lib = tf_objckpt if self.ours else None
    self.count = request["count"]
    self.elements = request["variable_mib"] << 18  # float32
    self.prefix = request["prefix"]
    self.directory = os.path.dirname(self.prefix)
    limit = request.get("max_restore_memory")
    self.options = None
    if self.ours and limit is not None:
      self.options = tf_objckpt.CheckpointOptions(max_restore_memory=limit)
      from tf_objckpt.engine import tuning  # pylint: disable=g-import-not-at-top
      tuning.TUNING.default_max_restore_memory = limit  # The v1 `Saver`.

  def options_argument(self):
    """`{"options": ...}` for our restores with a limit; else nothing."""
    return {} if self.options is None else {"options": self.options}

  def checkpoint_class(self, v1=False):
    tf = self.tf
    if self.ours:
      return self.lib.CheckpointV1 if v1 else self.lib.Checkpoint
    return tf.compat.v1.train.Checkpoint if v1 else tf.train.Checkpoint

  def manager_class(self):
    return (self.lib.CheckpointManager
            if self.ours else self.tf.train.CheckpointManager)

  def saver_class(self):
    return self.lib.Saver if self.ours else self.tf.compat.v1.train.Saver

  def add_variable(self, root, name, fill):
    if self.ours:
      add = self.lib.add_variable
    else:
      from tensorflow.python.checkpoint import checkpoint  # pylint: disable=g-import-not-at-top
      add = checkpoint.add_variable
    return add(root,
               name=name,
               shape=[self.elements],
               initializer=self.tf.constant_initializer(fill))

  def module(self, fill=None):
    """A module of variables holding `fill`, or random values below 1.

    Random values, as a model starts with: graph mode may fold a filled
    initial value into a constant that variables share until assigned.
    """
    tf = self.tf
    module = tf.Module()
    module.weights = [
        tf.Variable(
            tf.random.uniform([self.elements]) if fill is
            None else tf.fill([self.elements], fill)) for _ in range(self.count)
    ]
    return module


def _write(program, path):
  """Writes the checkpoint `path` restores, with values 1."""
  tf = program.tf
  if path == "on_create":
    root = tf.Module()
    for index in range(program.count):
      program.add_variable(root, f"w{index}", 1.)
    program.checkpoint_class()(root=root).write(program.prefix)
  elif path == "restore_or_initialize":
    program.manager_class()(
        program.checkpoint_class()(module=program.module(1.)),
        program.directory,
        max_to_keep=1).save()
  elif path in ("graph", "saver"):
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
      module = program.module(1.)
      session.run([weight.initializer for weight in module.weights])
      if path == "graph":
        program.checkpoint_class(v1=True)(module=module).write(program.prefix,
                                                               session=session)
      else:
        program.saver_class()(module.weights).save(session, program.prefix)
  else:
    program.checkpoint_class()(module=program.module(1.)).write(program.prefix)


def _restore_eagerly(program, path):
  """Restores along eager `path`; returns (peak bytes added, first value)."""
  tf = program.tf
  if path == "on_create":
    root = tf.Module()
    before = fresh_process.reset_peak_memory()
    status = program.checkpoint_class()(root=root).read(
        program.prefix, **program.options_argument())
    weights = [
        program.add_variable(root, f"w{index}", 0.)
        for index in range(program.count)
    ]
    status.assert_consumed()
  else:
    module = program.module()
    checkpoint = program.checkpoint_class()(module=module)
    before = fresh_process.reset_peak_memory()
    if path == "read":
      checkpoint.read(program.prefix,
                      **program.options_argument()).assert_consumed()
    else:
      program.manager_class()(
          checkpoint, program.directory,
          max_to_keep=1).restore_or_initialize(**program.options_argument())
    weights = module.weights
  added = fresh_process.peak_memory_added(before)
  return added, [float(weight[-1]) for weight in weights]


def _restore_in_session(program, path):
  """Restores along graph `path`; returns (peak bytes added, values).

  The session runs up to 16 ops at once, as on a machine of 16 cores, so
  that reads not ordered by the restore run together.
  """
  tf = program.tf
  config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=16)
  with tf.Graph().as_default(), tf.compat.v1.Session(config=config) as session:
    module = program.module()
    session.run([weight.initializer for weight in module.weights])
    if path == "graph":
      status = program.checkpoint_class(v1=True)(module=module).restore(
          program.prefix, **program.options_argument())
      before = fresh_process.reset_peak_memory()
      status.run_restore_ops(session)
    else:
      saver = program.saver_class()(module.weights)
      before = fresh_process.reset_peak_memory()
      saver.restore(session, program.prefix)
    added = fresh_process.peak_memory_added(before)
    return added, [
        float(value)
        for value in session.run([weight[-1] for weight in module.weights])
    ]


def _run_child(request):
  """Writes (`mode` "write") or restores once and prints what it measured."""
  program = _Program(request)
  path = request["path"]
  if request["mode"] == "write":
    _write(program, path)
    return
  _allocate_and_free_large_blocks()
  restore = _restore_in_session if path in ("graph",
                                            "saver") else (_restore_eagerly)
  added, values = restore(program, path)
  print(_RESULT_PREFIX + json.dumps({
      "added_mib": added / (1 << 20),
      "restored": values == [1.] * len(values)
  }),
        flush=True)


def measure(impl,
            path,
            gib,
            directory,
            extra_env=None,
            wrapper=(),
            variable_mib=64,
            max_restore_memory=None):
  """Writes a `gib` GiB checkpoint, restores it along `path` in a new process.

  Args:
    impl: "tensorflow" or "tf_objckpt", the library that restores (ours
      writes).
    path: One of the restore paths in the module docstring.
    gib: The size of the model, in GiB (a multiple of 1/16).
    directory: A directory for the checkpoint (made if missing).
    extra_env: Environment variables for both processes.
    wrapper: A command line that the restoring process's command line is
      appended to (for example, to start it in a memory cgroup).
    variable_mib: The size of each variable, in MiB.
    max_restore_memory: Our restores' memory limit, in bytes; None for the
      automatic one.

  Returns:
    The restoring process's `CompletedProcess`, and its result, a dict with
    `added_mib` and `restored` (whether every value arrived), or None if it
    printed none.
  """
  os.makedirs(directory, exist_ok=True)
  request = {
      "impl": "tf_objckpt",
      "path": path,
      "count": round(gib * 1024 / variable_mib),
      "variable_mib": variable_mib,
      "prefix": os.path.join(directory, "ckpt"),
      "max_restore_memory": max_restore_memory,
  }
  written = _child_process({**request, "mode": "write"}, extra_env)
  if written.returncode:
    raise RuntimeError(f"Writing for {path} failed:\n{written.stderr}")
  completed = _child_process({
      **request, "impl": impl,
      "mode": "restore"
  }, extra_env, wrapper)
  results = [
      json.loads(line[len(_RESULT_PREFIX):])
      for line in completed.stdout.splitlines()
      if line.startswith(_RESULT_PREFIX)
  ]
  return completed, (results[-1] if results else None)


def _child_process(request, extra_env=None, wrapper=()):
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(extra_env or {})}
  return subprocess.run([
      *wrapper, sys.executable,
      os.path.abspath(__file__), "--child=" + json.dumps(request)
  ],
                        capture_output=True,
                        text=True,
                        env=env,
                        check=False)


def _added_mib(impl, path, gib):
  extra_env = {}
  if _ONEDNN.value != "default":
    extra_env["TF_ENABLE_ONEDNN_OPTS"] = "1" if _ONEDNN.value == "on" else "0"
  with tempfile.TemporaryDirectory(dir=_DIRECTORY.value) as directory:
    completed, result = measure(impl,
                                path,
                                gib,
                                directory,
                                extra_env,
                                variable_mib=_VARIABLE_MIB.value,
                                max_restore_memory=_MAX_RESTORE_MEMORY.value)
  if result is None or not result["restored"]:
    raise RuntimeError(f"{impl} {path} {gib} GiB failed:\n"
                       f"{completed.stderr[-3000:]}")
  return result["added_mib"]


def main(_):
  if _CHILD.value:
    _run_child(json.loads(_CHILD.value))
    return
  print(f"Peak resident memory a restore adds (MiB), median of "
        f"{_REPEATS.value} fresh process(es) each, after large blocks were "
        f"allocated and freed; variables of {_VARIABLE_MIB.value} MiB, "
        f"oneDNN {_ONEDNN.value}, our limit "
        f"{_MAX_RESTORE_MEMORY.value or 'automatic'}:")
  print(f"{'path':<22} {'model':>6} {'tensorflow':>11} {'tf_objckpt':>11}"
        f"  all (tensorflow; tf_objckpt)")
  for path in _PATHS.value:
    for gib in map(float, _GIB.value):
      measured = {
          impl: [_added_mib(impl, path, gib) for _ in range(_REPEATS.value)]
          for impl in _IMPLS
      }
      medians = {
          impl: statistics.median(values) for impl, values in measured.items()
      }
      spread = "; ".join(" ".join(f"{value:.0f}"
                                  for value in measured[impl])
                         for impl in _IMPLS)
      print(
          f"{path:<22} {gib:>4g}GiB {medians['tensorflow']:>11.0f} "
          f"{medians['tf_objckpt']:>11.0f}  {spread}",
          flush=True)


if __name__ == "__main__":
  app.run(main)
