"""`tf-objckpt convert`: a name-based (v1 `Saver`) checkpoint made object-based.

A function of the user's builds the objects; their variables are matched to
the checkpoint's names (`match_names`), every matched value is checked
against its variable before any is assigned, and the objects are written as
an object-based checkpoint. Variables that find no value make the result
partial, which is refused unless allowed; checkpoint values nothing used are
reported.
"""

import importlib
from typing import NamedTuple

from tensorflow.python.eager import context
from tensorflow.python.trackable import base as tf_base

from tf_objckpt import functional_saver
from tf_objckpt import graph_view as graph_view_lib
from tf_objckpt import name_based
from tf_objckpt import restore_plan
from tf_objckpt import util

# At most this many names are listed per section of the report.
_MAX_LISTED = 50


def import_function(spec):
  """The function `module:function` names.

  Raises:
    ValueError: If `spec` is malformed or names nothing callable.
  """
  module_name, _, function_name = spec.partition(":")
  if not module_name or not function_name:
    raise ValueError(f"--objects must be MODULE:FUNCTION, got {spec!r}")
  try:
    function = getattr(importlib.import_module(module_name), function_name)
  except (ImportError, AttributeError) as e:
    raise ValueError(f"cannot import {spec!r}: {e}") from e
  if not callable(function):
    raise ValueError(f"{spec!r} is not callable")
  return function


def parse_mapping(pairs):
  """`{checkpoint name: variable name}` from "OLD=NEW" strings.

  Raises:
    ValueError: If a pair has no "=".
  """
  mapping = {}
  for pair in pairs:
    old, separator, new = pair.partition("=")
    if not separator or not old or not new:
      raise ValueError(f"--map takes OLD=NEW, got {pair!r}")
    mapping[old] = new
  return mapping


def checkpoint_name(variable_name, mapping):
  """The checkpoint name a variable reads, following `mapping`.

  `mapping` follows `tf.compat.v1.train.init_from_checkpoint`'s
  `assignment_map`: checkpoint name to variable name, or, with trailing
  slashes, checkpoint scope to variable scope.
  """
  for old, new in mapping.items():
    if new == variable_name:
      return old
    if new.endswith("/") and old.endswith("/") and variable_name.startswith(
        new):
      return old + variable_name[len(new):]
  return variable_name


class Match(NamedTuple):
  """Which saveable reads which checkpoint keys, and what found nothing."""
  matched: list  # (saveable, [checkpoint key per spec]).
  unmatched: list  # Variable names that found no value.
  leftover: list  # Checkpoint keys nothing reads.


def match_names(save_path, root, mapping, stored_keys):
  """Matches `root`'s variables to a name-based checkpoint's keys.

  The one place convert matches names: it uses the name-based restore's
  matching (global variable names), with `mapping` for renamed ones.
  """
  coordinator = name_based.NameBasedRestoreCoordinator(save_path)
  matched, unmatched, used = [], [], set()
  for trackable in graph_view_lib.ObjectGraphView(root).list_objects():
    for saveable in coordinator.globally_named_object_attributes(trackable):
      keys = [checkpoint_name(spec.name, mapping) for spec in saveable.specs]
      if all(key in stored_keys for key in keys):
        matched.append((saveable, keys))
        used.update(keys)
      else:
        unmatched.append(saveable.name)
  leftover = sorted(key for key in stored_keys
                    if key not in used and key != tf_base.OBJECT_GRAPH_PROTO_KEY)
  return Match(matched, unmatched, leftover)


class Result(NamedTuple):
  """What convert matched and whether it wrote the checkpoint."""
  source: str
  out_prefix: str
  match: Match
  written: bool

  def report_lines(self):
    lines = [f"Converted {self.source} -> {self.out_prefix}"
             if self.written else
             f"Not written: {len(self.match.unmatched)} variable(s) found no "
             f"value in {self.source} (pass --allow-partial to write anyway)"]
    lines += _listed("Matched", [
        f"{saveable.name} <- {', '.join(sorted(set(keys)))}"
        for saveable, keys in self.match.matched])
    lines += _listed("Not matched (variables without a value)",
                     self.match.unmatched)
    lines += _listed("Left over (checkpoint values nothing used)",
                     self.match.leftover)
    return lines


def _listed(title, items):
  if not items:
    return []
  shown = [f"  {item}" for item in items[:_MAX_LISTED]]
  if len(items) > _MAX_LISTED:
    shown.append(f"  ... and {len(items) - _MAX_LISTED} more")
  return [f"{title} ({len(items)}):"] + shown


def _checkpoint_of(objects):
  """A `Checkpoint` of a dict of named trackables, or of one root."""
  if isinstance(objects, dict):
    return util.Checkpoint(**objects)
  return util.Checkpoint(root=objects)


def convert(save_path, out_prefix, objects, mapping=None,
            allow_partial=False):
  """Writes the values of a name-based checkpoint as an object-based one.

  Args:
    save_path: The name-based checkpoint's prefix.
    out_prefix: Where to write the object-based checkpoint.
    objects: A dict of names to trackables, or one trackable (the root).
    mapping: `{checkpoint name: variable name}` (see `checkpoint_name`).
    allow_partial: Write even if some variables found no value.

  Returns:
    A `Result`.

  Raises:
    ValueError: If the checkpoint is object-based, or (as a restore would)
      a value does not fit its variable; nothing is written then.
  """
  assert context.executing_eagerly(), "convert runs eagerly"
  reader = functional_saver.open_reader(save_path)
  if functional_saver.read_object_graph(reader, save_path) is not None:
    raise ValueError(f"{save_path!r} is already an object-based checkpoint.")
  values = functional_saver.CheckpointValues(save_path, reader, save_path)
  checkpoint = _checkpoint_of(objects)
  match = match_names(save_path, checkpoint, mapping or {}, values.shapes)
  if match.unmatched and not allow_partial:
    return Result(save_path, out_prefix, match, written=False)
  _restore(save_path, values, match.matched)
  checkpoint.write(out_prefix)
  return Result(save_path, out_prefix, match, written=True)


def _restore(save_path, values, matched):
  """Checks every matched value, then assigns them all."""
  entries = [restore_plan.entry(key, spec.slice_spec, spec.dtype,
                                restore_plan.expected_shape(saveable))
             for saveable, keys in matched
             for spec, key in zip(saveable.specs, keys)]
  restore_plan.check(restore_plan.RestorePlan(entries), save_path,
                     values.dtypes, values.shapes, shape_error=ValueError)
  for saveable, keys in matched:
    tensors = values.read([
        functional_saver.KeyToRead(key, spec.slice_spec, spec.dtype)
        for spec, key in zip(saveable.specs, keys)])
    saveable.restore(tensors, None)
