"""Keeps a restore's resident memory bounded whatever the allocator keeps.

A large restore reads a piece of values, assigns it and frees it before it
reads the next (`reads.CheckpointValues.restore_in_pieces`), so it should
hold one piece at a time. Whether freed pieces are reused is up to the
allocator, not to us. oneDNN's, which TensorFlow uses where its oneDNN
operations are on, keeps and reuses them. glibc's, used otherwise, serves
blocks above its mmap threshold from fresh mappings, unmapped on free; but
freeing one such block raises the threshold up to 32 MiB, and after that,
blocks of a piece come from heaps (one per thread that allocated) whose
free memory glibc keeps, and reuses only when a later block fits the same
heap. Depending on what the process allocated before, a restore then adds
the whole model to the peak, as TensorFlow's does.

`PieceBudget` measures instead of trusting: after each piece is freed it
reads the process's resident size (`/proc/self/statm`, a few
microseconds), and when that has grown by more than a piece since the
restore began, asks glibc to give its free memory back (`malloc_trim`),
which unmaps whole free pages in every heap. A process whose allocator
reuses the memory never pays for a trim; elsewhere (no `/proc`, another C
library) the budget does nothing.
"""

import ctypes
import ctypes.util
import functools
import os


@functools.lru_cache(maxsize=None)
def _malloc_trim():
  """glibc's `malloc_trim`, or None where the C library has none."""
  try:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    trim = libc.malloc_trim
  except (OSError, AttributeError):
    return None
  trim.argtypes = [ctypes.c_size_t]
  trim.restype = ctypes.c_int
  return trim


_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes():
  """The process's resident set size in bytes, or None where unknown."""
  try:
    with open("/proc/self/statm", "rb") as statm:
      return int(statm.read().split()[1]) * _PAGE_BYTES
  except (OSError, ValueError, IndexError):
    return None


def give_back_free_memory():
  """Asks the C allocator to return its free pages to the system.

  Returns:
    Whether the allocator could be asked (glibc); False elsewhere.
  """
  trim = _malloc_trim()
  if trim is None:
    return False
  trim(0)
  return True


class PieceBudget:
  """The resident memory a restore may keep between its pieces.

  Made when a restore begins; `piece_freed()` is called after each piece's
  values are freed. When the process has grown by more than `allowance`
  bytes since then, the allocator is asked to give back what it keeps.
  """

  def __init__(self, allowance):
    self._allowance = allowance
    self._limit = None
    start = resident_bytes()
    if start is not None and _malloc_trim() is not None:
      self._limit = start + allowance

  def piece_freed(self):
    """Gives free memory back if the restore kept more than its allowance.

    What a trim cannot give back is in use (by the restore's objects, or
    kernels TensorFlow made on first use), so the limit then moves up to
    it: the next pieces are measured from there, not trimmed every time.
    """
    if self._limit is None or resident_bytes() <= self._limit:
      return
    give_back_free_memory()
    in_use = resident_bytes()
    if in_use > self._limit:
      self._limit = in_use + self._allowance
