"""Reading a checkpoint's values: the engine's reads.

Every `RestoreV2` outside the graph-mode restore functions
(`graph_restores`) is issued here: `CheckpointValues`, what one restore
reads of a checkpoint opened by `checkpoint_opening`: eagerly, values of
existing objects all at once when they fit under the restore's memory
limit (`restore_memory`), else a piece at a time (`restore_in_pieces`),
values of objects not created yet read ahead, large reads split across
threads (by data file, `read_lanes`), other tasks' values read on them;
graph building, one read op per value. A value to read is a `Read`. A
read that fails names the checkpoint, the key and the data file.
"""

import contextlib
import enum
import functools
import itertools
import math
from typing import Callable, NamedTuple, Optional, Sequence

from tensorflow.python.eager import context
from tensorflow.python.framework import constant_op
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import errors
from tensorflow.python.framework import ops
from tensorflow.python.ops import io_ops
from tensorflow.python.util import compat

from tf_objckpt.engine import checkpoint_opening
from tf_objckpt.engine import read_lanes
from tf_objckpt.engine import remote_tasks
from tf_objckpt.engine import resident_memory
from tf_objckpt.engine import restore_memory
from tf_objckpt.engine import thread_pools
from tf_objckpt.engine import tuning
from tf_objckpt.engine import variable_batches

# Reads beside the calling thread's own (`eager_restore_v2`).
_read_pool = thread_pools.ThreadPool("tf_objckpt_read",
                                     lambda: tuning.TUNING.read_threads - 1)


def readable_values(save_path):
  """The `CheckpointValues` of `save_path`, or None if it cannot be opened.

  For checks before a restore op runs: an unreadable checkpoint is left for
  the op to report, with TensorFlow's own error type and message.
  """
  save_path = compat.as_str(save_path)
  try:
    return CheckpointValues(save_path,
                            checkpoint_opening.open_reader(save_path))
  except errors.OpError:
    return None


def restore_v2(file_prefix, names, slices, dtypes_):
  """One `RestoreV2` reading `names` (on the current device).

  Eagerly its inputs are made tensors first, which lets TensorFlow take its
  fast path (its fallback converts the `dtypes` list in Python, a few
  microseconds a value).
  """
  if context.executing_eagerly():
    file_prefix, names, slices = (constant_op.constant(value, dtypes.string)
                                  for value in (file_prefix, names, slices))
  with variable_batches.direct_kernels(len(dtypes_)):
    return io_ops.restore_v2(file_prefix, names, slices, dtypes_)


def eager_restore_v2(file_prefix,
                     names,
                     slices,
                     dtypes_,
                     byte_sizes,
                     device,
                     data_files=None):
  """RestoreV2 of `names`, executing eagerly; large reads use threads.

  Args:
    file_prefix: The checkpoint path, a string tensor.
    names: The checkpoint keys to read.
    slices: Their `shape_and_slice` strings.
    dtypes_: Their dtypes.
    byte_sizes: Their (approximate) sizes, to balance the threads.
    device: The device to read on.
    data_files: Optional; returns the data file of each key (or None when
      the checkpoint has one), so that threads read whole files
      (`read_lanes.lanes`). Called only for reads worth splitting.

  Returns:
    The values, in the order of `names`.
  """
  lanes = read_lanes.lanes(byte_sizes, data_files)

  def read(lane):
    with ops.device(device):
      return restore_v2(file_prefix, [names[i] for i in lane],
                        [slices[i] for i in lane], [dtypes_[i] for i in lane])

  if len(lanes) == 1:
    return read(lanes[0])
  others = [_read_pool.submit(read, lane) for lane in lanes[1:]]
  values = [None] * len(names)
  for lane, lane_values in zip(lanes, [read(lanes[0])] +
                               [future.result() for future in others]):
    for index, value in zip(lane, lane_values):
      values[index] = value
  return values


def byte_size(dims, dtype):
  """About how many bytes a value of shape `dims` and `dtype` takes."""
  return math.prod(dims) * (64 if dtype is dtypes.string else dtype.size)


class ShapeMatch(enum.Enum):
  """How a stored shape must relate to a `Read`'s expected shape."""
  SAME_SHAPE = "compatible"  # The variable's shape; None dims match any.
  SAME_SIZE = "same size"  # Equal numbers of elements (the v1 Saver reshapes).
  FULL_SHAPE = "full shape"  # The full shape of a partitioned variable.


