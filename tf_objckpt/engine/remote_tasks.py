"""Waits for the eager ops a save or restore sends to other tasks.

Executing eagerly in a cluster (`connect_to_cluster`, a parameter-server
coordinator), an op placed on another task is sent to that task and the
call returns at once. An op with outputs returns handles that wait for it
when read; an op without outputs (`SaveV2`, `MergeV2Checkpoints`, an
assign) is waited for by nothing, and its error surfaces in whichever op
on that task comes next, if any. A task runs the ops this process sends
it in the order they were sent.

So a step whose next step needs those effects (shards written before the
merge, a checkpoint merged before it is recorded, values assigned before a
restore returns) runs inside `completed_on(devices)`: on leaving, one op
with an output runs on each other task among `devices`, and is read. Once
it is read, every op sent to that task before it has run, and the first
error among them is raised here, naming the task. Nothing else is waited
for: not the tasks the step did not use, nor ops sent by other clients.
Local ops run synchronously and need no wait; neither does graph building,
whose control dependencies order the ops.
"""

import concurrent.futures
import contextlib
import functools
import re

from tensorflow.python.eager import context
from tensorflow.python.framework import device as pydev
from tensorflow.python.framework import errors
from tensorflow.python.framework import ops
from tensorflow.python.ops import gen_logging_ops

from tf_objckpt.engine import thread_pools

# Eager ops sent to other tasks, a thread per task (`on_each_task`).
_task_pool = thread_pools.ThreadPool("tf_objckpt_tasks", lambda: 32)


def connected():
  """Whether executing eagerly in a cluster, where other tasks may run ops."""
  return (context.executing_eagerly() and
          context.context().get_server_def() is not None)


def remote_cpus(devices):
  """For each of `devices`, the CPU of its task if another task's, or None.

  All None unless executing eagerly in a cluster (`connected()`, which a
  caller with many devices checks first, to not list them for nothing).
  """
  devices = list(devices)
  if not connected():
    return [None] * len(devices)
  host = _task_of(context.context().host_address_space())
  cpus = {}
  for device in set(devices):
    task = _task_of(device or "")
    cpus[device] = (f"{task}/device:CPU:0"
                    if task is not None and task != host else None)
  return [cpus[device] for device in devices]


def is_remote(device):
  """Whether eager ops on `device` run on another task than this one."""
  return remote_cpus([device])[0] is not None


def on_each_task(calls):
  """Runs each of `calls` on a thread of its own; returns their results.

  For eager ops on other tasks, one call per task: where each remote op is
  a round trip that the caller waits for, the tasks then work at the same
  time. Raises the first call's error, once every call has returned.
  Callers with op callbacks (TensorFlow keeps them per thread), which must
  see the ops, run the calls themselves, one after the other.
  """
  if len(calls) < 2 or context.context().op_callbacks:
    return [call() for call in calls]
  futures = [_task_pool.submit(call) for call in calls]
  concurrent.futures.wait(futures)
  return [future.result() for future in futures]


# How TensorFlow's error from an op on another task names that task.
_REMOTE_TARGET = re.compile(
    r"from remote target (/job:[^/\s]+/replica:\d+/task:\d+)")


@functools.lru_cache(maxsize=1024)
def _task_of(device):
  """`/job:J/replica:R/task:T` of a device, or None if it names no job."""
  if not device or context.is_custom_device(device):
    return None
  spec = pydev.DeviceSpec.from_string(device)
  if spec.job is None:
    return None
  return f"/job:{spec.job}/replica:{spec.replica or 0}/task:{spec.task or 0}"


@contextlib.contextmanager
def completed_on(devices, what):
  """Runs the block, then waits until its ops on other tasks have run.

  The wait happens whether the block succeeds or fails, so that nothing the
  block sent still runs once it is over (a failed save's undo then finds
  every file its shards wrote). When the block fails, its error is raised,
  naming the tasks that failed too (a task that died mid-save fails the
  block's next op there).

  Args:
    devices: The devices the block runs ops on (an iterable, listed only in
      a cluster); those of other tasks are waited for.
    what: What the block does, for messages ("the save's shard writes").

  Yields:
    Nothing.

  Raises:
    The first error of an op the block sent to another task (TensorFlow's
    type), its message naming the task.
  """
  tasks = _other_tasks(devices)
  if not tasks:
    yield
    return
  try:
    yield
  except errors.OpError as error:
    failures = _failures(tasks)
    if not failures and len(tasks) == 1:
      # The op failed when sent (it ran before returning): its task's.
      failures = [(_task_of(next(iter(tasks))), error)]
    if not failures:
      raise
    raise _naming_tasks(what, failures,
                        error).with_traceback(error.__traceback__) from None
  except BaseException:
    _failures(tasks)
    raise
  wait_for(tasks, what)


def wait_for(devices, what):
  """Waits until the ops sent before to the other tasks among `devices` ran.

  Raises:
    The first error of such an op, its message naming the task and `what`.
  """
  failures = _failures(_other_tasks(devices))
  if failures:
    raise _naming_tasks(what, failures, failures[0][1])


def _other_tasks(devices):
  """The CPUs of the other tasks among `devices` (none unless connected)."""
  if not connected():
    return set()
  return {cpu for cpu in remote_cpus(devices) if cpu is not None}


def _failures(tasks):
  """Reads one op's output on the CPU of each of `tasks`.

  Returns:
    `[(task, error)]` of the tasks whose ops failed.
  """
  markers, failures = {}, []
  for cpu in sorted(tasks):
    task = _task_of(cpu)
    try:
      with ops.device(cpu):
        markers[task] = gen_logging_ops.timestamp()
    except errors.OpError as e:
      failures.append((task, e))
  for task, marker in markers.items():
    try:
      marker.numpy()
    except errors.OpError as e:
      failures.append((task, e))
  return failures


def naming_the_task(what, error, devices, failed_device=None):
  """`error` (of its type), its message naming the task it failed on.

  For an error of several tasks' ops at once (a function's): the tasks
  among `devices` that now fail an op (one that died or lost this client),
  else `failed_device`'s, else `error` itself.
  """
  failures = _failures(_other_tasks(devices))
  if not failures and failed_device is not None:
    failures = [(_task_of(failed_device), error)]
  return _naming_tasks(what, failures, error)


def _naming_tasks(what, failures, error):
  """`error` (of its type), its message led by `what` and the failed tasks.

  The other task `error` says it came from leads (an error of one task can
  surface in another's op); the first task's own error follows when it is
  not `error`. With no task to name, `error` itself.
  """
  reported = [
      _task_of(match.group(1))
      for match in _REMOTE_TARGET.finditer(error.message)
      if is_remote(match.group(1))
  ]
  if reported:
    task = reported[0]
    failures = [(task, error)] + [(other, other_error)
                                  for other, other_error in failures
                                  if other != task and other_error is not error]
  if not failures:
    return error
  task, task_error = failures[0]
  others = [other for other, _ in failures[1:]]
  also = f" (and on {', '.join(others)})" if others else ""
  message = f"{what[0].upper()}{what[1:]} failed on task {task}{also}: "
  message += error.message
  if task_error is not error:
    message += f"\nOn task {task}: {task_error.message}"
  return type(error)(error.node_def, error.op, message)
