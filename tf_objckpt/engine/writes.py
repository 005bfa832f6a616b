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
none of its writes still runs.
"""

import concurrent.futures
import contextlib
import functools
import os

from tensorflow.python.eager import context
from tensorflow.python.framework import constant_op
from tensorflow.python.framework import ops
from tensorflow.python.ops import array_ops
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
    named_and_written = _write_each([
        (device, functools.partial(name_and_write, index, write))
        for index, (device, write) in enumerate(shard_writers)
    ])
    shard_prefixes = [shard_prefix for shard_prefix, _ in named_and_written]
    written = [write for _, write in named_and_written]
    device = merge_device or (shard_writers[-1][0] if shard_writers else None)
    with ops.control_dependencies(written), ops.device(device):
      with remote_tasks.completed_on([device], "the save's merge"):
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


def _write_each(writes):
  """Runs each `(device, write)` on its device; returns their results.

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
       for index in remote], "the save's shard writes") as remote_results:
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
