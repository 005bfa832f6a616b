"""A dry run of an object-based restore: what would go where, nothing assigned.

`preview(save_path, root, object_map)` matches the checkpoint's nodes to the
program's objects as the restore walk would, from each pair of the object
map (`object_maps`; without one, the root from the root), and says, in
object paths, which value would restore into which object, which values
have no object, which objects no value, and whose shape or dtype differs.
Nothing is bound, assigned or created: objects not created yet have no
value in the preview (a restore would keep their values waiting), and
optimizer slots are shown as the slots of their variables, which the
restore makes.
"""

import os
import typing
from typing import Any, Optional

from tensorflow.python.framework import dtypes
from tensorflow.python.framework import tensor_shape
from tensorflow.python.util import compat

from tf_objckpt.engine import checkpoint_opening
from tf_objckpt.foundation import checkpoint_keys
from tf_objckpt.foundation import identity_containers
from tf_objckpt.foundation import tensorflow_internals
from tf_objckpt.foundation.type_hints import CheckpointPath
from tf_objckpt.restoring import keras3_slots
from tf_objckpt.restoring import object_graph_check
from tf_objckpt.restoring import object_maps
from tf_objckpt.restoring import restore_report
from tf_objckpt.saveables import trackable_saveables


class Placement(typing.NamedTuple):
  """One checkpointed value, and the object it would restore into."""
  checkpoint_path: str  # "model/encoder/dense/kernel", or "... .attribute".
  new_path: Optional[str]  # None: no object of the program takes it.
  shape: Optional[tuple]
  dtype: Optional[str]
  # A shape or dtype the object does not have; without an object, where
  # the map would have it.
  problem: Optional[str] = None

  def __str__(self):
    value = _value_text(self.shape, self.dtype)
    if self.new_path is None:
      return (f"{self.checkpoint_path} {value}: "
              f"{self.problem or 'no object takes it'}")
    text = f"{self.new_path or '(root)'} <- {self.checkpoint_path} {value}"
    return f"{text}: {self.problem}" if self.problem else text


def _value_text(shape, dtype):
  shape_part = "" if shape is None else restore_report.shape_text(shape)
  return " ".join(part for part in (shape_part, dtype or "") if part)


class RestorePreview(typing.NamedTuple):
  """What a restore would do (`preview`); `str()` reads as a report.

  Attributes:
    save_path: The checkpoint.
    pairs: `(new path, checkpoint path)` of the object map, or `(("",
      ""),)` without one.
    placements: A `Placement` for each value of the restore's scope, in
      checkpoint path order.
    objects_without_values: "path has no value at checkpoint path" for
      each existing object with values of its own that no value reaches.
  """
  save_path: str
  pairs: tuple
  placements: tuple
  objects_without_values: tuple

  @property
  def mismatched(self):
    return tuple(place for place in self.placements
                 if place.problem and place.new_path is not None)

  @property
  def unmatched(self):
    return tuple(place for place in self.placements if place.new_path is None)

  @property
  def complete(self):
    """Whether every value has its object, every object a value, all fit."""
    return not (self.mismatched or self.unmatched or
                self.objects_without_values)

  def __str__(self):
    restored = [
        place for place in self.placements
        if place.new_path is not None and not place.problem
    ]  # What would restore: matched, and fits.
    parts = [
        f"Restore preview of {self.save_path!r} (nothing assigned): "
        f"{restore_report.count_text(len(restored), 'value')} would restore, "
        f"{restore_report.count_text(len(self.mismatched), 'value')} "
        f"{'does' if len(self.mismatched) == 1 else 'do'} not fit, "
        f"{restore_report.count_text(len(self.unmatched), 'value')} without "
        f"an object, "
        f"{restore_report.count_text(len(self.objects_without_values), 'object')}"
        " without a value."
    ]
    parts.append(
        restore_report.listing("Object map:", [
            f"{new or '(root)'} <- {source or '(root)'}"
            for new, source in self.pairs
        ]))
    for header, items in (("Would restore:", restored), ("Do not fit:",
                                                         self.mismatched),
                          ("In the checkpoint, without an object:",
                           self.unmatched), ("Objects without a value:",
                                             self.objects_without_values)):
      if items:
        parts.append(restore_report.listing(header, items))
    return "\n".join(parts)


