"""The names a save writes before it is final, and the patterns finding them.

A save of prefix P writes its files under temporary names and renames them
into place: `P.data-*.tempstate<n>` and `P.index.tempstate<n>` (or, for a
sharded save, shards in a directory `MergeV2Checkpoints` moves them out
of), the index last. An eager save's shards go to a directory of its own,
`P_temp_<32 hex digits>` (`P_temp_<hex>.part-*` beside P on S3), so that no
save ever merges a shard another save wrote; a graph's save op, built
once and run many times, writes TensorFlow's `P_temp` (`P.part-*`). Files written atomically (the `checkpoint` state
file, a meta graph) go to a temporary copy, `<file>.tmp<32 hex digits>`,
renamed over the file. Each temporary name and the pattern recognizing it
live here together, so that cleanup (`leftovers`) and undo (`commit`) find
exactly what saves write.
"""

import os
import re
import uuid

# Shards of a save are written to `<prefix>_temp/part-...` before the merge
# (`<prefix>_temp_<hex>/part-...` eagerly).
TEMP_DIR_SUFFIX = "_temp"
_UNIQUE = r"_[0-9a-f]{32}"

_SHARD = r"-\d{5}-of-\d{5}"
_DATA = rf"\.data{_SHARD}"
_TEMPSTATE = r"\.tempstate\d+"
# What follows a prefix in the names of an unfinished save's files: SaveV2's
# and SaveSlices' temporary files (V1's for the bare prefix, hence ""),
# the shards' directory, and the shards S3 saves write beside the prefix.
_PARTIAL = (rf"(?:\.index|{_DATA}|{_SHARD}|){_TEMPSTATE}"
            rf"|{TEMP_DIR_SUFFIX}(?:{_UNIQUE})?"
            rf"|(?:{TEMP_DIR_SUFFIX}{_UNIQUE})?\.part{_SHARD}"
            rf"\.(?:index|data{_SHARD})(?:{_TEMPSTATE})?")
# ... and of a finished one: V2's index and data files, V1's files.
_FINAL = rf"\.index|{_DATA}|{_SHARD}|"
# The temporary copy of a file written atomically, by our state file writes
# or TensorFlow's file layer (a meta graph); it stays behind when the write
# fails.
_TEMPORARY_COPY = r"\.tmp[0-9a-f]{32}"


def shard_suffixes(unique):
  """What a save appends to its prefix to name its shards before the merge.

  Args:
    unique: Whether the names are this save's own (a new random part).

  Returns:
    The suffix on file systems with directories (`_temp[_<hex>]/part`), and
    the one on S3, where renames are not atomic anyway (`[_temp_<hex>].part`).
  """
  token = f"_{uuid.uuid4().hex}" if unique else ""
  return (os.path.normpath(f"{TEMP_DIR_SUFFIX}{token}/part"),
          f"{TEMP_DIR_SUFFIX}{token}.part" if unique else ".part")


def temporary_copy(path):
  """A new name for the temporary copy of `path`, written atomically."""
  return f"{path}.tmp{uuid.uuid4().hex}"


def temporary_copies(name):
  """A pattern matching the names of temporary copies of file `name`."""
  return re.compile(re.escape(name) + _TEMPORARY_COPY)


def finished_files(name):
  """A pattern matching the final files of the checkpoint named `name`."""
  return re.compile(rf"{re.escape(name)}(?:{_FINAL})")


def own_files(name):
  """A pattern matching every file a save of `name` writes.

  Its group "partial" is set for the temporary ones.
  """
  return re.compile(rf"{re.escape(name)}(?:(?P<partial>{_PARTIAL})|{_FINAL})")


def numbered(name, base, directory):
  """A regular expression for `name` and the prefixes numbered from `base`."""
  names = re.escape(name)
  if base is not None:
    base_directory, base_name = os.path.split(base)
    if base_directory == directory:
      names += "|" + re.escape(base_name) + r"-\d+"
  return names


def leftovers(entries, names, keep, state_file):
  """`{prefix name: [entries]}` of unfinished saves among `entries`.

  Args:
    entries: Names in a directory.
    names: A regular expression matching the prefix names to look at.
    keep: Prefix names whose data files stay even without an index.
    state_file: The name of the state file whose temporary copies (written
      before it is replaced) count as leftovers, or None.
  """
  pattern = re.compile(rf"(?P<name>{names})(?:(?P<partial>{_PARTIAL})|"
                       rf"(?P<data>{_DATA})|(?P<index>\.index))")
  state_temp = state_file and temporary_copies(state_file)
  partial, data, indexed = {}, {}, set()
  for entry in entries:
    if state_temp and state_temp.fullmatch(entry):
      partial[entry] = [entry]
      continue
    match = pattern.fullmatch(entry)
    if match is None:
      continue
    name = match.group("name")
    if match.group("partial"):
      partial.setdefault(name, []).append(entry)
    elif match.group("data"):
      data.setdefault(name, []).append(entry)
    else:
      indexed.add(name)
  for name, files in data.items():
    if name not in indexed and name not in keep:
      partial.setdefault(name, []).extend(files)
  return partial
