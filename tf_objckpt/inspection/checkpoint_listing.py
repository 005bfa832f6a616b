"""What a checkpoint holds, for the command line tools: values, objects, files.

`find_checkpoint` turns a prefix or a directory into a checkpoint prefix, and
`open_listing` describes that checkpoint through the I/O engine: each value's
key, dtype, shape, bytes and data file, and, for object-based checkpoints, the
object graph with each object's path ("model/layer/kernel") and, where the
checkpoint records it, the Python class that saved it. Works on checkpoints
written by TensorFlow or by tf_objckpt, object-based or name-based.
"""

import difflib
import json
import os
import re
from typing import NamedTuple, Optional

import numpy as np
from tensorflow.python.framework import errors
from tensorflow.python.lib.io import file_io
from tensorflow.python.trackable import base as tf_base

from tf_objckpt.engine import bundle_index
from tf_objckpt.engine import reads
from tf_objckpt.engine import state_file
from tf_objckpt.restoring import object_graph_check

OBJECT_GRAPH_KEY = tf_base.OBJECT_GRAPH_PROTO_KEY
_ATTRIBUTES = "/.ATTRIBUTES/"
_CONFIG_ATTRIBUTE = "OBJECT_CONFIG_JSON"
# At most this many close names are suggested for a name that matches none.
_SUGGESTED = 3
# At most this many values of paths ending alike are suggested.
_ALIKE_SHOWN = 10


class NoCheckpointError(Exception):
  """The path holds no checkpoint (a usage error for the tools)."""


# A checkpoint's own files, given where its prefix is expected.
_CHECKPOINT_FILE = re.compile(r"(.+)\.(index|data-\d{5}-of-\d{5})")


def find_checkpoint(path):
  """The checkpoint prefix `path` names, and how it was found.

  Args:
    path: A checkpoint prefix, one of its files (`.index`, `.data-*`), or a
      directory (its latest checkpoint).

  Returns:
    `(prefix, note)`; `note` says which checkpoint of a directory, or the
    prefix of a file, was taken, or is None for a prefix.

  Raises:
    NoCheckpointError: If there is no checkpoint at `path`.
    DataLossError: If the checkpoint's data files are there without its
      index.
  """
  path = os.fspath(path)
  if file_io.is_directory(path):
    latest = state_file.latest_checkpoint(path)
    if latest is None:
      raise NoCheckpointError(_without_state_file(path))
    return latest, (f"{path!r} is a directory; using its latest checkpoint "
                    f"{latest!r}.")
  note = None
  own_file = _CHECKPOINT_FILE.fullmatch(path)
  if own_file:
    note = (f"{path!r} is a file of checkpoint {own_file.group(1)!r}; using "
            "that checkpoint.")
    path = own_file.group(1)
  if file_io.file_exists(path + ".index") or (file_io.file_exists(path) and
                                              not own_file):
    return path, note
  data_files = file_io.get_matching_files(path + ".data-*")
  if data_files:
    raise errors.DataLossError(
        None, None, f"Damaged checkpoint {path!r}: {path + '.index'!r} is "
        f"missing, while its data files are there: "
        f"{', '.join(sorted(data_files))}.")
  raise NoCheckpointError(f"No checkpoint found at {path!r}.")


def _without_state_file(directory):
  """Why a directory names no checkpoint, listing the prefixes it holds."""
  prefixes = sorted(name[:-len(".index")]
                    for name in file_io.list_directory(directory)
                    if name.endswith(".index"))
  text = (f"{directory!r} is a directory without checkpoints (no "
          "'checkpoint' state file names one)")
  if not prefixes:
    return text + "."
  return (f"{text}; it holds {len(prefixes)} checkpoint"
          f"{'s' * (len(prefixes) != 1)}, give one as the path: " +
          ", ".join(os.path.join(directory, prefix) for prefix in prefixes))


class Value(NamedTuple):
  """One value of a checkpoint."""
  key: str
  dtype: str
  shape: tuple
  bytes: int
  file: str  # The data file holding it ("" if unknown).
  object_path: Optional[str] = None  # Its object's path, object-based only.
  attribute: Optional[str] = None  # Its attribute name, object-based only.

  def describe(self):
    """"float32 (3, 4) 48 B"."""
    return f"{self.dtype} {format_shape(self.shape)} {format_bytes(self.bytes)}"


