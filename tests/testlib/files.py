"""The files of checkpoints on disk.

Which files a directory holds and whether two directories hold the same
bytes; what failed or killed saves leave behind (`leftovers`); which data
file holds each key and slice (`file_layout`); and real damage done to a
checkpoint's files (`damage`).
"""

import os
import re

from tf_objckpt.engine import bundle_index

from testlib import impls


def files_under(directory):
  """Paths of the files below `directory`, relative to it, sorted."""
  return sorted(
      os.path.relpath(os.path.join(root, name), directory)
      for root, _, names in os.walk(directory)
      for name in names)


def assert_same_files(tmp_path):
  """`tmp_path/tf` and `tmp_path/ours` hold the same files, byte for byte.

  A `checkpoint` state file is compared with its directory replaced, as it
  may name it.
  """
  directories = {impl: tmp_path / impl for impl in impls.IMPLS}
  names = files_under(directories["tf"])
  assert any(name.endswith(".index") for name in names), names
  assert any(".data-" in name for name in names), names
  ours = files_under(directories["ours"])
  assert ours == names, (
      f"only TensorFlow's: {sorted(set(names) - set(ours))}, "
      f"only ours: {sorted(set(ours) - set(names))}")
  for name in names:
    contents = {}
    for impl, directory in directories.items():
      contents[impl] = (directory / name).read_bytes()
      if os.path.basename(name) == "checkpoint":
        contents[impl] = contents[impl].replace(os.fsencode(directory),
                                                b"<dir>")
    assert contents["ours"] == contents["tf"], (
        f"our {name} differs from TensorFlow's from byte "
        f"{_first_difference(contents['tf'], contents['ours'])}")


def _first_difference(expected, actual):
  return next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b),
              min(len(expected), len(actual)))


_INDEXED = re.compile(r"(.*)\.index")
_DATA = re.compile(r"(.*)\.data-\d{5}-of-\d{5}")


def leftovers(directory):
  """`{prefix: [names]}` of the files in `directory` no checkpoint owns.

  A checkpoint owns its index and data files; the state file and meta
  graphs are kept too. Anything else (temporary files, `_temp` and
  `_temp_<hex>` directories, data files without an index, temporary state
  files) is listed under the prefix it was written for.
  """
  names = os.listdir(directory)
  indexed = {
      match.group(1) for match in map(_INDEXED.fullmatch, names) if match
  }
  found = {}
  for name in names:
    data = _DATA.fullmatch(name)
    if (name == "checkpoint" or name.endswith(".meta") or
        _INDEXED.fullmatch(name) or (data and data.group(1) in indexed)):
      continue
    prefix = re.split(r"\.|_temp(?:_[0-9a-f]{32})?$", name)[0]
    found.setdefault(prefix, []).append(name)
  return found


def bytes_under(directory, names):
  """The total size of `names` in `directory` (directories included)."""
  total = 0
  for name in names:
    path = os.path.join(directory, name)
    if os.path.isdir(path):
      total += sum(
          os.path.getsize(os.path.join(root, file))
          for root, _, files in os.walk(path)
          for file in files)
    else:
      total += os.path.getsize(path)
  return total


def file_layout(prefix):
  """Where each entry of a checkpoint is: `{key: (data file, offset, size)}`.

  Keys of slices (binary after the key's name) are written as `repr`s of
  their bytes; entries of sliced tensors list their slices' shapes.
  """
  index = bundle_index.read_bundle_index(prefix)
  layout = {"num_shards": index.header.num_shards}
  for key, entry in index.entries.items():
    name = repr(key.encode("utf-8", "surrogateescape"))
    layout[name] = (entry.shard_id, entry.offset, entry.size, len(entry.slices))
  return layout


def _truncate_data_file(prefix, _):
  """Cuts the first data file inside its middle value."""
  index = bundle_index.read_bundle_index(prefix)
  data_file = index.data_file(0)
  offsets = sorted(
      entry.offset for entry in index.entries.values() if entry.shard_id == 0)
  os.truncate(data_file, offsets[len(offsets) // 2] + 3)


def _flip_value_bytes(prefix, key):
  """Flips bytes inside `key`'s stored value (its checksum then fails)."""
  index = bundle_index.read_bundle_index(prefix)
  entry = index.entries[key]
  with open(index.data_file_of(key), "r+b") as f:
    f.seek(entry.offset + entry.size // 2)
    data = f.read(4)
    f.seek(entry.offset + entry.size // 2)
    f.write(bytes(byte ^ 0xA5 for byte in data))


def _remove_index(prefix, _):
  os.remove(bundle_index.index_file_name(prefix))


# Ways to damage a checkpoint, as a torn copy, a failing disk or bit rot do.
DAMAGE = {
    "truncated": _truncate_data_file,
    "flipped": _flip_value_bytes,
    "no_index": _remove_index
}


def damage(prefix, how, key=None):
  """Damages checkpoint `prefix` in one of the ways of `DAMAGE`.

  Args:
    prefix: The checkpoint.
    how: A key of `DAMAGE`.
    key: The value whose bytes "flipped" changes.
  """
  DAMAGE[how](prefix, key)
