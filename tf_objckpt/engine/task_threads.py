"""Runs eager steps on several other tasks at once, a thread per task.

Executing eagerly in a cluster, an op sent to another task may return only
once it has run there: so with `ParameterServerStrategy`, which turns off
streaming enqueue, each `SaveV2` on a ps task does. Sent one after the
other from one thread, the shards of the tasks would then be written one
after the other, where TensorFlow's save (one function) writes them at
once. `on_each_task` sends each task's steps from a thread of its own, so
that the tasks run them at the same time. (A save of one shard per task
is one function, `writes.write_shards_traced`; this serves the others: a
sharding callback's shards, registered savers' saves.)

Remote ops are ordered per thread, so a thread could read a variable
before an assign another thread sent has run: every task is first waited
for (`remote_tasks.completed_on`), then each thread sends its task's steps
in order and waits for them before it ends. Local steps, steps on a
single other task and asynchronous execution (where ops are queued per
thread) run in the calling thread, as before.
"""

import concurrent.futures
import contextlib

from tensorflow.python.eager import context

from tf_objckpt.engine import remote_tasks
from tf_objckpt.engine import thread_pools

# Threads only wait for their tasks, so several can run on one core.
_MAX_THREADS = 16

_pool = thread_pools.ThreadPool("tf_objckpt_task", lambda: _MAX_THREADS)


@contextlib.contextmanager
def on_each_task(steps, what):
  """Sends `steps` to their tasks; once the block is left, they have run.

  The block runs meanwhile (local work, overlapping the tasks'). Every step
  has ended before an error is raised, so that a failed save's cleanup
  finds nothing still running.

  Args:
    steps: `(device, call)` pairs, each `device` on another task than this
      one; `call()` runs eager ops there (and is itself on that device).
    what: What the steps do, for messages ("the save's shard writes").

  Yields:
    The list of the calls' results, in order, filled once the block is
    left.

  Raises:
    The block's error; else the first failed task's (in the order of
    `steps`), its message naming the task.
  """
  results = [None] * len(steps)
  by_task = {}
  for index, cpu in enumerate(remote_tasks.remote_cpus(d for d, _ in steps)):
    by_task.setdefault(cpu, []).append(index)
  if len(by_task) < 2 or context.is_async():
    with remote_tasks.completed_on(by_task, what):
      for index, (_, call) in enumerate(steps):
        results[index] = call()
      yield results
    return
  remote_tasks.wait_for(by_task, f"the ops before {what}")

  def run_task(cpu, indices):
    with context.eager_mode(), remote_tasks.completed_on([cpu], what):
      for index in indices:
        results[index] = steps[index][1]()

  futures = [
      _pool.submit(run_task, cpu, indices) for cpu, indices in by_task.items()
  ]
  try:
    yield results
  finally:
    concurrent.futures.wait(futures)
  for future in futures:
    future.result()