def format_shape(shape):
  return "(" + ", ".join(
      str(dim) for dim in shape) + (",)" if len(shape) == 1 else ")")


def format_bytes(count):
  """"48 B", "1.5 KiB", "2.0 GiB"."""
  size = float(count)
  for unit in ("B", "KiB", "MiB", "GiB"):
    if size < 1024 or unit == "GiB":
      return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"
    size /= 1024


class Listing:
  """A checkpoint's values, files and (object-based) object graph."""

  def __init__(self,
               path,
               reader,
               index,
               object_graph,
               object_graph_error=None):
    self.path = path
    self.index = index  # A `bundle_index.BundleIndex`, or None (V1).
    self.object_graph = object_graph  # A TrackableObjectGraph, or None.
    # Why a stored object graph could not be read (`open_listing(strict=False)`).
    self.object_graph_error = object_graph_error
    self.num_shards = index.num_shards if index else 1
    # The engine's reader: dtypes, shapes and single values.
    self.checkpoint = reads.CheckpointValues(path, reader, path)
    self.values = _values(path, self.checkpoint, index)
    self.node_paths = (object_graph_check.NodePaths(object_graph, "/")
                       if object_graph is not None else None)
    if object_graph is not None:
      self._name_values()

  @property
  def object_based(self):
    return self.object_graph is not None

  def data_files(self):
    """Every data file of the checkpoint (V2), in shard order."""
    return [
        bundle_index.data_file_name(self.path, shard, self.num_shards)
        for shard in range(self.num_shards)
    ]

  def stored_values(self):
    """The values other than the object graph, in key order."""
    return [
        value for key, value in sorted(self.values.items())
        if key != OBJECT_GRAPH_KEY
    ]

  def python_class(self, node_id):
    """The class that saved a node, where the checkpoint records it."""
    node = self.object_graph.nodes[node_id]
    if node.registered_saver.name:
      return node.registered_saver.name
    for attribute in node.attributes:
      if attribute.name == _CONFIG_ATTRIBUTE:
        try:
          config = json.loads(self.read_numpy(attribute.checkpoint_key))
        except (ValueError, errors.OpError):
          return None
        return config.get("class_name") if isinstance(config, dict) else None
    return None

  def read_numpy(self, key):
    """One value as numpy (strings as bytes)."""
    return self.checkpoint.python_value(key)

  def _name_values(self):
    for node_id, node in enumerate(self.object_graph.nodes):
      for attribute in node.attributes:
        value = self.values.get(attribute.checkpoint_key)
        if value is not None:
          self.values[attribute.checkpoint_key] = value._replace(
              object_path=self.node_paths[node_id], attribute=attribute.name)

  def find_key(self, name):
    """The key of `name`: a checkpoint key, or an object path with one value.

    An object path may take any way through the object graph, the aliases
    `inspect` shows ("layer-0 -> model/layer_with_weights-0") included.

    Raises:
      KeyError: If nothing matches; the message suggests the closest keys
        and object paths.
    """
    keys = self.keys_at(name)
    if len(keys) == 1:
      return keys[0]
    raise KeyError(f"No value {name!r} in checkpoint {self.path!r}." +
                   self.not_one_value(name, keys))

  def keys_at(self, name):
    """The keys `name` names: itself, if a key; else the keys of the values
    of the objects at object path `name`, by any way (sorted)."""
    if name in self.values:
      return [name]
    if not self.object_based:
      return []
    return sorted({
        attribute.checkpoint_key
        for node_id in self._nodes_at(name)
        for attribute in self.object_graph.nodes[node_id].attributes
        if attribute.checkpoint_key in self.values
    })

  def not_one_value(self, name, keys):
    """What to say when `name` names the values `keys`, not one value.

    The keys if several; else the names closest by spelling, or, when
    none is close, the object paths that end in the same name, or one
    spelled alike (Keras 3 saves `dense/kernel` as
    `model/_functional/_operations/1/_kernel`), with their values' dtypes
    and shapes.
    """
    if keys:
      return (f" {name!r} holds several values; name one of their keys: "
              f"{', '.join(keys)}.")
    close = difflib.get_close_matches(name,
                                      self._names(),
                                      n=_SUGGESTED,
                                      cutoff=0.5)
    if close:
      return " Closest: " + ", ".join(close) + "."
    by_path = self._values_by_path()
    last = _last_name(name)
    endings = difflib.get_close_matches(
        last, {_last_name(path) for path, _ in by_path},
        n=_SUGGESTED,
        cutoff=0.8)
    alike = sorted(f"{path} ({value.dtype}, shape {format_shape(value.shape)})"
                   for path, value in by_path
                   if _last_name(path) in endings)
    if not alike:
      return ""
    shown = alike[:_ALIKE_SHOWN]
    more = len(alike) - len(shown)
    return (f" Values at paths ending in {' or '.join(map(repr, endings))}: " +
            ", ".join(shown) + (f" and {more} more" if more > 0 else "") + ".")

  def _values_by_path(self):
    """`(object path, value)` of each variable's value; keys if name-based."""
    if not self.object_based:
      return [(value.key, value) for value in self.stored_values()]
    return [(value.object_path, value)
            for value in self.stored_values()
            if value.object_path and value.attribute == "VARIABLE_VALUE"]

  def _nodes_at(self, path):
    """The ids of the nodes `path` leads to from the root, by any way.

    Local names may hold "/", so each child whose name starts `path` is
    followed.
    """
    nodes = self.object_graph.nodes
    found, seen, stack = set(), set(), [(0, path)]
    while stack:
      node_id, rest = stack.pop()
      if (node_id, rest) in seen:
        continue
      seen.add((node_id, rest))
      for child in nodes[node_id].children:
        if child.node_id >= len(nodes):
          continue
        if rest == child.local_name:
          found.add(child.node_id)
        elif rest.startswith(child.local_name + "/"):
          stack.append((child.node_id, rest[len(child.local_name) + 1:]))
    return found

  def _names(self):
    """The names of values `inspect` shows: keys, and each object path.

    Object paths are those of the tree's lines: each object's shortest
    path, and the alias lines below the objects.
    """
    names = set(self.values) - {OBJECT_GRAPH_KEY}
    if not self.object_based:
      return sorted(names)
    nodes = self.object_graph.nodes
    for node_id, node in enumerate(nodes):
      holders = [
          child for child in node.children
          if child.node_id < len(nodes) and nodes[child.node_id].attributes
      ]
      if not holders:
        continue
      parent = self.node_paths[node_id] + "/" if node_id else ""
      names.update(parent + child.local_name for child in holders)
    return sorted(names)


