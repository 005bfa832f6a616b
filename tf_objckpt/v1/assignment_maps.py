"""`init_from_checkpoint`'s assignment map: which variable gets which value.

Each entry maps a checkpoint name to a target, in the forms TensorFlow's
`init_from_checkpoint` takes (entries are taken in order of checkpoint
name; a list of pairs may give one value to several targets):

- `"old_scope/": "scope/"`: every variable of the default variable store
  (`tf.compat.v1.get_variable`'s) under `scope/` takes the value of the
  same name under `old_scope/`; `"/"` on either side is the root;
- `"old_scope/name": "scope/name"`: the store's variable of that name, or
  the partitions (`scope/name/part_<i>`) of a partitioned one;
- `"name": variable`: a variable object;
- `"name": partitions`: a list of the slices of one partitioned variable,
  or (which TensorFlow does not take) a `PartitionedVariable` or a
  `ShardedVariable`: each slice reads its part of the checkpoint's value.

`resolve` turns a map into `Assignment`s, one per variable (the last entry
naming a variable wins, as TensorFlow's last override does). It only
resolves names and objects; `warm_start` checks keys, dtypes and shapes.
"""

import collections
from typing import Any, List, NamedTuple, Optional

from tensorflow.python.distribute import sharded_variable
from tensorflow.python.ops import resource_variable_ops
from tensorflow.python.ops import variable_scope
from tensorflow.python.ops import variables
from tensorflow.python.platform import tf_logging as logging

from tf_objckpt.foundation import identity_containers


class Assignment(NamedTuple):
  """One variable (or slice of one) and the checkpoint value it takes."""
  variable: Any
  key: str  # The checkpoint key it reads.
  slice_spec: str  # RestoreV2's `shape_and_slice`; "" for the whole value.
  full_shape: Optional[list]  # A slice's partitioned variable's shape.
  name: str  # The variable's name (and a slice's variable's), for messages.
  entry: str  # The assignment map entry that named it, for messages.


def resolve(assignment_map) -> List[Assignment]:
  """The `Assignment`s of `assignment_map` (a dict or a list of pairs).

  Raises:
    ValueError: If a name is neither a variable of the default variable
      store nor a scope mapped from a scope, or slices in one list belong
      to different variables.
    TypeError: If a target is not a name, a variable or partitions.
  """
  if isinstance(assignment_map, collections.abc.Mapping):
    assignment_map = assignment_map.items()
  store = variable_scope._get_default_variable_store()._vars  # pylint: disable=protected-access
  resolved = identity_containers.ObjectIdentityDictionary()
  for checkpoint_name, target in sorted(assignment_map,
                                        key=lambda pair: pair[0]):
    for assignment in _entry_assignments(checkpoint_name, target, store):
      resolved[assignment.variable] = assignment
  return list(resolved.values())


def _is_variable(value):
  """Whether `value` is a variable, as TensorFlow's map tells them apart."""
  return (isinstance(value, variables.Variable) or
          resource_variable_ops.is_resource_variable(value))


def _entry_assignments(checkpoint_name, target, store):
  """The assignments of one map entry."""
  entry = f"{checkpoint_name!r}: {_describe(target)}"
  if isinstance(target, str):
    stored = _stored(target, store)
    if stored is None:
      return _scope_assignments(checkpoint_name, target, store, entry)
    target = stored
  return _target_assignments(target, checkpoint_name, entry)


def _describe(target):
  if isinstance(target, str):
    return repr(target)
  if _is_variable(target):
    return f"variable {target.name!r}"
  return type(target).__name__


def _target_assignments(target, checkpoint_name, entry):
  """The assignments of a variable, or of each slice of partitions."""
  # Slices first: a ShardedVariable passes for a resource variable.
  slices = _slices_of(target, entry)
  if slices is not None:
    return [
        Assignment(variable, checkpoint_name, spec, full_shape,
                   f"{variable.name} (a slice of {full_name})", entry)
        for variable, spec, full_shape, full_name in slices
    ]
  if _is_variable(target):
    return [Assignment(target, checkpoint_name, "", None, target.name, entry)]
  raise TypeError(
      f"init_from_checkpoint: assignment map entry {entry}: a target is a "
      "variable name or scope, a variable, a list of the slices of a "
      "partitioned variable, a PartitionedVariable or a ShardedVariable; "
      f"got {type(target).__name__}.")