def preview(
    save_path: CheckpointPath,
    root: Any,
    object_map: Optional[dict] = None,
    attached_dependencies=()) -> RestorePreview:
  """What restoring `save_path` into `root` with `object_map` would do.

  Args:
    save_path: An object-based checkpoint.
    root: The program's root object (a `Checkpoint`, or any trackable).
    object_map: Optional `{new path: checkpoint path}`, as the option.
    attached_dependencies: References of objects saved as the root's
      children without being its dependencies.

  Raises:
    NotFoundError, ValueError: As a restore with the map would, for paths
      missing on either side; ValueError for a name-based checkpoint.
  """
  save_path = compat.as_str(os.fspath(save_path))
  reader, proto = checkpoint_opening.open_object_based(
      save_path, "its preview is `tf-objckpt convert`'s")
  shapes = reader.get_variable_to_shape_map()
  dtype_of = reader.get_variable_to_dtype_map()
  graph_index = object_graph_check.check_object_graph(proto, save_path, shapes)
  slot_lists = keras3_slots.SlotLists(proto, graph_index.child_names)
  object_map = object_maps.normalized(object_map) or {"": ""}
  mapped = object_maps.resolve(object_map, proto, graph_index, slot_lists, root,
                               attached_dependencies, save_path)
  matches = _match(mapped, graph_index, attached_dependencies)
  node_paths = object_graph_check.NodePaths(proto, separator="/")
  names = {
      node_id: mapped.node_path(node_id, node_paths) for node_id in mapped.scope
  }
  placements = []
  for node_id in sorted(mapped.scope, key=names.__getitem__):
    for attribute in proto.nodes[node_id].attributes:
      placements.append(
          _placement(names[node_id], attribute, matches.get(node_id), shapes,
                     dtype_of, mapped.new_path_of(names[node_id])))
  placements.extend(_slot_placements(proto, mapped, matches, names))
  return RestorePreview(
      save_path,
      tuple((pair.new_path, pair.source_path) for pair in mapped.pairs),
      tuple(placements), tuple(_objects_without_values(mapped, matches)))


class _Match(typing.NamedTuple):
  new_path: str
  trackable: Any


def _match(mapped, graph_index, attached_dependencies):
  """`{node id: _Match}`, breadth first from each pair by local names."""
  matches = {}
  queue = [
      (pair.node_id, pair.trackable, pair.new_path) for pair in mapped.pairs
  ]
  for node_id, trackable, new_path in queue:
    if node_id in matches:
      continue
    matches[node_id] = _Match(new_path, trackable)
    tensorflow_internals.initialize(trackable)
    attached = {
        reference.name: reference.ref for reference in attached_dependencies
    } if node_id == 0 else {}
    for child_id, name in zip(*graph_index.children.get(node_id, ((), ()))):
      child = attached.get(name) or tensorflow_internals.lookup_dependency(
          trackable, name)
      if (child is None or child_id in matches or
          mapped.takes_elsewhere(child_id, child)):
        continue
      queue.append((child_id, child, object_maps.join(new_path, name)))
  return matches


def _placement(object_path, attribute, match, shapes, dtype_of, target):
  """The `Placement` of one checkpointed attribute.

  `target`: the program's path the map gives it, for one without an object.
  """
  key = attribute.checkpoint_key
  shape = shapes.get(key)
  dtype = dtype_of.get(key)
  dtype_name = dtype.name if dtype is not None else None
  if attribute.name != checkpoint_keys.VARIABLE_VALUE_KEY:
    object_path += f" .{attribute.name}"
  shape = None if shape is None else tuple(shape)
  if match is None:
    where = None if target is None else f"no object at {target or '(root)'}"
    return Placement(object_path, None, shape, dtype_name, where)
  return Placement(object_path, match.new_path, shape, dtype_name,
                   _misfit(attribute, match.trackable, shape, dtype))


def _misfit(attribute, trackable, shape, dtype):
  """Why a variable's value does not fit its object, or None."""
  if attribute.name != checkpoint_keys.VARIABLE_VALUE_KEY:
    return None
  own_shape = getattr(trackable, "shape", None)
  own_dtype = getattr(trackable, "dtype", None)
  problems = []
  if own_shape is not None and shape is not None:
    dims = tensor_shape.TensorShape(own_shape)
    if dims.rank is not None and not dims.is_compatible_with(shape):
      problems.append(f"the object's shape is "
                      f"{restore_report.shape_text(dims.as_list())}")
  if own_dtype is not None and dtype is not None:
    try:
      own = dtypes.as_dtype(own_dtype)
    except TypeError:
      own = None
    if own is not None and own.base_dtype != dtype.base_dtype:
      problems.append(f"the object's dtype is {own.name}")
  return " and ".join(problems) or None


def _slot_placements(proto, mapped, matches, names):
  """Placements of v1 slot variables: their optimizer's, of their variable."""
  placements = []
  for optimizer_id, node in enumerate(proto.nodes):
    for slot in node.slot_variables:
      slot_id = slot.slot_variable_node_id
      if slot_id not in mapped.scope or slot_id in matches:
        continue
      optimizer = matches.get(optimizer_id)
      variable = matches.get(slot.original_variable_node_id)
      new_path = None
      if optimizer is not None and variable is not None:
        new_path = (f"{optimizer.new_path}'s slot {slot.slot_name!r} for "
                    f"{variable.new_path}")
      placements.append(Placement(names[slot_id], new_path, None, None))
  return placements


def _objects_without_values(mapped, matches):
  """Objects below the pairs' with values of their own, matched to none."""
  matched = identity_containers.ObjectIdentitySet(
      match.trackable for match in matches.values())
  lines, seen = [], identity_containers.ObjectIdentitySet()
  for pair in mapped.pairs:
    paths = [(pair.new_path, pair.trackable)] + [
        (object_maps.join(pair.new_path, path), trackable)
        for path, trackable in object_maps.objects_below(pair.trackable)
    ]
    for path, trackable in paths:
      if trackable in matched or trackable in seen:
        continue
      seen.add(trackable)
      if trackable_saveables.saveable_objects_from_trackable(trackable):
        source = mapped.checkpoint_path_of(path)
        lines.append(f"{path or '(root)'} has no value at "
                     f"{source or '(root)'}")
  return lines
