"""`tf-objckpt convert`: a name-based (v1 `Saver`) checkpoint made object-based.

A function of the user's builds the objects; their variables are matched to
the checkpoint's names by the name matcher of name-based restores
(`name_matching`, through `match_variables`), every matched value is checked
against its variable before any is assigned, and the objects are written as
an object-based checkpoint. Variables that find no value make the result
partial, which is refused unless allowed; checkpoint values nothing used are
reported. The written checkpoint is recorded as its directory's latest, as
`Checkpoint.save` records its own.
"""

import functools
import importlib
import os
import sys
from typing import NamedTuple

from tensorflow.python.eager import context
from tensorflow.python.ops import variables
from tensorflow.python.trackable import base as tf_base

from tf_objckpt.api import object_checkpoints
from tf_objckpt.engine import read_plan
from tf_objckpt.engine import checkpoint_opening
from tf_objckpt.engine import reads
from tf_objckpt.engine import state_file
from tf_objckpt.objects import graph_walk
from tf_objckpt.restoring import name_matching

# At most this many names are listed per section of the report.
_MAX_LISTED = 50


def import_function(spec):
  """The function `module:function` names.

  The module may be in the current directory, as for `python -m`, also when
  the console script (whose own directory is first on `sys.path`) runs.

  Raises:
    ValueError: If `spec` is malformed or names nothing callable.
  """
  module_name, _, function_name = spec.partition(":")
  if not module_name or not function_name:
    raise ValueError(f"--objects must be MODULE:FUNCTION, got {spec!r}")
  if "" not in sys.path and os.getcwd() not in sys.path:
    sys.path.insert(0, os.getcwd())
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
    ValueError: If a pair has no "=", or maps a scope ("old/") to a name.
  """
  mapping = {}
  for pair in pairs:
    old, separator, new = pair.partition("=")
    if not separator or not old or not new:
      raise ValueError(f"--map takes OLD=NEW, got {pair!r}")
    mapping[old] = new
  name_matching.NameMatcher((), mapping)  # Raises for a malformed mapping.
  return mapping


def _variables(root):
  """`(name, variable)` of every variable saved with `root`, once each.

  Names are those `name_matching` matches by: a Keras 3 variable's path,
  else the variable's name.
  """
  found = []
  for obj in graph_walk.ObjectGraphView(root).list_objects():
    if isinstance(
        obj,
        variables.Variable) or (isinstance(getattr(obj, "path", None), str) and
                                callable(getattr(obj, "assign", None))):
      found.append((name_matching.variable_name(obj), obj))
  return found


class Match(NamedTuple):
  """Which variable reads which checkpoint key, and what found nothing."""
  matched: list  # (variable name, variable, checkpoint key, rule).
  unmatched: list  # Variable names that found no value.
  leftover: list  # Checkpoint keys nothing reads.


def match_variables(root, stored_keys, mapping):
  """Matches `root`'s variables to a name-based checkpoint's keys.

  Uses the name matcher of name-based restores (`name_matching`): the exact
  name, the name without the Keras 3 model's scope, then `mapping` (an
  `assignment_map` of checkpoint names to variable names or scopes).
  """
  named = _variables(root)
  stored = [key for key in stored_keys if key != tf_base.OBJECT_GRAPH_PROTO_KEY]
  report = name_matching.match_names([name for name, _ in named], stored,
                                     mapping)
  matched = [(name, variable, report.matched[name].checkpoint_key,
              report.matched[name].rule)
             for name, variable in named
             if name in report.matched]
  return Match(matched, list(report.unmatched_names), list(report.unused_keys))


class Result(NamedTuple):
  """What convert matched and whether it wrote the checkpoint."""
  source: str
  out_prefix: str
  match: Match
  written: bool

  def report_lines(self):
    lines = [
        f"Converted {self.source} -> {self.out_prefix}" if self.written else
        f"Not written: {len(self.match.unmatched)} variable(s) found no "
        f"value in {self.source} (pass --allow-partial to write anyway)"
    ]
    lines += _listed("Matched", [
        f"{name} <- {key}" +
        ("" if rule == name_matching.EXACT else f" ({rule.replace('_', ' ')})")
        for name, _, key, rule in self.match.matched
    ])
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


def checkpoint_of(objects):
  """A `Checkpoint` of a dict of named trackables, or of one root."""
  if isinstance(objects, dict):
    return object_checkpoints.Checkpoint(**objects)
  return object_checkpoints.Checkpoint(root=objects)


def convert(save_path, out_prefix, objects, mapping=None, allow_partial=False):
  """Writes the values of a name-based checkpoint as an object-based one.

  Args:
    save_path: The name-based checkpoint's prefix.
    out_prefix: Where to write the object-based checkpoint.
    objects: A dict of names to trackables, or one trackable (the root).
    mapping: Optional `{checkpoint name or scope: variable name or scope}`,
      as `init_from_checkpoint`'s `assignment_map`.
    allow_partial: Write even if some variables found no value.

  Returns:
    A `Result`.

  Raises:
    ValueError: If the checkpoint is object-based, or (as a restore would)
      a value does not fit its variable; nothing is written then.
  """
  assert context.executing_eagerly(), "convert runs eagerly"
  reader = checkpoint_opening.open_reader(save_path)
  if checkpoint_opening.read_object_graph(reader, save_path) is not None:
    raise ValueError(f"{save_path!r} is already an object-based checkpoint.")
  values = reads.CheckpointValues(save_path, reader)
  checkpoint = checkpoint_of(objects)
  match = match_variables(checkpoint, values.shapes, mapping)
  if match.unmatched and not allow_partial:
    return Result(save_path, out_prefix, match, written=False)
  _assign(values, match.matched)
  # The save counter (0) is written too, as after a restore by names.
  checkpoint.save_counter  # noqa: B018
  written = checkpoint.write(out_prefix)
  state_file.update_checkpoint_state_internal(
      save_dir=os.path.dirname(written) or ".",
      model_checkpoint_path=written,
      all_model_checkpoint_paths=[written],
      save_relative_paths=True)
  return Result(save_path, out_prefix, match, written=True)


def _assign(values, matched):
  """Checks every matched value against its variable, then assigns them."""
  plan = read_plan.ReadPlan(
      read_plan.ToCallback(
          key, [read_plan.plan_read(key, "", variable.dtype, variable.shape)],
          functools.partial(_assign_first, variable))
      for _, variable, key, _ in matched)
  read_plan.check(plan, values, shape_error=ValueError)
  read_plan.execute_eagerly(plan, values)


def _assign_first(variable, values):
  variable.assign(values[0])
