"""Reads a checkpoint's `.index` file: where each key's bytes are stored.

TensorFlow's checkpoint readers give a key's dtype and shape, but not the
data file that holds it. Errors about damaged values, and tools that list
shards, need that: this module parses the `.index` file (a table of
`BundleEntryProto`s keyed by checkpoint key, behind a `BundleHeaderProto`
under the empty key) through TensorFlow's file layer, so that it works on
every filesystem TensorFlow supports.

The table is the LevelDB layout TensorFlow's bundle writer uses: data
blocks of prefix-compressed entries, an index block pointing at them, and a
fixed-size footer that locates the index block. Bundle writers never
compress blocks.
"""

import dataclasses
import struct

from google.protobuf import message
from tensorflow.core.protobuf import tensor_bundle_pb2
from tensorflow.python.framework import errors
from tensorflow.python.lib.io import file_io

_FOOTER_BYTES = 48
_TABLE_MAGIC = 0xdb4775248b80fb57
_BLOCK_TRAILER_BYTES = 5  # Compression type, then a checksum.
_UNCOMPRESSED = 0


@dataclasses.dataclass
class BundleIndex:
  """What a checkpoint's `.index` file says."""
  prefix: str
  header: tensor_bundle_pb2.BundleHeaderProto
  entries: dict  # Checkpoint key -> BundleEntryProto.

  @property
  def num_shards(self):
    return self.header.num_shards

  def data_file(self, shard_id):
    """The name of data file `shard_id` of this checkpoint."""
    return data_file_name(self.prefix, shard_id, self.header.num_shards)

  def data_file_of(self, key):
    """The data file holding `key`, or None if the index lacks it."""
    entry = self.entries.get(key)
    return None if entry is None else self.data_file(entry.shard_id)

  def data_file_sizes(self):
    """`{data file: bytes}`: every data file, and the size its values need.

    A data file shorter than that is truncated (or still being written).
    """
    sizes = {self.data_file(shard): 0 for shard in range(self.num_shards)}
    for entry in self.entries.values():
      file = self.data_file(entry.shard_id)
      sizes[file] = max(sizes.get(file, 0), entry.offset + entry.size)
    return sizes

  def damaged_data_files(self):
    """`{data file: DataFileDamage}` of the data files missing or too short."""
    damaged = {}
    for file, needed in self.data_file_sizes().items():
      size = file_size(file)
      if size is None or size < needed:
        damaged[file] = DataFileDamage(file, size, needed)
    return damaged

  def unreadable_keys(self, damage):
    """The keys whose bytes lie beyond the end of `damage.file`: all of a
    missing file's."""
    return sorted(
        key for key, entry in self.entries.items()
        if self.data_file(entry.shard_id) == damage.file and
        (damage.size is None or entry.offset + entry.size > damage.size))


@dataclasses.dataclass(frozen=True)
class DataFileDamage:
  """A data file missing, or shorter than its checkpoint's index says.

  `str()` is the one wording of it, wherever it is reported (`verify`,
  restores, readers, `inspect`, `checkpoints_iterator`).
  """
  file: str
  size: "int | None"  # None: the file is missing.
  needed: int  # The bytes the index places in it.

  def __str__(self):
    if self.size is None:
      return "data file is missing"
    return (f"data file is truncated: {self.size} bytes, the index places "
            f"values up to byte {self.needed}")


def data_file_name(prefix, shard_id, num_shards):
  """TensorFlow's name for one data file of checkpoint `prefix`."""
  return f"{prefix}.data-{shard_id:05d}-of-{num_shards:05d}"


def index_file_name(prefix):
  return prefix + ".index"


def read_if_present(prefix):
  """The index of checkpoint `prefix`, or None if it has no `.index` file.

  V1 checkpoints (and paths that hold no checkpoint) have none.
  """
  if not file_io.file_exists(index_file_name(prefix)):
    return None
  return read_bundle_index(prefix)