class Read(NamedTuple):
  """One value a restore reads, and what it must look like.

  Reads of values take these, or TensorFlow's `SaveSpec`s, which have the
  same `name`, `slice_spec` and `dtype` (`read_plan.plan_read` builds
  checked ones).
  """
  key: str
  slice_spec: str  # RestoreV2's `shape_and_slice`; "" for the whole value.
  dtype: Optional[dtypes.DType]  # A base dtype (interned); None: any.
  shape: Optional[tuple] = None  # Dims, None dims match any; None: any.
  shape_match: ShapeMatch = ShapeMatch.SAME_SHAPE

  @property
  def name(self):
    """The key, under the name `SaveSpec`s give it."""
    return self.key


class RestoreUnit(NamedTuple):
  """Values `restore_in_pieces` reads together, and what receives them."""
  reads: Sequence  # `Read`s (or `SaveSpec`s).
  restore: Callable  # Called with their values, in order.
  # Where to read them: the CPU of another task of a cluster, where the
  # objects receiving them live, so that their bytes stay on that task;
  # None for the restore's own device.
  device: Optional[str] = None


class CheckpointValues:
  """What one restore reads from a checkpoint: its dtypes, shapes, values.

  Eager restores of existing objects read their values once and assign
  them, or over the memory limit read and assign them in pieces
  (`restore_in_pieces`). Eager reads of values for objects not
  created yet are read ahead: a key announced with `await_key` is read
  together with the next read (up to a byte budget) and kept until asked
  for, so creating N variables after a restore costs one `RestoreV2`, not N.
  A restore that must not start from a damaged checkpoint reads every value
  first (`every_value_read_first`).
  """

  def __init__(self, save_path, reader, options=None, path_tensor=None):
    """Reads `save_path` through `reader` (see `open_reader`).

    Args:
      save_path: The checkpoint path, a string.
      reader: A reader opened on it.
      options: Optional `tf.train.CheckpointOptions`: the device to read on
        and the memory limit (`max_restore_memory`).
      path_tensor: Optional string tensor fed with the path (graph building:
        restore ops that read whichever checkpoint is fed). By default the
        values make their own.
    """
    self.save_path = save_path
    eager = context.executing_eagerly()
    if path_tensor is None and eager:
      with ops.device("/cpu:0"):
        path_tensor = constant_op.constant(save_path)
    self._path_tensor = path_tensor
    # Interned DTypes, so that dtype checks are identity checks.
    dtype_enums = reader._GetVariableToDataTypeMap()  # pylint: disable=protected-access
    dtype_of = {
        dtype_enum: dtypes.as_dtype(dtype_enum)
        for dtype_enum in set(dtype_enums.values())
    }
    self.dtypes = {
        key: dtype_of[dtype_enum] for key, dtype_enum in dtype_enums.items()
    }
    self.shapes = reader.get_variable_to_shape_map()
    self._reader = reader
    self._data_files = read_lanes.DataFiles(save_path)
    self._options = options
    self._io_device = io_device(options)
    self._device = self._io_device or "/cpu:0"
    self._awaited = {}  # Keys of values waiting for their objects (ordered).
    self._read_ahead = {}  # (key, slice) -> value read ahead.
    # Eager reads take the path tensor; graph building, the path itself.
    self._eager_path = path_tensor if eager else save_path
    self._pieces_need_checking = True  # False once all values were read.

  @property
  def path_tensor(self):
    """The path as a string tensor, for read ops.

    Graph building, the tensor fed with the path, if the restore gave one;
    else a constant made where it is asked for.
    """
    if self._path_tensor is None:
      return constant_op.constant(self.save_path)
    return self._path_tensor

  @functools.cached_property
  def memory_limit(self):
    """The bytes of values this restore may hold read at once, or None.

    Decided once, when first needed (`restore_memory.restore_memory_limit`).
    """
    return restore_memory.restore_memory_limit(self._options)

  @property
  def piece_bytes(self):
    """About how many bytes a piece holds, for a restore over its limit.

    `restore_piece_bytes`, and at most half the limit (`memory_limit`).
    """
    piece_bytes = tuning.TUNING.restore_piece_bytes
    if self.memory_limit is not None:
      piece_bytes = max(1, min(piece_bytes, self.memory_limit // 2))
    return piece_bytes

  @functools.cached_property
  def byte_sizes(self):
    """About how many bytes the value of each key takes (`byte_size`)."""
    return {
        key: byte_size(dims, self.dtypes[key])
        for key, dims in self.shapes.items()
    }

  def python_value(self, key):
    """The value of `key` as a numpy value (Python state)."""
    return self._reader.get_tensor(key)

  def await_key(self, key):
    """Announces that `key` will be read eagerly once its object exists."""
    if context.executing_eagerly():
      self._awaited[key] = None

  def read_one(self, key, shape_and_slice=""):
    """Reads one value: a tensor now (eager), or a read op (graph)."""
    if not context.executing_eagerly():
      with ops.init_scope(), ops.device(self._device):
        value, = restore_v2(self.path_tensor, [key], [shape_and_slice],
                            [self.dtypes[key]])
      return value
    return self.read([Read(key, shape_and_slice, self.dtypes.get(key))])[0]

  def read(self, specs):
    """Reads the values of `specs` eagerly, reading ahead awaited values."""
    if not specs:  # An object that saves nothing (RestoreV2 needs a key).
      return []
    if not self._read_ahead and not self._awaited:
      return self._restore_v2(specs)
    wanted = [(spec.name, spec.slice_spec) for spec in specs]
    missing = [
        spec for spec, key in zip(specs, wanted) if key not in self._read_ahead
    ]
    if missing:
      to_read = missing + self._read_ahead_specs(
          {spec.name for spec in missing})
      try:
        values = self._restore_v2(to_read)
      except errors.OpError:
        if len(to_read) == len(missing):
          raise
        # A value read ahead may be the unreadable one; it must not fail
        # this read. Read only what is wanted; the rest is read when needed.
        to_read = missing
        values = self._restore_v2(to_read)
      for spec, value in zip(to_read, values):
        self._read_ahead[(spec.name, spec.slice_spec)] = value
    for name, _ in wanted:
      self._awaited.pop(name, None)
    return [self._read_ahead.pop(key) for key in wanted]

  def restore_in_pieces(self, units):
    """Reads the values of `units` eagerly and hands each unit its own.

    Values that fit under `memory_limit` are read once, all of them
    (reading checks each value's checksum), and handed over once every one
    is read: one pass, and a damaged value anywhere assigns nothing.

    A restore over the limit reads and restores a piece of at most about
    `restore_piece_bytes` (and half the limit) at a time, so that it holds
    one piece of values, not a second copy of the model, and each piece
    reuses the memory the previous one freed. Should the allocator keep
    freed pieces rather than reuse them, `resident_memory.PieceBudget`
    makes it give them back, so the bound holds after any allocation
    history. Damage is still found before anything is restored: every
    piece but the last is read once beforehand and dropped, and the last
    is restored first.

    Units with a device, another task's (unless the options name an I/O
    device), are read there, as TensorFlow reads each task's values on that
    task: one `RestoreV2` per task, sent first, so that the tasks read while
    this one does. Their values stay on their tasks, outside this
    process's memory, and are handed over once every value of the restore
    has been read, the last piece here included.

    Args:
      units: `RestoreUnit`s, or `(specs, restore)` pairs; `restore(values)`
        is called with the values of `specs`, in order.
    """
    if not units:
      return
    remote, local = [], []
    for unit in (RestoreUnit(*unit) for unit in units):
      on_another_task = unit.device is not None and self._io_device is None
      (remote if on_another_task else local).append(unit)
    sent = self._send_reads(remote)
    pieces, piece_bytes = self._pieces(local)
    budget = (resident_memory.PieceBudget(piece_bytes)
              if len(pieces) > 1 else None)
    for piece in pieces[:-1] if self._pieces_need_checking else ():
      unread = [
          spec for unit in piece for spec in unit.reads
          if (spec.name, spec.slice_spec) not in self._read_ahead
      ]
      if unread:
        self._restore_v2(unread)
        budget.piece_freed()
    remote_values = self._received(sent, remote)
    for piece in pieces[-1:] + pieces[:-1]:
      values = self.read([spec for unit in piece for spec in unit.reads])
      _hand_over_on_each_task(zip(remote, remote_values))
      remote = remote_values = ()
      _hand_over(_values_of(piece, values))
      del values  # Freed before the next piece is read into new memory.
      if budget:
        budget.piece_freed()

  def _send_reads(self, units):
    """Sends the reads of `units`, one `RestoreV2` per device, at once.

    Each from a thread of its own (`on_each_task`), so that tasks read at
    once where a client waits for each remote op (`ParameterServerStrategy`).

    Returns:
      `[(device, specs, values)]`: the values are not waited for.
    """
    by_device = {}
    for unit in units:
      by_device.setdefault(unit.device, []).extend(unit.reads)
    sent = [(device, specs) for device, specs in by_device.items() if specs]
    try:
      values = remote_tasks.on_each_task([
          functools.partial(self._send_read, specs, device)
          for device, specs in sent
      ])
    except errors.OpError:  # A task's failed read, surfacing in a send.
      self._read_here_again([(device, specs, ()) for device, specs in sent])
      raise
    return [(device, specs, tensors)
            for (device, specs), tensors in zip(sent, values)]

  def _received(self, sent, units):
    """The values of each of `units` (`_send_reads` sent), once read.

    Raises:
      The read's error, naming the checkpoint and the value.
    """
    values = {}
    for device, _, tensors in sent:
      try:
        _wait_for(tensors)
      except errors.OpError:
        self._read_here_again(sent)
        raise
      values[device] = iter(tensors)
    return [[next(values[unit.device]) for _ in unit.reads] for unit in units]

  def _read_here_again(self, sent):
    """After a failed read on other tasks, reads their values again here.

    A remote op's error can surface in another task's send or wait, so
    which task failed is not known: read again here, the first damaged
    value raises, naming itself. Where this task cannot find the files
    (a cluster's tasks share them as a rule), the original error stands.
    """
    for _, _, tensors in sent:
      try:
        _wait_for(tensors)
      except errors.OpError:
        pass  # Each read has run once this loop is over.
    try:
      self._restore_v2([spec for _, specs, _ in sent for spec in specs])
    except errors.NotFoundError:
      pass

  def _send_read(self, specs, device):
    """One `RestoreV2` of `specs` on `device`, not waited for."""
    with ops.device(device):
      return restore_v2(self._eager_path, [spec.name for spec in specs],
                        [spec.slice_spec for spec in specs],
                        [spec.dtype for spec in specs])

  def _pieces(self, units):
    """Splits `units` into pieces; returns them and the bytes one may hold.

    Units whose values fit under `memory_limit` make one piece. Over it, a
    piece holds about `restore_piece_bytes`, times the threads reading it
    when a checkpoint has several data files (one thread per file, up to
    `read_threads`), and at most half the limit.
    """
    piece_bytes = self.piece_bytes
    if len(units) < 2:
      return [units], piece_bytes
    byte_sizes = self.byte_sizes
    sizes = [
        sum(byte_sizes.get(spec.name, 0)
            for spec in unit.reads)
        for unit in units
    ]
    total = sum(sizes)
    limit = self.memory_limit
    if restore_memory.fits(total, limit):
      return [units], piece_bytes
    files = self._data_files.of(
        [unit.reads[0].name if unit.reads else "" for unit in units])
    if files is not None:
      piece_bytes = min(piece_bytes * read_lanes.lane_count(files),
                        max(1, limit // 2))
    target = total / math.ceil(total / piece_bytes)
    return [units[run] for run in read_lanes.runs_of_bytes(sizes, target)
           ], piece_bytes

  @contextlib.contextmanager
  def every_value_read_first(self, keep_values=True):
    """A restore within this reads from a checkpoint whose values all read.

    Every value of the checkpoint is read (so its checksum checked), a
    piece at a time, before the restore assigns anything or builds anything
    that would later (a slot variable's initial value, say): values
    restored later on creation or by graph-mode restore ops included, and
    graph building too, although there the restore itself reads nothing,
    because building a restore already sets Python state. Eagerly (if
    `keep_values`) it keeps up to `memory_limit` bytes of values for the
    restore, which does not read those again (a checkpoint under the limit
    is read once), and the restore skips its own check.

    Args:
      keep_values: Whether the restore reads through this object, so that
        values kept serve it.

    Yields:
      Nothing; every value has been read when the body runs.
    """
    keep_bytes = 0
    if keep_values and context.executing_eagerly():
      keep_bytes = self.memory_limit
      if keep_bytes is None:
        keep_bytes = sum(self.byte_sizes.values())
    self._read_every_value(keep_bytes)
    yield
    self._drop_unawaited()

  def _read_every_value(self, keep_bytes):
    """Reads every value, keeping the first `keep_bytes` of them."""
    specs = [Read(key, "", dtype) for key, dtype in self.dtypes.items()]
    sizes = [byte_size(self.shapes[spec.name], spec.dtype) for spec in specs]
    budget = resident_memory.PieceBudget(tuning.TUNING.restore_piece_bytes)
    with context.eager_mode():
      for run in read_lanes.runs_of_bytes(sizes,
                                          tuning.TUNING.restore_piece_bytes):
        values = self._restore_v2(specs[run])
        keep_bytes -= sum(sizes[run])
        if keep_bytes >= 0:
          self._read_ahead.update(((spec.name, ""), value)
                                  for spec, value in zip(specs[run], values))
        else:
          del values
          budget.piece_freed()
    self._pieces_need_checking = False

  def _drop_unawaited(self):
    """Frees the values kept that no object waits for."""
    self._read_ahead = {
        key: value
        for key, value in self._read_ahead.items()
        if key[0] in self._awaited
    }

  def _read_ahead_specs(self, excluded):
    """Awaited values to read with the next read, within the budget.

    At most `read_ahead_budget_bytes`, and at most `memory_limit`.
    """
    budget = tuning.TUNING.read_ahead_budget_bytes
    if self.memory_limit is not None:
      budget = min(budget, self.memory_limit)
    extra = []
    for key in self._awaited:
      if key in excluded or (key, "") in self._read_ahead:
        continue
      budget -= byte_size(self.shapes[key], self.dtypes[key])
      if budget < 0:
        break
      extra.append(Read(key, "", self.dtypes[key]))
    return extra

  def _restore_v2(self, specs, device=None):
    """One eager RestoreV2 of `specs`; errors name the checkpoint and key.

    On `device` (another task's), one op, waited for; otherwise on the
    restore's own device, split across threads (`eager_restore_v2`).
    """
    try:
      return self._read_unchecked(specs, device)
    except errors.OpError as e:
      failing = self._unreadable(specs, device) or specs[0]
      why = checkpoint_opening.why_unreadable(self.save_path, failing.name, e)
      raise type(e)(e.node_def, e.op, f"Failed to read values from checkpoint "
                    f"{self.save_path!r}: checkpoint key {failing.name!r} "
                    f"{why}") from e

  def _read_unchecked(self, specs, device=None):
    if device is not None:
      values = self._send_read(specs, device)
      _wait_for(values)
      return values
    names = [spec.name for spec in specs]
    return eager_restore_v2(
        self._eager_path, names, [spec.slice_spec for spec in specs],
        [spec.dtype for spec in specs],
        list(map(self.byte_sizes.get, names, itertools.repeat(0))),
        self._device, lambda: self._data_files.of(names))

  def _unreadable(self, specs, device=None):
    """The first of `specs` that fails to read alone, found by bisection.

    Only called once a read has failed, so that the error names the value
    that is damaged rather than the first one of the read. None if every
    half reads (the failure did not come from one value).
    """
    while len(specs) > 1:
      half = len(specs) // 2
      try:
        self._read_unchecked(specs[:half], device)
      except errors.OpError:
        specs = specs[:half]
        continue
      specs = specs[half:]
    try:
      self._read_unchecked(specs, device)
    except errors.OpError:
      return specs[0]
    return None


def _hand_over_on_each_task(units_and_values):
  """`_hand_over`, the units of each device from a thread of its own."""
  by_device = {}
  for unit, values in units_and_values:
    by_device.setdefault(unit.device, []).append((unit, values))
  remote_tasks.on_each_task(
      [functools.partial(_hand_over, units) for units in by_device.values()])


def _hand_over(units_and_values):
  """Calls each unit's `restore` with its values."""
  units_and_values = list(units_and_values)
  with variable_batches.direct_kernels(
      sum(len(values) for _, values in units_and_values)):
    for unit, values in units_and_values:
      unit.restore(values)


def _values_of(units, values):
  """Pairs each of `units` with its slice of `values` (its reads')."""
  start = 0
  for unit in units:
    yield unit, values[start:start + len(unit.reads)]
    start += len(unit.reads)


def _wait_for(tensors):
  """Waits for the op making `tensors` to run; raises its error.

  A remote output's shape is known once the op ran, its bytes not copied.
  """
  if tensors:
    _ = tensors[0].shape


def io_device(options):
  """The device `options` asks to read and write on, or None."""
  return getattr(options, "experimental_io_device", None)
