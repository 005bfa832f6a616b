"""Asynchronous saves: values are read at once, written in the background.

With `CheckpointOptions(experimental_enable_async_checkpoint=True)`, an
eager `Checkpoint.save()` or `write()` takes a `Snapshot`: every value it
saves read into a tensor (variables with batched reads). A
read tensor keeps the buffer it read: TensorFlow gives a variable that is
assigned while such a tensor exists a new buffer, so later assignments never
reach the snapshot, and nothing is copied unless the variable changes. The
save then returns; an `AsyncWriter`'s thread runs the rest of the save
transaction (`api.save_transaction`): it writes the snapshot through the
I/O engine, commits it and records it in the state file.

One write per checkpoint object is pending at a time, so at most one
snapshot is held: the next save, write, restore or `sync()` waits for it
and raises its error, if it failed. The interpreter waits for the write
threads at exit; an error no call raised is logged then (or when its
writer is collected), never lost silently.
"""

import atexit
import threading
import weakref

from tensorflow.python.framework import ops
from tensorflow.python.platform import tf_logging as logging

from tf_objckpt.engine import multi_device_saver
from tf_objckpt.engine import saveable_objects
from tf_objckpt.engine import thread_pools
from tf_objckpt.engine import tuning
from tf_objckpt.engine import variable_values

# Writers that may hold an error no call has raised yet (see `_report_all`).
_writers: "weakref.WeakSet[AsyncWriter]" = weakref.WeakSet()
# The threads that run the writes. `concurrent.futures` joins them when the
# interpreter exits, before `atexit` functions run; threads kept for later
# writes save starting one per save.
_pool = thread_pools.ThreadPool("tf_objckpt_async",
                                lambda: tuning.TUNING.async_write_threads)


def requested(options):
  """Whether `options` ask for an asynchronous save."""
  return bool(getattr(options, "experimental_enable_async_checkpoint", False))


def _frozen(value):
  """`value` as a tensor that later assignments cannot change, or None."""
  if value is None or isinstance(value, ops.EagerTensor):
    return value
  # A variable (or anything else `_serialize_to_tensors` returned) is read
  # now; Python values are copied into a new tensor.
  return ops.convert_to_tensor(value)


class Snapshot:
  """The saveables of one save, holding the values they had when taken."""

  def __init__(self, saveables):
    """Reads every value of `saveables` now (eagerly)."""
    specs = [spec for saveable in saveables for spec in saveable.specs]
    values = iter(variable_values.spec_tensors(specs))
    self._saveables = []
    for saveable in saveables:
      frozen_specs = []
      for spec in saveable.specs:
        value = _frozen(next(values))
        if value is not None:  # An uninitialized variable saves nothing.
          frozen_specs.append(
              saveable_objects.SaveSpec(value,
                                        spec.slice_spec,
                                        spec.name,
                                        device=spec.device))
      if frozen_specs:
        self._saveables.append(
            saveable_objects.SaveableObject(None, frozen_specs, saveable.name))

  def write(self, save_path, options=None):
    """Writes the values at `save_path` (whose directory exists)."""
    multi_device_saver.Saver(self._saveables).save(save_path, options)
    return save_path


class AsyncWriter:
  """Runs one checkpoint object's writes in the background, one at a time."""

  def __init__(self):
    self._lock = threading.Lock()
    self._pending = None  # The future of the last write not yet reported.
    _writers.add(self)

  def start(self, write):
    """Runs `write()` in the background, once the pending write finished.

    Raises:
      The pending write's error, if it failed; `write` is not run then.
    """
    self.sync()
    future = _pool.submit(write)
    with self._lock:
      self._pending = future

  def sync(self):
    """Waits for the pending write; raises its error if it failed (once)."""
    with self._lock:
      future = self._pending
    if future is None:
      return
    error = future.exception()  # Waits.
    with self._lock:
      if self._pending is future:
        self._pending = None
    if error is not None:
      raise error

  def report_unraised(self):
    """Logs the error of a finished, failed write that no call raised."""
    with self._lock:
      future = self._pending
      if future is None or not future.done():
        return
      self._pending = None
    error = future.exception()
    if error is not None:
      logging.error(
          "An asynchronous checkpoint write failed, and no later "
          "save(), restore() or sync() raised the error: %s: %s",
          type(error).__name__, error)

  def __deepcopy__(self, memo):
    """A copied checkpoint object starts with nothing pending."""
    return AsyncWriter()

  def __del__(self):
    self.report_unraised()


@atexit.register
def _report_all():
  """At exit (the write threads are joined before atexit runs), logs errors."""
  for writer in list(_writers):
    writer.report_unraised()
