"""Writing checkpoint files: `SaveV2`, the shard names, the merge.

A save writes one shard per device group, under a temporary prefix
(eagerly from parallel threads, one per core at most), then
`MergeV2Checkpoints` makes them one checkpoint (`write_shards`); a single
shard is written in place. This is step 2 of a save transaction
(`api.save_transaction`).

Eagerly, the temporary prefix is the save's own (`temporary_names`), shards
on other tasks of a cluster are written (those of several tasks at once,
`task_threads`) before the merge and the merge before the save returns
(`remote_tasks`), and a failed save removes its temporary directory once
none of its writes still runs. A save of one shard per task on several
tasks runs its reads, writes and merge as one multi-device function
instead (`write_shards_traced`), as TensorFlow's does, but traced once per
layout of shards and called again by later saves, with the save's own
temporary prefix as an argument. Errors name the checkpoint and the task
that failed.
"""

import concurrent.futures
import contextlib
import functools
import os
import re
import typing

from tensorflow.python.eager import context
from tensorflow.python.eager import def_function
from tensorflow.python.framework import constant_op
from tensorflow.python.framework import errors
from tensorflow.python.framework import ops
from tensorflow.python.ops import array_ops
from tensorflow.python.ops import gen_resource_variable_ops
from tensorflow.python.ops import gen_io_ops
from tensorflow.python.ops import io_ops
from tensorflow.python.ops import string_ops
from tensorflow.python.util import compat

from tf_objckpt.engine import leftovers
from tf_objckpt.engine import remote_tasks
from tf_objckpt.engine import task_threads
from tf_objckpt.engine import temporary_names
from tf_objckpt.engine import thread_pools
from tf_objckpt.engine import tuning
from tf_objckpt.engine import variable_batches

# The threads of eager writes of several shards.
_write_pool = thread_pools.ThreadPool("tf_objckpt_write",
                                      lambda: tuning.TUNING.write_threads)


def save_v2(file_prefix, names, slices, tensors):
  """One `SaveV2` writing `tensors` under `names` (a V2 checkpoint)."""
  with variable_batches.direct_kernels(len(tensors)):
    return io_ops.save_v2(file_prefix, names, slices, tensors)


def save_v1(filename, names, slices, tensors):
  """One `SaveSlices` writing a V1 checkpoint file."""
  return io_ops._save(  # pylint: disable=protected-access
      filename=filename,
      tensor_names=names,
      tensors=tensors,
      tensor_slices=slices)


def sharded_filename(filename_tensor, shard, num_shards):
  """The prefix with the `-SSSSS-of-NNNNN` suffix of one shard.

  TensorFlow's `functional_saver.sharded_filename`, by its signature.
  """
  return gen_io_ops.sharded_filename(filename_tensor, shard, num_shards)


def sharded_filespec(file_prefix, num_shards):
  """The glob-free filespec of all shards of a V1 checkpoint."""
  return gen_io_ops.sharded_filespec(file_prefix, num_shards)


def temp_shard_prefix(file_prefix):
  """Where shards are written before the merge: `<prefix>_temp/part`.

  On S3, where renames are not atomic anyway, `<prefix>.part` instead.
  Eagerly, the names are this save's own (`<prefix>_temp_<hex>/part`, a
  string); graph building, TensorFlow's (a string tensor).
  """
  if context.executing_eagerly():
    if isinstance(file_prefix, ops.EagerTensor):
      file_prefix = file_prefix.numpy()
    prefix = compat.as_str(file_prefix)
    directories, on_s3 = temporary_names.shard_suffixes(unique=True)
    return prefix + (on_s3 if prefix.startswith("s3://") else directories)
  directories, on_s3 = temporary_names.shard_suffixes(unique=False)
  with ops.device("CPU"):
    suffix = array_ops.where(
        string_ops.regex_full_match(file_prefix, "^s3://.*"),
        constant_op.constant(on_s3), constant_op.constant(directories))
    return string_ops.string_join([file_prefix, suffix])


