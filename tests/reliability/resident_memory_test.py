"""The piece budget has glibc give back the memory it keeps after frees.

In a fresh process, freeing a 24 MiB block raises glibc's mmap threshold, so
that 128 blocks of 1 MiB come from its heap; a small block allocated after them
pins the heap's top, so that freeing them gives nothing back: the process keeps
128 MiB it does not use, as a restore's freed pieces can be kept. A
`PieceBudget` of 16 MiB gives them back; one of 256 MiB leaves them, since it
was not exceeded.

Covers: tf_objckpt.engine.resident_memory.
"""

import json

import testlib as tl

_KEPT_SCRIPT = """
import json
import sys
import numpy as np
from tf_objckpt.engine import resident_memory

allowance_mib = int(sys.argv[1])


def mib():
  return resident_memory.resident_bytes() / (1 << 20)


budget = resident_memory.PieceBudget(allowance_mib << 20)
start = mib()
block = np.ones(24 << 20, np.uint8)
del block
blocks = [np.ones(1 << 20, np.uint8) for _ in range(128)]
pin = bytearray(256 << 10)
del blocks
kept = mib() - start
budget.piece_freed()
print(json.dumps({"kept": kept, "after_budget": mib() - start}))
"""


def _kept_and_after_budget(allowance_mib):
  completed = tl.run_python(_KEPT_SCRIPT, allowance_mib)
  assert completed.returncode == 0, completed.stderr[-2000:]
  result = json.loads(completed.stdout.splitlines()[-1])
  return result["kept"], result["after_budget"]


def test_an_exceeded_budget_gives_kept_memory_back():
  kept, after_budget = _kept_and_after_budget(16)
  assert kept > 100, kept  # The allocator kept what was freed.
  assert after_budget < 16, after_budget


def test_a_budget_not_exceeded_leaves_the_allocator_alone():
  kept, after_budget = _kept_and_after_budget(256)
  assert kept > 100, kept
  assert after_budget > 100, after_budget
