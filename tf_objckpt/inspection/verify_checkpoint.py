"""`tf-objckpt verify`: reads every value of a checkpoint and checks its graph.

Every value of every data file is read through the I/O engine's `RestoreV2`
reads, which check each value's checksum; missing and truncated data files
are found from the index: such a file is one problem, followed by the keys
of the values it cannot give (those beyond a truncated file's end are not
read). The object graph is checked by the same code that guards restores
(`object_graph_check`): every child, slot and attribute must point at
something that exists. Values no object refers to are warnings. Each
problem names its file and key. Problems are counted one per value that
cannot be read, and one for the object graph, however many lines describe
them.
"""

import re
import sys
import time
from typing import NamedTuple, Optional

from tensorflow.python.framework import errors

from tf_objckpt.engine import reads
from tf_objckpt.inspection import checkpoint_listing
from tf_objckpt.restoring import object_graph_check
from tf_objckpt.restoring import restore_report

# Values are read in batches of at most this many bytes (and keys), so that
# memory stays bounded whatever the checkpoint's size.
_BATCH_BYTES = 256 << 20
_BATCH_KEYS = 4096

_OBJECT_GRAPH_KEY = checkpoint_listing.OBJECT_GRAPH_KEY


class Problem(NamedTuple):
  """One finding: an error, or a warning when `warning` is set."""
  file: str
  key: str
  message: str
  warning: bool = False
  # What the problem counts as: the keys of the values it finds unreadable
  # (the object graph's key for faults of the graph). None means `key` (or
  # `file`).
  covers: Optional[tuple] = None

  def subjects(self):
    if self.covers is not None:
      return self.covers
    return (self.key or self.file,)

  def __str__(self):
    """The problem in one line; `report_lines` lists the keys it covers."""
    kind = "warning" if self.warning else "error"
    key = f" {self.key}:" if self.key else ""
    return f"{kind}: {self.file}:{key} {self.message}"


class Result(NamedTuple):
  """What `verify` found and how much it read."""
  problems: list
  values_read: int  # The object graph not counted.
  graph_read: bool  # Whether the object graph was read too.
  bytes_read: int
  seconds: float

  @property
  def errors(self):
    return [problem for problem in self.problems if not problem.warning]

  def problem_count(self):
    """One per value that cannot be read, and one for the object graph."""
    return len(_subjects(self.errors))

  @property
  def warnings(self):
    return [problem for problem in self.problems if problem.warning]


def _subjects(problems):
  """What `problems` count as (see `Problem.covers`), once each."""
  return {subject for problem in problems for subject in problem.subjects()}


class _Progress:
  """A progress line on stderr, rewritten in place (terminals only)."""

  def __init__(self, total_values, total_bytes, stream=None):
    self._stream = stream or sys.stderr
    self._enabled = self._stream.isatty()
    self._total_values = total_values
    self._total_bytes = total_bytes
    self._last = 0.0

  def update(self, values, size):
    now = time.monotonic()
    if not self._enabled or now - self._last < 0.2:
      return
    self._last = now
    self._stream.write(f"\rverifying: {values}/{self._total_values} values, "
                       f"{checkpoint_listing.format_bytes(size)} of "
                       f"{checkpoint_listing.format_bytes(self._total_bytes)}")
    self._stream.flush()

  def done(self):
    if self._enabled:
      self._stream.write("\r\033[K")
      self._stream.flush()


def verify(listing, progress_stream=None):
  """Reads and checks everything of `listing`'s checkpoint.

  Args:
    listing: A `checkpoint_listing.Listing` (opened with `strict=False`, so
      that a damaged object graph is reported rather than raised).
    progress_stream: Where to write the progress line (default stderr);
      only a terminal gets one.

  Returns:
    A `Result`.
  """
  start = time.monotonic()
  problems = file_problems(listing)
  lost = set(_subjects(problems))
  to_read = [
      value for value in _in_file_order(listing) if value.key not in lost
  ]
  progress = _Progress(len(to_read), sum(value.bytes for value in to_read),
                       progress_stream)
  values_read = bytes_read = 0
  for batch in _batches(to_read):
    problems.extend(read_values(listing, batch)[1])
    values_read += len(batch)
    bytes_read += sum(value.bytes for value in batch)
    progress.update(values_read, bytes_read)
  progress.done()
  problems.extend(
      _object_graph_problems(listing,
                             graph_unreadable=_OBJECT_GRAPH_KEY
                             in _subjects(problems)))
  graph_read = any(value.key == _OBJECT_GRAPH_KEY for value in to_read)
  return Result(problems, values_read - graph_read, graph_read, bytes_read,
                time.monotonic() - start)