def write_shards(file_prefix,
                 shard_writers,
                 merge_device=None,
                 shard_filename=sharded_filename,
                 graph_compatible=False,
                 other_prefixes=()):
  """Writes shards under a temporary prefix, then merges them into one.

  Args:
    file_prefix: The checkpoint prefix, a string tensor.
    shard_writers: `(device, write)` pairs: `write(shard_prefix)` writes one
      shard on `device` and returns its op (or a tensor depending on it).
    merge_device: The device to merge on; None for the last shard's.
    shard_filename: Names shard `index` of `num_shards` under a prefix.
    graph_compatible: Build the v1 `Saver`'s graph: the shard count is a
      constant named "num_shards", and the result is `file_prefix` once
      merged rather than the merge op.
    other_prefixes: Checkpoints written already (by registered savers),
      merged first.

  Returns:
    The `MergeV2Checkpoints` op (or `file_prefix` depending on it), run once
    every shard is written.
  """
  temp_prefix = temp_shard_prefix(file_prefix)
  num_shards = len(shard_writers)
  if graph_compatible:
    num_shards = constant_op.constant(num_shards, name="num_shards")

  def name_and_write(index, write):
    shard_prefix = shard_filename(temp_prefix, index, num_shards)
    return shard_prefix, write(shard_prefix)

  with _removed_on_failure(temp_prefix):
    named_and_written = _write_each(
        [(device, functools.partial(name_and_write, index, write))
         for index, (device, write) in enumerate(shard_writers)],
        step_of("the shard writes", file_prefix))
    shard_prefixes = [shard_prefix for shard_prefix, _ in named_and_written]
    written = [write for _, write in named_and_written]
    device = merge_device or (shard_writers[-1][0] if shard_writers else None)
    with ops.control_dependencies(written), ops.device(device):
      with remote_tasks.completed_on([device], step_of("the merge",
                                                       file_prefix)):
        merge = gen_io_ops.merge_v2_checkpoints(list(other_prefixes) +
                                                shard_prefixes,
                                                file_prefix,
                                                delete_old_dirs=True)
      if not graph_compatible:
        return merge
      with ops.control_dependencies([merge]):
        return array_ops.identity(file_prefix)


@contextlib.contextmanager
def _removed_on_failure(temp_prefix):
  """Removes an eager save's own shard directory if the block fails."""
  try:
    yield
  except BaseException:
    if isinstance(temp_prefix, str) and temp_prefix.endswith(os.sep + "part"):
      leftovers.remove(os.path.dirname(temp_prefix))
    raise


def _write_each(writes, what):
  """Runs each `(device, write)` on its device; returns their results.

  `what` names the writes in errors ("the shard writes of checkpoint ...").

  Eagerly, writes on other tasks are sent first, and run there while the
  rest are written; the tasks' writes at once (`task_threads`), all done
  when this returns. Writes on this process's devices run at once, one
  thread each (up to the number of cores; in this thread when executing
  asynchronously, as remote ops are queued per thread): SaveV2 releases
  the GIL while it copies, checksums and writes. Graph building, the ops
  are built in order and the session runs them in parallel.
  """
  if not context.executing_eagerly():
    return [_run_on(device, write) for device, write in writes]
  results = [None] * len(writes)
  remote, local = [], []
  for index, (device, _) in enumerate(writes):
    (remote if remote_tasks.is_remote(device) else local).append(index)
  with task_threads.on_each_task(
      [(writes[index][0], functools.partial(_run_on, *writes[index]))
       for index in remote], what) as remote_results:
    local_results = _write_locally([writes[index] for index in local])
  for index, result in zip(remote + local, remote_results + local_results):
    results[index] = result
  return results


def _write_locally(writes):
  """Runs eager `(device, write)`s on this process's devices at once."""
  if len(writes) < 2 or context.is_async():
    return [_run_on(device, write) for device, write in writes]
  futures = [
      _write_pool.submit(_run_on, device, write, eager=True)
      for device, write in writes
  ]
  # Every write ends before any error is raised, so that the cleanup of a
  # failed save finds no write still running.
  concurrent.futures.wait(futures)
  return [future.result() for future in futures]


def _run_on(device, write, eager=False):
  """Calls `write()` on `device` (eagerly, in a thread of its own)."""
  with contextlib.ExitStack() as stack:
    if eager:  # A new thread's default mode may not be the caller's.
      stack.enter_context(context.eager_mode())
    stack.enter_context(ops.device(device))
    return write()


