"""Thread pools made on first use, kept for the process, remade after fork.

Parallel reads, parallel writes and asynchronous saves each keep a pool of
threads, so that a save or restore does not start threads of its
own. A child made by `os.fork` has none of its parent's threads: a pool
made before the fork would queue work that never runs, and the child would
wait forever. Each pool is therefore forgotten in a forked child, and made
again on its first use there.
"""

import concurrent.futures
import os
import threading
import weakref


class ThreadPool:
  """A `ThreadPoolExecutor` made on first use (see the module)."""

  def __init__(self, name, workers):
    """Makes nothing yet.

    Args:
      name: The prefix of its threads' names.
      workers: Returns how many threads it has, read when it is made (so
        that a test's `tuning` setting applies).
    """
    self._name = name
    self._workers = workers
    self._lock = threading.Lock()
    self._executor = None
    _pools.add(self)

  def submit(self, fn, *args, **kwargs):
    """Runs `fn(*args, **kwargs)` on one of its threads; returns a future."""
    with self._lock:
      if self._executor is None:
        self._executor = concurrent.futures.ThreadPoolExecutor(
            self._workers(), thread_name_prefix=self._name)
      return self._executor.submit(fn, *args, **kwargs)

  def _forget_in_child(self):
    self._lock = threading.Lock()  # The parent's may have been held.
    self._executor = None


_pools: "weakref.WeakSet[ThreadPool]" = weakref.WeakSet()


def _forget_every_pool():
  for pool in list(_pools):
    pool._forget_in_child()


os.register_at_fork(after_in_child=_forget_every_pool)
