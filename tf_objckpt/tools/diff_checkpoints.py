"""`tf-objckpt diff A B`: how two checkpoints differ.

Lists keys added and removed, dtype and shape changes, values that changed
(with the largest absolute difference; `atol` tolerates small ones) and
changes of the object graph by object path: objects added or removed, and
attributes added or removed on objects both have. Values are read through
the I/O engine in batches, so memory stays bounded.

Bookkeeping, the save counter and the serialized object graph itself,
changes between any two saves of one run; its changes are listed apart and
decide nothing unless asked (`Differences.decisive`).

Damage does not stop the comparison: values that cannot be read (a missing
or truncated data file, a failed checksum) and an unreadable object graph
are listed as `verify` names them, and everything else is compared.
"""

from typing import NamedTuple, Optional, Sequence

import numpy as np

from tf_objckpt.inspection import checkpoint_listing
from tf_objckpt.inspection import verify_checkpoint
from tf_objckpt.restoring import restore_report

_BATCH_BYTES = 64 << 20
_OBJECT_GRAPH_KEY = checkpoint_listing.OBJECT_GRAPH_KEY
# The save counter: its object, and the key of its value.
_SAVE_COUNTER = "save_counter"
_SAVE_COUNTER_KEY = "save_counter/.ATTRIBUTES/VARIABLE_VALUE"


class Differences(NamedTuple):
  """Everything `diff` found; empty lists when the checkpoints agree."""
  removed: list  # Values only in A.
  added: list  # Values only in B.
  retyped: list  # (A's value, B's value) with other dtypes or shapes.
  changed: list  # (key, largest absolute difference).
  graph: list  # Lines describing object graph changes.
  # ("A" or "B", `verify_checkpoint.Problem`) of what could not be read.
  damaged: Sequence = ()
  # Changes of the save counter and of the serialized object graph, as
  # `Differences` (their `bookkeeping` empty).
  bookkeeping: Optional["Differences"] = None

  def __bool__(self):
    """Whether anything but bookkeeping differs."""
    return any(self[:-1])

  def decisive(self, include_bookkeeping=False):
    """Whether the checkpoints differ, bookkeeping counted only if asked."""
    return bool(self) or bool(include_bookkeeping and self.bookkeeping)


def diff(listing_a, listing_b, atol=0.0):
  """Compares two checkpoints; returns `Differences`.

  The listings may have damaged object graphs (`open_listing(strict=False)`).
  """
  damaged = []
  lost = [
      _file_damage(listing, side, damaged)
      for listing, side in ((listing_a, "A"), (listing_b, "B"))
  ]
  values_a = {value.key: value for value in listing_a.stored_values()}
  values_b = {value.key: value for value in listing_b.stored_values()}
  graph = []
  if not _graph_damage(listing_a, listing_b, lost, damaged):
    graph = graph_changes(listing_a, listing_b)
  counter = {_SAVE_COUNTER_KEY}
  bookkeeping = _value_differences(
      listing_a, listing_b, _only(values_a, counter), _only(values_b,
                                                            counter), atol,
      lost, damaged, [line for path, line in graph if path == _SAVE_COUNTER] +
      _serialized_graph_change(listing_a, listing_b, lost))
  main = _value_differences(
      listing_a, listing_b, _without(values_a, counter),
      _without(values_b, counter), atol, lost, damaged,
      [line for path, line in graph if path != _SAVE_COUNTER])
  return main._replace(damaged=damaged, bookkeeping=bookkeeping)


def _file_damage(listing, side, damaged):
  """Adds missing and truncated data files to `damaged`; returns their keys."""
  problems = verify_checkpoint.file_problems(listing)
  damaged.extend((side, problem) for problem in problems)
  return {key for problem in problems for key in problem.subjects()}


def _graph_damage(listing_a, listing_b, lost, damaged):
  """Adds unreadable object graphs to `damaged`; whether there were any.

  A graph in a data file already named as damaged is not named again.
  """
  found = False
  for listing, side, lost_keys in zip((listing_a, listing_b), "AB", lost):
    error = listing.object_graph_error
    if error is None:
      continue
    found = True
    if _OBJECT_GRAPH_KEY not in lost_keys:
      damaged.append(
          (side,
           verify_checkpoint.Problem(listing.save_path, _OBJECT_GRAPH_KEY,
                                     error.message)))
  return found


def _only(values, keys):
  return {key: value for key, value in values.items() if key in keys}


def _without(values, keys):
  return {key: value for key, value in values.items() if key not in keys}


def _serialized_graph_change(listing_a, listing_b, lost):
  """A line if both have a readable object graph and its bytes differ."""
  if not (listing_a.object_based and listing_b.object_based) or any(
      _OBJECT_GRAPH_KEY in keys for keys in lost):
    return []
  graph_a = listing_a.read_numpy(_OBJECT_GRAPH_KEY)
  graph_b = listing_b.read_numpy(_OBJECT_GRAPH_KEY)
  if graph_a == graph_b:
    return []
  return [
      f"~ {_OBJECT_GRAPH_KEY}: the serialized object graph differs "
      f"({len(graph_a)} B -> {len(graph_b)} B)"
  ]