def file_problems(listing):
  """Missing and truncated data files, found from the index.

  Returns:
    A `Problem` per such file, in the words of `bundle_index.DataFileDamage`,
    covering the keys of the values it cannot give: all of a missing
    file's, those beyond a truncated file's end.
  """
  index = listing.index
  if index is None:
    return []
  problems = []
  for file, damage in index.damaged_data_files().items():
    keys = tuple(
        key for key in index.unreadable_keys(damage) if key in listing.values)
    count = restore_report.count_text(len(keys), "value")
    if damage.size is None:
      problems.append(
          Problem(file, "", f"{damage}; it holds {count}", covers=keys or None))
    else:
      problems.append(
          Problem(file,
                  "",
                  f"{damage}; {count} beyond its end cannot be read",
                  covers=keys))
  return problems


def _in_file_order(listing):
  """The values, the object graph's included, by data file and offset."""
  entries = listing.index.entries if listing.index else {}

  def position(value):
    entry = entries.get(value.key)
    return (value.file, entry.offset if entry is not None else 0)

  return sorted(listing.values.values(), key=position)


def _batches(values):
  batch, size = [], 0
  for value in values:
    if batch and (size + value.bytes > _BATCH_BYTES or
                  len(batch) >= _BATCH_KEYS):
      yield batch
      batch, size = [], 0
    batch.append(value)
    size += value.bytes
  if batch:
    yield batch


def read_values(listing, values):
  """Reads `values`; a failed read is split until each bad value is found.

  Returns:
    `{key: tensor}` of the values that read, and a `Problem` for each that
    does not.
  """
  try:
    tensors = _read(listing, values)
    return {value.key: tensor for value, tensor in zip(values, tensors)}, []
  except errors.OpError as e:
    if len(values) == 1:
      value = values[0]
      return {}, [
          Problem(value.file or listing.path, value.key,
                  f"cannot be read: {type(e).__name__}: "
                  f"{op_error_text(e)}")
      ]
  half = len(values) // 2
  first, first_problems = read_values(listing, values[:half])
  second, second_problems = read_values(listing, values[half:])
  return {**first, **second}, first_problems + second_problems


def op_error_text(error):
  """An op error's message without the op's function and node names."""
  text = re.sub(r"^\{\{[^}]*\}\}\s*", "", error.message)
  return re.sub(r"\s*\[Op:\w+\]( name: \S*)?\s*$", "", text)


def _read(listing, values):
  checkpoint = listing.checkpoint
  return reads.eager_restore_v2(
      listing.path, [value.key for value in values], [""] * len(values),
      [checkpoint.dtypes[value.key] for value in values],
      [value.bytes for value in values], "/cpu:0")


def _object_graph_problems(listing, graph_unreadable):
  """Faults of the object graph, and values no object refers to.

  A graph whose value could not be read is not reported again.
  """
  graph_file = getattr(listing.values.get(_OBJECT_GRAPH_KEY), "file",
                       listing.path)
  if listing.object_graph_error is not None:
    if graph_unreadable:
      return []
    return [
        Problem(graph_file, _OBJECT_GRAPH_KEY,
                listing.object_graph_error.message)
    ]
  if not listing.object_based:
    return []
  graph = listing.object_graph
  problems = [
      Problem(graph_file, _OBJECT_GRAPH_KEY,
              f"node {node_id} ({listing.node_paths[node_id]}): {problem}")
      for node_id, problem in object_graph_check.object_graph_problems(
          graph, listing.values)
  ]
  problems.extend(
      Problem(listing.values[key].file or listing.path,
              key,
              "no object of the object graph refers to this value",
              warning=True)
      for key in object_graph_check.unreferenced_keys(graph, listing.values))
  return problems


def report_lines(listing, result):
  """The problems, one per line, then a summary line.

  A problem of a whole data file is followed by the keys it covers, one per
  line, indented.
  """
  lines = []
  for problem in result.problems:
    lines.append(str(problem))
    if not problem.key:
      lines.extend(f"  {key}" for key in problem.covers or ())
  count = result.problem_count()
  size = checkpoint_listing.format_bytes(result.bytes_read)
  read = restore_report.count_text(result.values_read, "value")
  if result.graph_read:
    read += " and the object graph"
  summary = (f"{listing.path}: read {read} "
             f"({size}, "
             f"{restore_report.count_text(listing.num_shards, 'shard')}) "
             f"in {result.seconds:.2f} s")
  if count:
    summary += f"; {restore_report.count_text(count, 'problem')} found"
  else:
    summary += "; OK"
  if result.warnings:
    summary += ", " + restore_report.count_text(len(result.warnings), "warning")
  return lines + [summary]
