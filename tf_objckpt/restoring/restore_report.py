"""What a restore did, readable by a person: the `RestoreReport` of a load status.

`status.report()` returns one: the values restored, the checkpoint's values
that nothing matched, and the program's objects that got no value, each
named by its object path with shape and dtype. The assertion messages of the
load statuses are made of the same lines (`listing`).
"""

from typing import NamedTuple, Optional

# Lists in messages and reports are cut after this many lines.
MAX_LINES = 20
_VALUE_ATTRIBUTE = "VARIABLE_VALUE"


class ReportedValue(NamedTuple):
  """One checkpointed value, by object path (or variable name) and key."""
  path: str  # "model/inner/kernel"; for name-based checkpoints, the name.
  key: str
  shape: Optional[tuple] = None
  dtype: Optional[str] = None
  attribute: Optional[str] = None  # Unless it is the object's value itself.
  note: Optional[str] = None  # How it was used, or why it was not.

  def __str__(self):
    text = self.path
    if self.attribute and self.attribute != _VALUE_ATTRIBUTE:
      text += f" .{self.attribute}"
    if self.shape is not None:
      text += " " + shape_text(self.shape)
    if self.dtype:
      text += f" {self.dtype}"
    if not self.key.startswith(self.path):  # Matched by name.
      text += f" <- {self.key!r}"
    if self.note:
      text += f" ({self.note})"
    return text


def shape_text(shape):
  """"(3, 4)", "(3,)", "()"."""
  dims = ", ".join(str(dim) for dim in shape)
  return f"({dims},)" if len(shape) == 1 else f"({dims})"


def listing(header, items, limit=MAX_LINES):
  """`header` then one indented line per item, cut after `limit` with a count."""
  lines = [f"  {item}" for item in list(items)[:limit]]
  if len(items) > limit:
    lines.append(f"  ... and {len(items) - limit} more")
  return "\n".join([header] + lines)


def count_text(count, singular, plural=None):
  return f"{count} {singular if count == 1 else plural or singular + 's'}"


class RestoreReport(NamedTuple):
  """What one restore matched, as plain data with a readable `str()`.

  Attributes:
    save_path: The checkpoint restored.
    restored: `ReportedValue`s assigned (or, graph building, with restore
      ops), in checkpoint order.
    unmatched: The checkpoint's `ReportedValue`s that nothing restored: their
      objects do not exist (yet), or lack the attribute.
    objects_without_values: Object paths (in the program) of existing
      objects with state of their own that got no value.
  """
  save_path: Optional[str]  # None after `restore(None)`.
  restored: tuple
  unmatched: tuple
  objects_without_values: tuple

  @property
  def complete(self):
    """Whether everything matched both ways."""
    return not self.unmatched and not self.objects_without_values

  def __str__(self):
    parts = [
        f"Restore from {self.save_path!r}: "
        f"{count_text(len(self.restored), 'value')} restored, "
        f"{count_text(len(self.unmatched), 'checkpoint value')} "
        f"unmatched, {count_text(len(self.objects_without_values), 'object')}"
        " without a value."
    ]
    for header, items in (("Restored:", self.restored),
                          ("In the checkpoint, not restored:",
                           self.unmatched), ("Objects without a value:",
                                             self.objects_without_values)):
      if items:
        parts.append(listing(header, items))
    return "\n".join(parts)