def _last_name(path):
  """The last name of a path, without the underscores of private names."""
  return path.rstrip("/").rsplit("/", 1)[-1].lstrip("_")


def _values(path, checkpoint, index):
  """`{key: Value}` of every value of the checkpoint."""
  values = {}
  for key, shape in checkpoint.shapes.items():
    dtype = checkpoint.dtypes[key]
    entry = index.entries.get(key) if index else None
    if entry is not None and not entry.slices:
      size = entry.size
      file = bundle_index.data_file_name(path, entry.shard_id, index.num_shards)
    else:
      size = reads.byte_size(shape, dtype)
      file = path if index is None else ""
    values[key] = Value(key, dtype.name, tuple(shape), int(size), file)
  return values


def open_listing(path, strict=True):
  """Describes the checkpoint at prefix `path`.

  Args:
    path: A checkpoint prefix.
    strict: Whether a damaged object graph raises; if not, the listing is
      name-based and keeps the error as `object_graph_error`.

  Raises:
    NotFoundError: If there is no checkpoint there.
    DataLossError: If its index (or, strict, its object graph) is damaged.
  """
  reader = reads.open_reader(path)
  index = bundle_index.read_if_present(path)
  try:
    object_graph = reads.read_object_graph(reader, path)
  except errors.DataLossError as e:
    if strict:
      raise
    return Listing(path, reader, index, None, object_graph_error=e)
  return Listing(path, reader, index, object_graph)


def summarize(value, max_items=10):
  """A short text of a numpy value: all of it if small, else statistics."""
  array = np.asarray(value)
  if array.size <= max_items:
    return np.array2string(array, separator=", ", threshold=max_items)
  flat = array.reshape(-1)
  head = ", ".join(_item(item) for item in flat[:max_items // 2])
  text = f"[{head}, ...] ({array.size} values"
  if np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_:
    numbers = flat.astype(np.float64)
    text += (f"; min {numbers.min():.6g}, max {numbers.max():.6g}, "
             f"mean {numbers.mean():.6g}")
  return text + ")"


def _item(item):
  if isinstance(item, bytes):
    return repr(item)
  if isinstance(item, (float, np.floating)):
    return f"{item:.6g}"
  return f"{item}"