class TracedShard(typing.NamedTuple):
  """One data file of a save on several tasks, for `write_shards_traced`.

  `sources` are the values' tensors, or for a variable read when the file
  is written, its resource handle (`dtypes` then names its type).
  """
  device: str
  names: tuple
  slices: tuple
  read_devices: tuple
  dtypes: tuple
  sources: list


def write_shards_traced(save_path, shards, merge_device):
  """Writes `shards` and merges them through one multi-device function.

  Eagerly, on several tasks: the function (traced once per layout of
  shards, and called again by later saves) writes every shard on its
  task at once and merges them, ordered by its control dependencies, as
  TensorFlow's save does. The temporary prefix, this save's own, is an
  argument, so that each save has its own and the trace is reused.

  Raises:
    The first failed op's error (TensorFlow's type), its message naming
    the checkpoint and the task that failed.
  """
  temp_prefix = temp_shard_prefix(save_path)
  layout = tuple((shard.device, shard.names, shard.slices, shard.read_devices,
                  shard.dtypes) for shard in shards)
  devices = [shard.device for shard in shards] + [merge_device]
  what = step_of("the shard writes", save_path)
  with _removed_on_failure(temp_prefix):
    remote_tasks.wait_for(devices, f"the ops before {what}")
    try:
      # Tensors, not strings: a string argument would be traced anew.
      temp_prefix = ops.convert_to_tensor(temp_prefix)
      _traced_write(
          ops.convert_to_tensor(save_path), temp_prefix,
          [_on_task(temp_prefix, shard.device) for shard in shards], layout,
          merge_device,
          [[_on_task(source, shard.device)
            for source in shard.sources]
           for shard in shards])
    except errors.OpError as error:
      failed = _FAILED_SHARD.search(error.message)
      raise remote_tasks.naming_the_task(
          what, error, devices, failed and
          layout[int(failed.group(1))][0]).with_traceback(
              error.__traceback__) from None


# The name of the op writing shard N in `_traced_write`, as errors quote it.
_SHARD_OP = "write_shard_{}"
_FAILED_SHARD = re.compile(r"\{\{node write_shard_(\d+)\}\}")


def step_of(step, save_path):
  """`step` of the save to `save_path`, for messages ("the merge of ...")."""
  if isinstance(save_path, ops.EagerTensor):
    save_path = save_path.numpy()
  if isinstance(save_path, (bytes, str)):
    return f"{step} of checkpoint {compat.as_str(save_path)}"
  return f"{step} of the save"


def _on_task(tensor, device):
  """`tensor`, copied to `device`'s task (eagerly) unless it is there.

  A function's input that another task uses is sent there by this
  process's address when the function runs; a task restarted since this
  process connected calls a former one. So every input is first copied
  (an eager op, which works) to the task whose ops use it.
  """
  here, there = remote_tasks.remote_cpus([tensor.device, device])
  if here == there:
    return tensor
  with ops.device(there or device):
    return array_ops.identity(tensor)


@def_function.function(autograph=False, jit_compile=False)
def _traced_write(save_path, temp_prefix, temp_prefixes, layout, merge_device,
                  sources):
  """The body of `write_shards_traced`'s function.

  `temp_prefix` (on this task, for the merge) and each shard's copy on its
  task, in `temp_prefixes`, are the same string.
  """
  num_shards = len(layout)
  shard_prefixes, written = [], []
  for index, ((device, names, slices, read_devices, dtypes), values,
              shard_temp_prefix) in enumerate(
                  zip(layout, sources, temp_prefixes)):
    tensors = []
    for read_device, dtype, value in zip(read_devices, dtypes, values):
      if dtype is None:
        tensors.append(value)
      else:
        with ops.device(read_device):
          tensors.append(
              gen_resource_variable_ops.read_variable_op(value, dtype))
    with ops.device(device):
      written.append(
          gen_io_ops.save_v2(sharded_filename(shard_temp_prefix, index,
                                              num_shards),
                             list(names),
                             list(slices),
                             tensors,
                             name=_SHARD_OP.format(index)))
    with ops.device(merge_device):
      shard_prefixes.append(sharded_filename(temp_prefix, index, num_shards))
  with ops.control_dependencies(written), ops.device(merge_device):
    merge = gen_io_ops.merge_v2_checkpoints(shard_prefixes,
                                            save_path,
                                            delete_old_dirs=True)
  with ops.control_dependencies([merge]):
    return array_ops.identity(save_path)
