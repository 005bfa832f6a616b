"""Which reads run together on one thread: whole data files, if several.

A large eager read is split across the read threads (`reads`), one
`RestoreV2` per thread; so is a graph-mode restore function's read
(`graph_restores`, by bytes alone), into `RestoreV2`s that the session
runs at once. When an eager read's values come from several data files,
each thread gets whole files (`lanes`), so each op opens and streams its
own files and the files are read at the same time; values of one data
file are split into runs of about equal bytes. A restore in pieces
(`reads.CheckpointValues.restore_in_pieces`) of several data files holds
a piece for each thread (`lane_count`), so that every piece keeps the
threads busy.

`runs_of_bytes` cuts a list of values into runs of at most so many bytes
(lanes, pieces, graph-mode restore batches).

`DataFiles` says which data file holds each key, from the checkpoint's
`.index` (`bundle_index`), read only for checkpoints of several data files
and reads large enough to split.
"""

import collections

from tensorflow.python.lib.io import file_io

from tf_objckpt.engine import bundle_index
from tf_objckpt.engine import tuning


class DataFiles:
  """Which data file of one checkpoint holds each key (read when needed)."""

  def __init__(self, save_path):
    self._save_path = save_path
    self._shard_of = None  # {key: data file number}; {} for one data file.

  def of(self, keys):
    """The data file number of each of `keys`, or None if only one file.

    Keys the index lacks are counted in file 0: the read reports them.
    """
    if self._shard_of is None:
      self._shard_of = self._read_shards()
    if not self._shard_of:
      return None
    return [self._shard_of.get(key, 0) for key in keys]

  def _read_shards(self):
    """`{key: data file}`, or {} when the checkpoint has one data file."""
    if file_io.file_exists(bundle_index.data_file_name(self._save_path, 0, 1)):
      return {}  # Known without reading the index.
    index = bundle_index.read_bundle_index(self._save_path)
    return {key: entry.shard_id for key, entry in index.entries.items()}


def lanes(byte_sizes, data_files=None):
  """Splits the indices of a read into one list per read thread.

  Args:
    byte_sizes: Each value's (approximate) size.
    data_files: Optional; called only for reads worth splitting, returns
      each value's data file, or None when there is one.

  Returns:
    Lists of indices. Reads of less than `parallel_read_min_bytes` stay
    whole; values of several data files go by whole files, the files
    balanced by bytes; otherwise runs of about equal bytes.
  """
  costs = [size + tuning.TUNING.lookup_cost_bytes for size in byte_sizes]
  count = min(tuning.TUNING.read_threads, len(costs))
  if sum(costs) < tuning.TUNING.parallel_read_min_bytes or count < 2:
    return [list(range(len(costs)))]
  files = data_files() if data_files is not None else None
  if files is not None and len(set(files)) > 1:
    return _by_file(costs, files, count)
  return _runs(costs, count)


def _runs(costs, count):
  """Consecutive runs of indices of about equal cost, `count` at most."""
  total = sum(costs)
  runs, start, filled = [], 0, 0
  for index, cost in enumerate(costs):
    filled += cost
    if filled >= total * (len(runs) + 1) / count and index + 1 < len(costs):
      runs.append(list(range(start, index + 1)))
      start = index + 1
  runs.append(list(range(start, len(costs))))
  return runs


def _by_file(costs, files, count):
  """Indices by data file, the files spread over at most `count` lanes.

  Each file goes, largest first, to the lane with the least cost so far.
  """
  by_file = collections.defaultdict(list)
  for index, file in enumerate(files):
    by_file[file].append(index)
  groups = sorted(by_file.values(),
                  key=lambda group: -sum(costs[i] for i in group))
  count = min(count, len(groups))
  found, loads = [[] for _ in range(count)], [0] * count
  for group in groups:
    lightest = loads.index(min(loads))
    found[lightest].extend(group)
    loads[lightest] += sum(costs[i] for i in group)
  return found


def lane_count(files):
  """How many threads reads of values in `files` can keep busy."""
  return max(1, min(tuning.TUNING.read_threads, len(set(files))))


def runs_of_bytes(sizes, limit):
  """Consecutive slices of `sizes` adding up to at most `limit` bytes each.

  A run exceeds `limit` only when its first item alone does.
  """
  if not sizes:
    return []
  runs, start, filled = [], 0, 0
  for index, size in enumerate(sizes):
    if index > start and filled + size > limit:
      runs.append(slice(start, index))
      start, filled = index, 0
    filled += size
  return runs + [slice(start, len(sizes))]
