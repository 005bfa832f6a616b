"""Restores hold a few pieces of values, whatever the allocator did before.

Checks `engine.resident_memory` (the budget that has the allocator give
back what a restore freed), `engine.reads.CheckpointValues.
restore_in_pieces`, `engine.graph_restores.ReadChain` and the v1
`Saver`'s restore in runs (`v1.saver_builders`).

Each restore runs in a fresh process that first allocates and frees large
numpy arrays and TensorFlow tensors, which moves glibc's mmap threshold up,
as a training program's history does; tensors come from oneDNN's allocator
or, as on CPUs without oneDNN's operations, from glibc's. The peak memory
the restore adds is measured by `benchmarks/restore_memory_benchmark.py`'s
child, along every restore path: into existing variables, on creation,
`restore_or_initialize()`, graph-mode `CheckpointV1` and the v1 `Saver`.
Ours restores with `max_restore_memory=128 MiB` (the v1 `Saver`, which
takes no options, through `tuning.TUNING.default_max_restore_memory`).
TensorFlow, along the same paths, holds a second copy of the model. Last,
a restore of 2 GiB runs in a memory cgroup limited to the model plus
1 GiB, with no limit set: the automatic one sees the cgroup, and ours
completes; TensorFlow's is killed or fails.

Covers: tf_objckpt.engine.resident_memory, tf_objckpt.engine.reads,
tf_objckpt.engine.graph_restores, tf_objckpt.v1.saver_builders,
tf_objckpt.engine.restore_memory.
"""

import importlib.util
import os
import uuid

import pytest

import testlib as tl
from tf_objckpt.engine import tuning

_PIECE_MIB = tuning.TUNING.restore_piece_bytes >> 20
_LIMIT = 2 * tuning.TUNING.restore_piece_bytes  # max_restore_memory.
_CGROUP_ROOT = "/sys/fs/cgroup/memory"


def _load_benchmark():
  path = os.path.join(tl.REPO_ROOT, "benchmarks", "restore_memory_benchmark.py")
  spec = importlib.util.spec_from_file_location("restore_memory_benchmark",
                                                path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


_BENCHMARK = _load_benchmark()


def _added_mib(tmp_path, impl, path, gib, onednn, variable_mib=16, wrapper=()):
  """MiB a restore along `path` adds to the peak; asserts it restored."""
  completed, result = _BENCHMARK.measure(
      impl,
      path,
      gib,
      str(tmp_path),
      extra_env=tl.child_env(TF_ENABLE_ONEDNN_OPTS=onednn),
      wrapper=wrapper,
      variable_mib=variable_mib,
      max_restore_memory=_LIMIT if impl == "tf_objckpt" else None)
  assert result is not None, completed.stderr[-3000:]
  assert result["restored"], result
  return result["added_mib"]


# With oneDNN's operations ("1", TensorFlow's default on CPUs with the
# instructions they need), tensors come from oneDNN's allocator; without
# ("0"), from glibc's, whose threshold the child's history has raised.
_ALLOCATORS = {"onednn": "1", "glibc": "0"}
# Eager paths: the bound of each, in pieces. Restore-on-create adds the
# variables it creates, the model, too.
_EAGER_BOUNDS = {"read": 3, "on_create": 3, "restore_or_initialize": 4.5}


@pytest.mark.parametrize("allocator", sorted(_ALLOCATORS))
@pytest.mark.parametrize("path", sorted(_EAGER_BOUNDS))
def test_eager_restores_hold_a_few_pieces_after_large_blocks_were_freed(
    tmp_path, path, allocator):
  """Variables of 16 MiB, a size glibc serves from its heaps here."""
  gib = 0.5
  model_mib = gib * 1024 if path == "on_create" else 0
  added = _added_mib(tmp_path, "tf_objckpt", path, gib, _ALLOCATORS[allocator])
  assert added < model_mib + _EAGER_BOUNDS[path] * _PIECE_MIB, added


@pytest.mark.parametrize("path", ["graph", "saver"])
@pytest.mark.parametrize("gib", [0.5, 1])
def test_graph_restores_hold_a_few_pieces(tmp_path, path, gib):
  """8 variables of 64 MiB are read by `RestoreV2`s, 16 by function calls.

  The session runs 16 ops at once. (With glibc's allocator, what a
  session's threads free within one `Session.run` stays with glibc: see
  API.md.)
  """
  added = _added_mib(tmp_path,
                     "tf_objckpt",
                     path,
                     gib,
                     _ALLOCATORS["onednn"],
                     variable_mib=64)
  assert added < 3 * _PIECE_MIB, added


@pytest.mark.parametrize("path", ["read", "saver"])
def test_tensorflow_holds_a_second_copy_of_the_model(tmp_path, path):
  """The same measurement of TensorFlow's restores exceeds the bounds."""
  added = _added_mib(tmp_path, "tensorflow", path, 0.5, _ALLOCATORS["onednn"])
  assert added > 400, added


def _writable_memory_cgroup():
  """A new memory cgroup's directory, or a reason why none can be made."""
  if not os.path.isdir(_CGROUP_ROOT):
    return None, f"no cgroup v1 memory controller at {_CGROUP_ROOT}"
  path = os.path.join(_CGROUP_ROOT, f"tf_objckpt_test_{uuid.uuid4().hex}")
  try:
    os.mkdir(path)
  except OSError as e:
    return None, f"cannot make a memory cgroup under {_CGROUP_ROOT}: {e}"
  return path, None


@pytest.fixture(name="memory_cgroup")
def _memory_cgroup():
  """Makes a memory cgroup (skips if impossible); removes it afterwards."""
  path, reason = _writable_memory_cgroup()
  if path is None:
    pytest.skip(reason)
  yield path
  os.rmdir(path)


def test_a_model_larger_than_the_free_memory_restores(tmp_path, memory_cgroup):
  """2 GiB restore within a limit of the model plus 1 GiB.

  The restoring process joins the cgroup before it starts Python; the
  limit counts the Python and TensorFlow runtime too (about 0.6 GiB).
  """
  gib = 2
  with open(os.path.join(memory_cgroup, "memory.limit_in_bytes"), "w") as f:
    f.write(str((gib + 1) << 30))
  wrapper = ("sh", "-c", f'echo $$ > {memory_cgroup}/cgroup.procs && exec "$@"',
             "sh")
  for impl in ("tf_objckpt", "tensorflow"):
    completed, result = _BENCHMARK.measure(impl,
                                           "read",
                                           gib,
                                           str(tmp_path / impl),
                                           extra_env=tl.child_env(),
                                           wrapper=wrapper)
    if impl == "tf_objckpt":
      assert completed.returncode == 0, completed.stderr[-3000:]
      assert result["restored"], result
    else:
      assert completed.returncode != 0, result  # Killed, or out of memory.