def _slices_of(target, entry):
  """The slices of partitions, or None if `target` is not partitions.

  Returns:
    `[(variable, slice spec, full shape, full name)]`, one per slice.

  Raises:
    ValueError: If a variable of a list is no slice, or slices belong to
      different variables.
  """
  if isinstance(target, sharded_variable.ShardedVariableMixin):
    return _shards(target)
  if isinstance(target, variables.PartitionedVariable):
    target = target._get_variable_list()  # pylint: disable=protected-access
  elif not (isinstance(target, (list, tuple)) and target and
            all(_is_variable(value) for value in target)):
    return None
  full_name = None
  slices = []
  for variable in target:
    info = variable._get_save_slice_info()  # pylint: disable=protected-access
    if info is None:
      raise ValueError(
          f"init_from_checkpoint: assignment map entry {entry}: variable "
          f"{variable.name!r} is not a slice of a partitioned variable; give "
          "a single variable on its own.")
    if full_name is not None and full_name != info.full_name:
      raise ValueError(
          f"Slices must all be from the same tensor: {full_name} != "
          f"{info.full_name} (assignment map entry {entry}).")
    full_name = info.full_name
    slices.append((variable, info.spec, list(info.full_shape), full_name))
  return slices


def _shards(target):
  """The shards of a `ShardedVariable`, as `_slices_of` gives slices.

  Shard i holds the rows after those of the shards before it.
  """
  full_shape = target.shape.as_list()
  offset = [0] * len(full_shape)
  shards = []
  for shard in target.variables:
    info = variables.Variable.SaveSliceInfo(full_name=target.name,
                                            full_shape=full_shape,
                                            var_offset=list(offset),
                                            var_shape=shard.shape.as_list())
    shards.append((shard, info.spec, full_shape, target.name))
    offset[0] += int(shard.shape[0])
  return shards


def _stored(name, store):
  """The store's variable `name`, or the list of its partitions, or None."""
  variable = store.get(name)
  if variable is not None:
    return variable
  parts = []
  while f"{name}/part_{len(parts)}" in store:
    parts.append(store[f"{name}/part_{len(parts)}"])
  return parts or None


def _scope_assignments(checkpoint_name, target, store, entry):
  """The variables a scope entry maps, as TensorFlow maps them.

  The variables under the target's scope (everything it names up to its
  last "/") each read the checkpoint name plus the rest of their name.
  """
  scope = target[:target.rindex("/")] if "/" in target else ""
  if not checkpoint_name.endswith("/"):
    raise ValueError(
        f"init_from_checkpoint: assignment map entry {entry}: the default "
        f"variable store has no variable {target!r}, and "
        f"{checkpoint_name!r} is not a scope. Assignment map with scope "
        f"only name {scope} should map to scope only {checkpoint_name}. "
        "Should be 'scope/': 'other_scope/'.")
  names = sorted({
      _without_partition(name)
      for name in store
      if not scope or name.startswith(scope + "/")
  })
  if not names:
    logging.warning(
        "init_from_checkpoint: assignment map entry %s names no variable of "
        "the default variable store; nothing is initialized from it.", entry)
  assignments = []
  for name in names:
    key = name[len(scope):]
    if target != "/":
      key = key[1:]
    if checkpoint_name != "/":
      key = checkpoint_name + key
    if key.endswith("/"):
      key = key[:-1]
    assignments.extend(_target_assignments(_stored(name, store), key, entry))
  return assignments


def _without_partition(name):
  """A partition's name without its `/part_<i>`, as TensorFlow strips it."""
  return name[:name.index("/part_")] if "/part_" in name else name