def file_size(path):
  """The size of file `path` in bytes, or None if it does not exist."""
  try:
    return file_io.stat(path).length
  except errors.NotFoundError:
    return None


def read_bundle_index(prefix):
  """Parses the `.index` file of checkpoint `prefix`.

  Raises:
    NotFoundError: If the file does not exist.
    DataLossError: If it is not a readable bundle index; the message names
      the file.
  """
  return BundleIndex(prefix, *_parse(prefix, _decode_entries))


def read_header_and_keys(prefix):
  """The header and the checkpoint keys of checkpoint `prefix`'s index.

  Far quicker than `read_bundle_index` on large checkpoints: decoding each
  entry's proto is what costs there. Raises as `read_bundle_index`.
  """
  return _parse(prefix, lambda entries: [_decode_key(key) for key in entries])


def _decode_entries(entries):
  return {
      _decode_key(key): tensor_bundle_pb2.BundleEntryProto.FromString(value)
      for key, value in entries.items()
  }


def _decode_key(key):
  # Keys of slices hold binary offsets: kept as undecodable bytes.
  return key.decode("utf-8", "surrogateescape")


def _parse(prefix, decode_entries):
  """The header of `prefix`'s index, and `decode_entries({key: value})`."""
  path = index_file_name(prefix)
  contents = file_io.read_file_to_string(path, binary_mode=True)
  try:
    entries = dict(_table_entries(contents))
    header = tensor_bundle_pb2.BundleHeaderProto.FromString(entries.pop(b""))
    return header, decode_entries(entries)
  except (ValueError, KeyError, IndexError, struct.error,
          message.DecodeError) as e:
    raise errors.DataLossError(
        None, None, f"The checkpoint index file {path!r} is corrupt or "
        f"truncated: {e}") from e


def _table_entries(contents):
  """Yields (key, value) bytes of every entry of the table `contents`."""
  if len(contents) < _FOOTER_BYTES:
    raise ValueError(f"{len(contents)} bytes are too few for a table")
  footer = contents[-_FOOTER_BYTES:]
  if struct.unpack("<Q", footer[-8:])[0] != _TABLE_MAGIC:
    raise ValueError("the table's footer has no magic number")
  _, position = _read_handle(footer, 0)  # The meta-index block: unused.
  index_handle, _ = _read_handle(footer, position)
  for _, handle_bytes in _block_entries(contents, index_handle):
    data_handle, _ = _read_handle(handle_bytes, 0)
    yield from _block_entries(contents, data_handle)


def _read_handle(data, position):
  """A block handle (offset, size) at `position`, and the next position."""
  offset, position = _read_varint(data, position)
  size, position = _read_varint(data, position)
  return (offset, size), position


def _block_entries(contents, handle):
  """Yields (key, value) of the block at `handle`, undoing key sharing."""
  offset, size = handle
  if offset + size + _BLOCK_TRAILER_BYTES > len(contents):
    raise ValueError(f"a block at byte {offset} runs past the end")
  if contents[offset + size] != _UNCOMPRESSED:
    raise ValueError(f"the block at byte {offset} is compressed")
  block = contents[offset:offset + size]
  restarts, = struct.unpack("<I", block[-4:])
  end = size - 4 * (restarts + 1)
  position, key = 0, b""
  while position < end:
    shared, position = _read_varint(block, position)
    unshared, position = _read_varint(block, position)
    value_length, position = _read_varint(block, position)
    if shared > len(key) or position + unshared + value_length > end:
      raise ValueError(f"an entry of the block at byte {offset} is damaged")
    key = key[:shared] + block[position:position + unshared]
    position += unshared
    yield key, block[position:position + value_length]
    position += value_length


def _read_varint(data, position):
  """A little-endian base-128 integer at `position`, and the next position."""
  result = shift = 0
  while True:
    byte = data[position]
    result |= (byte & 0x7f) << shift
    position += 1
    if not byte & 0x80:
      return result, position
    shift += 7
    if shift > 63:
      raise ValueError("a varint is too long")
