"""Sharding policies: how a save splits each task's values into data files.

A policy is a TensorFlow `ShardingCallback`, so TensorFlow's and our
`CheckpointOptions` take it, and a save hands it each task's values as
`ShardableTensor`s; called in a `tf.function`, it runs as Python (not
converted by AutoGraph, as TensorFlow's own code is not). Three policies:

- `ShardByTaskPolicy`: one data file per task, what a save without a
  policy writes (TensorFlow's `tf.train.experimental.ShardByTaskPolicy`).
- `MaxShardSizePolicy`: data files of at most a given size, values split
  into slices to fit (TensorFlow's `tf.train.experimental
  .MaxShardSizePolicy`): the same slices in the same files as TensorFlow's,
  so the checkpoint's files are TensorFlow's, byte for byte.
- `ParallelShardsPolicy` (ours): about one data file per core. One data
  file is one `SaveV2` (and one `RestoreV2` reads it), and one op moves
  bytes at the speed of one core; a save of several shards writes them
  from parallel threads (`writes`), and eager reads split across threads
  (`reads`), so a checkpoint split into about one shard per core moves at
  the speed of all of them. Values are never split: the keys are those of
  a save without a policy.
"""

import copy
import math
import typing
from typing import Any, Optional, Sequence

import numpy as np
from tensorflow.python.autograph.impl import api as autograph
from tensorflow.python.eager import context
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import ops
from tensorflow.python.ops import array_ops
from tensorflow.python.ops import variables
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.trackable import base as tf_base

from tf_objckpt.engine import reads
from tf_objckpt.engine import tf_compat
from tf_objckpt.engine import tuning

# TensorFlow 2.15 has no sharding callbacks; the class still exists there,
# and raises TypeError when made.
_ShardingCallback: Any = getattr(tf_compat.sharding_util, "ShardingCallback",
                                 object)