def _value_differences(listing_a, listing_b, values_a, values_b, atol, lost,
                       damaged, graph):
  """`Differences` of the values `values_a` and `values_b` (`{key: Value}`).

  Values that cannot be read (`lost` from the start, or failing now, added
  to `damaged`) are not compared.
  """
  removed = [values_a[key] for key in sorted(values_a.keys() - values_b)]
  added = [values_b[key] for key in sorted(values_b.keys() - values_a)]
  common = sorted(values_a.keys() & values_b.keys())
  retyped = [(values_a[key], values_b[key])
             for key in common
             if (values_a[key].dtype,
                 values_a[key].shape) != (values_b[key].dtype,
                                          values_b[key].shape)]
  lost_a, lost_b = lost
  comparable = [
      key for key in common if (values_a[key].dtype, values_a[key].shape) == (
          values_b[key].dtype,
          values_b[key].shape) and key not in lost_a and key not in lost_b
  ]
  changed = []
  for batch in _batches(comparable, values_a):
    read_a = _read(listing_a, [values_a[key] for key in batch], "A", damaged)
    read_b = _read(listing_b, [values_b[key] for key in batch], "B", damaged)
    for key in batch:
      if key in read_a and key in read_b:
        difference = largest_difference(read_a[key].numpy(),
                                        read_b[key].numpy())
        if difference > atol:
          changed.append((key, difference))
  return Differences(removed, added, retyped, changed, graph)


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


def _read(listing, values, side, damaged):
  """`{key: tensor}` of the `values` that read; adds the others to `damaged`."""
  tensors, problems = verify_checkpoint.read_values(listing, values)
  damaged.extend((side, problem) for problem in problems)
  return tensors


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
      listing.node_paths[node_id]: (listing.python_class(node_id), {
          attribute.name: attribute.checkpoint_key
          for attribute in node.attributes
      }) for node_id, node in enumerate(listing.object_graph.nodes)
  }


def graph_changes(listing_a, listing_b):
  """`(object path, line)` of each way the object graphs differ.

  The path is None for a line about the whole graph.
  """
  if listing_a.object_based != listing_b.object_based:
    kinds = [
        "object-based" if listing.object_based else "name-based"
        for listing in (listing_a, listing_b)
    ]
    return [(None, f"A is {kinds[0]}, B is {kinds[1]}")]
  objects_a = _object_attributes(listing_a)
  objects_b = _object_attributes(listing_b)
  changes = [(path, f"- object {path}")
             for path in sorted(objects_a.keys() - objects_b)]
  changes += [(path, f"+ object {path}")
              for path in sorted(objects_b.keys() - objects_a)]
  for path in sorted(objects_a.keys() & objects_b.keys()):
    class_a, attributes_a = objects_a[path]
    class_b, attributes_b = objects_b[path]
    if class_a != class_b:
      changes.append((path, f"~ object {path}: class {class_a} -> {class_b}"))
    changes += [(path, f"- attribute {path}.{name}")
                for name in sorted(attributes_a.keys() - attributes_b)]
    changes += [(path, f"+ attribute {path}.{name}")
                for name in sorted(attributes_b.keys() - attributes_a)]
  return changes


def _section(title, lines):
  """A titled, indented list; nothing if `lines` is empty."""
  if not lines:
    return []
  return [f"{title} ({len(lines)}):"] + ["  " + line for line in lines]


def _sections(differences, atol):
  """`(title, lines)` of each kind of difference."""
  return [
      ("Only in A",
       [f"- {value.key} {value.describe()}" for value in differences.removed]),
      ("Only in B",
       [f"+ {value.key} {value.describe()}" for value in differences.added]),
      ("Dtype or shape changed", [
          f"~ {a.key}: {a.dtype} {checkpoint_listing.format_shape(a.shape)} -> "
          f"{b.dtype} {checkpoint_listing.format_shape(b.shape)}"
          for a, b in differences.retyped
      ]),
      (f"Values changed (atol={atol:g})", [
          f"~ {key}: max abs diff {difference:.6g}"
          for key, difference in differences.changed
      ]),
      ("Object graph changed", differences.graph),
  ]


def _damage_section(damaged):
  """What could not be read, by side, counted in values; the keys a data
  file loses are listed below it."""
  if not damaged:
    return []
  count = len({(side, subject)
               for side, problem in damaged
               for subject in problem.subjects()})
  lines = [
      f"Damaged, not compared ({restore_report.count_text(count, 'value')}"
      "):"
  ]
  for side, problem in damaged:
    key = f" {problem.key}:" if problem.key else ""
    lines.append(f"  {side}: {problem.file}:{key} {problem.message}")
    if not problem.key:
      lines.extend(f"    {key}" for key in problem.covers or ())
  return lines


def report_lines(differences, atol, include_bookkeeping=False):
  """The differences as text: damage first, then section by section,
  bookkeeping last."""
  lines = _damage_section(differences.damaged)
  lines += [
      line for title, section in _sections(differences, atol)
      for line in _section(title, section)
  ]
  if not differences:
    lines.append("No differences apart from bookkeeping." if differences.
                 bookkeeping else "No differences.")
  if differences.bookkeeping:
    counted = "counted" if include_bookkeeping else (
        "not counted without --include-bookkeeping")
    lines += _section(f"Bookkeeping changed, {counted}", [
        line for _, section in _sections(differences.bookkeeping, atol)
        for line in section
    ])
  return lines
