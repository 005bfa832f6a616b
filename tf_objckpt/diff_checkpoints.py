"""`tf-objckpt diff A B`: how two checkpoints differ.

Lists keys added and removed, dtype and shape changes, values that changed
(with the largest absolute difference; `atol` tolerates small ones) and
changes of the object graph by object path: objects added or removed, and
attributes added or removed on objects both have. Values are read through
the I/O engine in batches, so memory stays bounded.
"""

from typing import NamedTuple

import numpy as np

from tf_objckpt import checkpoint_listing
from tf_objckpt import functional_saver

_BATCH_BYTES = 64 << 20
_OBJECT_GRAPH_KEY = checkpoint_listing.OBJECT_GRAPH_KEY


class Differences(NamedTuple):
  """Everything `diff` found; empty lists when the checkpoints agree."""
  removed: list  # Values only in A.
  added: list  # Values only in B.
  retyped: list  # (A's value, B's value) with other dtypes or shapes.
  changed: list  # (key, largest absolute difference).
  graph: list  # Lines describing object graph changes.

  def __bool__(self):
    return any(self)


def diff(listing_a, listing_b, atol=0.0):
  """Compares two checkpoints; returns `Differences`."""
  values_a = {value.key: value for value in listing_a.stored_values()}
  values_b = {value.key: value for value in listing_b.stored_values()}
  removed = [values_a[key] for key in sorted(values_a.keys() - values_b)]
  added = [values_b[key] for key in sorted(values_b.keys() - values_a)]
  common = sorted(values_a.keys() & values_b.keys())
  retyped = [(values_a[key], values_b[key]) for key in common
             if (values_a[key].dtype, values_a[key].shape) !=
             (values_b[key].dtype, values_b[key].shape)]
  comparable = [key for key in common
                if (values_a[key].dtype, values_a[key].shape) ==
                (values_b[key].dtype, values_b[key].shape)]
  changed = []
  for batch in _batches(comparable, values_a):
    read_a = _read(listing_a, batch)
    read_b = _read(listing_b, batch)
    for key, value_a, value_b in zip(batch, read_a, read_b):
      difference = largest_difference(value_a.numpy(), value_b.numpy())
      if difference > atol:
        changed.append((key, difference))
  return Differences(removed, added, retyped, changed,
                     graph_changes(listing_a, listing_b))


def _batches(keys, values):
  batch, size = [], 0
  for key in keys:
    if batch and size + values[key].bytes > _BATCH_BYTES:
      yield batch
      batch, size = [], 0
    batch.append(key)
    size += values[key].bytes
  if batch:
    yield batch


def _read(listing, keys):
  checkpoint = listing.checkpoint
  return functional_saver.eager_restore_v2(
      listing.path, keys, [""] * len(keys),
      [checkpoint.dtypes[key] for key in keys],
      [listing.values[key].bytes for key in keys], "/cpu:0")


def largest_difference(a, b):
  """The largest absolute difference of two arrays of one shape.

  Non-numeric values differ by infinity where they are not equal; NaNs are
  equal to NaNs.
  """
  if a.dtype.kind in "fciub" and b.dtype.kind in "fciub":
    if a.size == 0:
      return 0.0
    a64 = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    b64 = b.astype(a64.dtype)
    both_nan = np.isnan(a64) & np.isnan(b64)
    difference = np.where(both_nan, 0.0, np.abs(a64 - b64))
    difference = np.where(np.isnan(difference), np.inf, difference)
    return float(difference.max())
  return 0.0 if np.array_equal(a, b) else float("inf")


def _object_attributes(listing):
  """`{object path: (class, {attribute name: key})}` of an object graph."""
  if not listing.object_based:
    return {}
  return {
      listing.node_paths[node_id]: (
          listing.python_class(node_id),
          {attribute.name: attribute.checkpoint_key
           for attribute in node.attributes})
      for node_id, node in enumerate(listing.object_graph.nodes)}


def graph_changes(listing_a, listing_b):
  """Lines describing how the object graphs differ, by object path."""
  if listing_a.object_based != listing_b.object_based:
    kinds = ["object-based" if listing.object_based else "name-based"
             for listing in (listing_a, listing_b)]
    return [f"A is {kinds[0]}, B is {kinds[1]}"]
  objects_a = _object_attributes(listing_a)
  objects_b = _object_attributes(listing_b)
  lines = [f"- object {path}" for path in sorted(objects_a.keys() -
                                                 objects_b)]
  lines += [f"+ object {path}" for path in sorted(objects_b.keys() -
                                                  objects_a)]
  for path in sorted(objects_a.keys() & objects_b.keys()):
    class_a, attributes_a = objects_a[path]
    class_b, attributes_b = objects_b[path]
    if class_a != class_b:
      lines.append(f"~ object {path}: class {class_a} -> {class_b}")
    for name in sorted(attributes_a.keys() - attributes_b):
      lines.append(f"- attribute {path}.{name}")
    for name in sorted(attributes_b.keys() - attributes_a):
      lines.append(f"+ attribute {path}.{name}")
  return lines


def _section(title, lines):
  """A titled, indented list; nothing if `lines` is empty."""
  if not lines:
    return []
  return [f"{title} ({len(lines)}):"] + ["  " + line for line in lines]


def report_lines(differences, atol):
  """The differences as text, section by section."""
  if not differences:
    return ["No differences."]
  lines = _section("Only in A", [f"- {value.key} {value.describe()}"
                                 for value in differences.removed])
  lines += _section("Only in B", [f"+ {value.key} {value.describe()}"
                                  for value in differences.added])
  lines += _section(
      "Dtype or shape changed",
      [f"~ {a.key}: {a.dtype} {checkpoint_listing.format_shape(a.shape)} -> "
       f"{b.dtype} {checkpoint_listing.format_shape(b.shape)}"
       for a, b in differences.retyped])
  lines += _section(f"Values changed (atol={atol:g})",
                    [f"~ {key}: max abs diff {difference:.6g}"
                     for key, difference in differences.changed])
  lines += _section("Object graph changed", differences.graph)
  return lines