class ParallelShardsPolicy(_ShardingCallback):
  """Splits each task's values into shards of about equal size, one per core.

  The shard count is the number of cores (the engine's write threads,
  `tuning.TUNING.write_threads`) or `max_shards`, but no more than gives
  each shard at least `min_shard_bytes`: a small checkpoint stays one
  data file. Values are kept whole and spread over the shards largest
  first, each into the shard holding the fewest bytes so far; so a value
  larger than all others together gets a shard to itself, and the save
  goes no faster than that shard (TensorFlow's `MaxShardSizePolicy` splits
  values, at the cost of slices in the checkpoint).

  Use it as any sharding policy:

      options = tf.train.CheckpointOptions(
          experimental_sharding_callback=tf_objckpt.ParallelShardsPolicy())
      checkpoint.write(path, options=options)
  """

  def __init__(self,
               max_shards: Optional[int] = None,
               min_shard_bytes: int = 32 << 20) -> None:
    """Makes the policy.

    Args:
      max_shards: At most this many shards per task; None for one per
        core.
      min_shard_bytes: Shards hold at least this many bytes (unless the
        task's values are fewer).

    Raises:
      TypeError: On TensorFlow 2.15, which has no sharding callbacks.
      ValueError: If `max_shards` or `min_shard_bytes` is below 1.
    """
    tf_compat.check_sharding_callbacks(type(self).__name__)
    if max_shards is not None and max_shards < 1:
      raise ValueError(f"max_shards must be at least 1, not {max_shards}.")
    if min_shard_bytes < 1:
      raise ValueError(
          f"min_shard_bytes must be at least 1, not {min_shard_bytes}.")
    self.max_shards = max_shards
    self.min_shard_bytes = min_shard_bytes

  @property
  def description(self) -> str:
    return ("Split tensors into shards of about equal size, one per core "
            "(tf_objckpt's ParallelShardsPolicy).")

  @autograph.do_not_convert
  def __call__(self, shardable_tensors: Sequence) -> Sequence[dict]:
    """The shards of one task's `ShardableTensor`s, biggest first."""
    sizes = [_byte_size(tensor) for tensor in shardable_tensors]
    shards = []
    for members in self._members(sizes):
      shard: dict = {}
      for index in members:
        _put_whole(shard, shardable_tensors[index])
      shards.append(shard)
    return shards

  def _members(self, sizes):
    """Indices of `sizes` in each shard, fewer shards while one is small."""
    most = self.max_shards or tuning.TUNING.write_threads
    count = max(1, min(most, len(sizes), sum(sizes) // self.min_shard_bytes))
    while True:
      members, loads = _spread(sizes, count)
      if count == 1 or min(loads) >= self.min_shard_bytes:
        return members
      count -= 1


def _spread(sizes, count):
  """Indices of `sizes` in `count` bins: each, largest first, to the lightest.

  Returns:
    The indices in each bin, and each bin's total size.
  """
  members = [[] for _ in range(count)]
  loads = [0] * count
  for index in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
    lightest = loads.index(min(loads))
    members[lightest].append(index)
    loads[lightest] += sizes[index]
  return members, loads


def _byte_size(tensor):
  """About how many bytes a `ShardableTensor` writes (0 if its shape is
  not known: the object graph, graph building)."""
  if not tensor.shape.is_fully_defined():
    return 0
  return reads.byte_size(tensor.shape.as_list(), tensor.dtype)


def _put_whole(shard, tensor):
  """Adds a `ShardableTensor` to `shard` (`{key: {slice spec: tensor}}`)."""
  shard.setdefault(tensor.checkpoint_key, {})[tensor.slice_spec] = tensor.tensor


class ShardByTaskPolicy(_ShardingCallback):
  """One shard per task: each task's values in one data file.

  What a save writes without a sharding policy; named for code that passes
  TensorFlow's `tf.train.experimental.ShardByTaskPolicy()`.
  """

  def __init__(self) -> None:
    """Makes the policy.

    Raises:
      TypeError: On TensorFlow 2.15, which has no sharding callbacks.
    """
    tf_compat.check_sharding_callbacks(type(self).__name__)

  @property
  def description(self) -> str:
    return ("One data file per task, holding all of its values "
            "(tf_objckpt's ShardByTaskPolicy).")

  @autograph.do_not_convert
  def __call__(self, shardable_tensors: Sequence) -> Sequence[dict]:
    """One shard holding every `ShardableTensor` of the task."""
    shard: dict = {}
    for tensor in shardable_tensors:
      _put_whole(shard, tensor)
    return [shard]


class MaxShardSizePolicy(_ShardingCallback):
  """Shards of at most `max_shard_size` bytes, values split into slices.

  Fills shards in the order the save gives the values, cutting a value
  that does not fit the room left into slices along the axis that leaves
  the fewest pieces, exactly as TensorFlow's
  `tf.train.experimental.MaxShardSizePolicy` does: same slices, same shards,
  so the data files are TensorFlow's (2.16's cuts, where that is the
  installed version). What cannot be cut small enough (a scalar larger
  than a shard, or the smallest piece the cuts make) gets a shard of its
  own, after the others, with a warning. The object graph, whose size is
  known only when saving, counts as 0 bytes, as do string values when the
  policy runs in a `tf.function`.
  """

  def __init__(self, max_shard_size: int) -> None:
    """Makes the policy.

    Args:
      max_shard_size: The most bytes a shard holds (unless one value's
        smallest slice is larger).

    Raises:
      TypeError: On TensorFlow 2.15, which has no sharding callbacks.
    """
    tf_compat.check_sharding_callbacks(type(self).__name__)
    self.max_shard_size = max_shard_size

  @property
  def description(self) -> str:
    return (f"Shards of at most {self.max_shard_size} bytes, values split "
            "into slices to fit (tf_objckpt's MaxShardSizePolicy).")

  @autograph.do_not_convert
  def __call__(self, shardable_tensors: Sequence) -> Sequence[dict]:
    """The shards of one task's `ShardableTensor`s, in file order."""
    packer = (_ShardPacker216 if tf_compat.MAX_SHARD_SIZE_CUTS_AS_2_16 else
              _ShardPacker)(self.max_shard_size)
    for tensor in shardable_tensors:
      packer.add(tensor)
    return packer.shards()


class _Piece(typing.NamedTuple):
  """A value being packed: its key, device, value and element size."""
  key: str
  device: Any
  value: Any
  element_bytes: int


class _Box:
  """The part of one value not yet placed: an offset and an end per axis.

  Offsets are within the full variable (`full_shape`), as slice specs name
  them; a value given as a slice already starts at `origin`.
  """

  def __init__(self, tensor):
    if tensor.slice_spec:
      given = variables.Variable.SaveSliceInfo.from_spec(tensor.slice_spec)
      self.full_shape = list(given.full_shape)
      self.origin = list(given.var_offset)
      lengths = list(given.var_shape)
    else:
      lengths = tensor.shape.as_list() if tensor.shape.rank is not None else []
      self.full_shape = list(lengths)
      self.origin = [0] * len(lengths)
    self.offset = list(self.origin)
    self.end = [start + length for start, length in zip(self.origin, lengths)]

  def lengths(self):
    return [end - start for start, end in zip(self.offset, self.end)]

  def count(self):
    return math.prod(self.lengths())

  def slice_spec(self, key, lengths):
    """The slice spec of `lengths` elements from the current offset."""
    return variables.Variable.SaveSliceInfo(full_name=key,
                                            full_shape=self.full_shape,
                                            var_offset=self.offset,
                                            var_shape=lengths).spec.strip()

  def begin(self):
    """The current offset within the given value."""
    return [start - origin for start, origin in zip(self.offset, self.origin)]

  def split_first_row(self):
    """Takes the first row along the first axis longer than one, as a box.

    Returns:
      The row's box (this box keeps the rest), or None if this box holds
      one element at most.
    """
    for axis, length in enumerate(self.lengths()):
      if length > 1:
        row = copy.copy(self)
        row.offset = list(self.offset)
        row.end = list(self.end)
        row.end[axis] = self.offset[axis] + 1
        self.offset[axis] += 1
        return row
    return None


class _Packer:
  """Packs one task's values into shards of at most `limit` bytes.

  `add` places each value in turn, cutting slices off the front of what is
  left of it (a `_Box`) along the axis `_next_cut` picks, as TensorFlow's
  `MaxShardSizePolicy` does; the two packers below differ where
  TensorFlow's versions do (each defines `add`, `shards`, `_place`,
  `_rows_that_fit` and `_piece_fits`). A value's first size is its real
  byte size (for strings, the sum of their lengths), each later one its
  element count times the largest element's size, as in TensorFlow.
  """

  def __init__(self, limit):
    self._limit = limit
    self._shards = []
    self._room = limit
    self._oversized = []
    self._warned_in_function = False

  def _new_shard(self):
    self._shards.append({})
    self._room = self._limit

  def _next_cut(self, box, element_bytes):
    """(axis, rows) of the next slice to cut off the front of `box`.

    The axis along which the room left takes the most of the value, so
    that it is cut into the fewest pieces: axis 0 unless another needs
    fewer pieces and its pieces fit. Zero rows when not one row fits.
    """
    lengths = box.lengths()
    count = math.prod(lengths)

    def pieces(axis):
      rows = self._rows_that_fit(count // lengths[axis] * element_bytes)
      return math.ceil(lengths[axis] / rows) if rows else math.inf

    best_axis, fewest = 0, pieces(0)
    for axis in range(1, len(lengths)):
      candidate = pieces(axis)
      if (candidate < fewest and
          self._piece_fits(count * element_bytes / candidate)):
        best_axis, fewest = axis, candidate
    return best_axis, math.ceil(lengths[best_axis] / fewest)

  def _cut(self, key, device, value, box, axis, rows, element_bytes):
    """Cuts `rows` off the front of `box` along `axis` and places them."""
    lengths = box.lengths()
    lengths[axis] = rows
    with ops.device(device):
      piece = array_ops.slice(value, box.begin(), lengths)
    spec = box.slice_spec(key, lengths)
    piece_bytes = math.prod(lengths) * element_bytes
    if piece_bytes > self._limit:
      _warn_oversized(key, f"its slice {spec}", piece_bytes, self._limit)
      self._oversized.append({key: {spec: piece}})
    else:
      self._place(key, spec, piece, piece_bytes)
    box.offset[axis] += rows

  def _measure(self, tensor, box):
    """(value to slice, bytes per element, byte size) of a `ShardableTensor`.

    The object graph and variants count as nothing, as in TensorFlow.
    Strings are measured by their values: read with the default session
    when graph building (the value read is what gets sliced, as in
    TensorFlow); in a `tf.function`, where they cannot be read, they count
    as nothing, with a warning.
    """
    value = tensor.tensor
    dtype = dtypes.as_dtype(tensor.dtype)
    if (tensor.checkpoint_key == tf_base.OBJECT_GRAPH_PROTO_KEY or
        dtype == dtypes.variant):
      return value, 0, 0
    if dtype != dtypes.string:
      return value, dtype.size, box.count() * dtype.size
    if context.executing_eagerly():
      lengths = _string_lengths(value.numpy())
    elif ops.get_default_session() is not None:
      value = ops.get_default_session().run(value)
      lengths = _string_lengths(value)
    else:
      self._warn_in_function()
      return value, 0, 0
    return value, max(lengths, default=0), sum(lengths)

  def _warn_in_function(self):
    if not self._warned_in_function:
      self._warned_in_function = True
      logging.warning(
          "MaxShardSizePolicy: the checkpoint sharding policy is being "
          "executed in a tf.function, where string values cannot be read: "
          "they count as 0 bytes, so shards holding them may exceed "
          "max_shard_size.")


class _ShardPacker(_Packer):
  """Packs as TensorFlow 2.17 and later do.

  A shard full to the byte starts the next one at once; values given as
  slices are cut within their slice. Where not one row of what is left of
  a value fits an empty shard, TensorFlow's policy loops forever; ours
  packs the first row on its own (see `_pack`).
  """

  def __init__(self, limit):
    super().__init__(limit)
    self._new_shard()

  def shards(self):
    """The shards filled, then one per oversized slice."""
    filled = self._shards if self._shards[0] else []
    return filled + self._oversized

  def add(self, tensor):
    """Places one `ShardableTensor`, cut into slices where it must be."""
    box = _Box(tensor)
    value, element_bytes, size = self._measure(tensor, box)
    if not box.end:  # A scalar, or a value of unknown shape.
      self._add_whole(tensor.checkpoint_key, tensor, value, size)
      return
    self._pack(
        _Piece(tensor.checkpoint_key, tensor.device, value, element_bytes), box,
        size)

  def _pack(self, piece, box, size):
    """Places `box` of `piece`'s value, of `size` bytes, in slices that fit."""
    while size > self._room:
      axis, rows = self._next_cut(box, piece.element_bytes)
      if rows == 0 and self._room < self._limit:
        self._new_shard()
        continue
      if rows == 0:
        # Not one row along any axis fits an empty shard (TensorFlow's
        # policy loops forever here): the first row is packed on its own,
        # its elements apart if need be; a single element goes alone.
        row = box.split_first_row()
        if row is None:
          self._cut(piece.key, piece.device, piece.value, box, 0, 1,
                    piece.element_bytes)
        else:
          self._pack(piece, row, row.count() * piece.element_bytes)
      else:
        self._cut(piece.key, piece.device, piece.value, box, axis, rows,
                  piece.element_bytes)
      size = box.count() * piece.element_bytes
    if box.count() > 0:
      lengths = box.lengths()
      with ops.device(piece.device):
        rest = array_ops.slice(piece.value, box.begin(), lengths)
      self._shards[-1].setdefault(piece.key,
                                  {})[box.slice_spec(piece.key, lengths)] = rest
    self._room -= size

  def _add_whole(self, key, tensor, value, size):
    """Places a value that cannot be sliced (a scalar, or unknown shape)."""
    if size > self._limit:
      _warn_oversized(key, f"a {tensor.dtype.name} scalar", size, self._limit)
      self._oversized.append({key: {tensor.slice_spec: value}})
      return
    if size > self._room:
      self._new_shard()
    self._shards[-1].setdefault(key, {})[tensor.slice_spec] = value
    self._room -= size

  def _rows_that_fit(self, row_bytes):
    return self._room // row_bytes

  def _piece_fits(self, piece_bytes):
    return piece_bytes <= self._room

  def _place(self, key, spec, piece, piece_bytes):
    self._shards[-1].setdefault(key, {})[spec] = piece
    self._room -= piece_bytes
    if self._room == 0:
      self._new_shard()


class _ShardPacker216(_Packer):
  """Packs as TensorFlow 2.16 does.

  A shard is started when something goes into it; at least one row is cut
  at a time, and a row that does not fit the room left starts the next
  shard; a value that is not cut keeps its tensor. TensorFlow 2.16 cuts
  values given as slices as if they were whole (and cannot restore them),
  and fails on strings in a `tf.function`: ours cuts them within their
  slice, and counts such strings as nothing.
  """

  def shards(self):
    return self._shards + self._oversized

  def add(self, tensor):
    """Places one `ShardableTensor`, cut into slices where it must be."""
    key = tensor.checkpoint_key
    box = _Box(tensor)
    value, element_bytes, size = self._measure(tensor, box)
    if not box.end and size > self._limit:
      _warn_oversized(key, f"a {tensor.dtype.name} scalar", size, self._limit)
      self._oversized.append({key: {tensor.slice_spec: value}})
      return
    cut = False
    while size > self._room:
      if not box.end:  # A scalar is not cut: it starts the next shard.
        self._new_shard()
        continue
      axis, rows = self._next_cut(box, element_bytes)
      lengths = box.lengths()
      lengths[axis] = rows
      if self._room < math.prod(lengths) * element_bytes <= self._limit:
        self._new_shard()
        continue
      self._cut(key, tensor.device, value, box, axis, rows, element_bytes)
      cut = True
      size = box.count() * element_bytes
    if box.count() > 0:
      lengths = box.lengths()
      rest = value
      if cut:
        with ops.device(tensor.device):
          rest = array_ops.slice(value, box.begin(), lengths)
      if not self._shards:
        self._shards.append({})
      self._shards[-1].setdefault(key, {})[box.slice_spec(key, lengths)] = rest
    self._room -= size

  def _rows_that_fit(self, row_bytes):
    return max(1, math.floor(self._room / row_bytes))

  def _piece_fits(self, piece_bytes):
    return piece_bytes < self._room

  def _place(self, key, spec, piece, piece_bytes):
    if not self._shards or self._room < 1:
      self._new_shard()
    self._shards[-1].setdefault(key, {})[spec] = piece
    self._room -= piece_bytes


def _string_lengths(value):
  """The byte length of each string of a numpy value (bytes or an array)."""
  return [len(item) for item in np.ravel(np.asarray(value, dtype=object))]


def _warn_oversized(key, what, size, limit):
  logging.warning(
      "MaxShardSizePolicy: '%s' cannot be cut below %d bytes (%s), more than "
      "max_shard_size (%d bytes): it gets a data file of its own.", key, size,
      what, limit)
