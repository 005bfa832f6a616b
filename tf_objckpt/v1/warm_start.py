"""`init_from_checkpoint`: variables start from a checkpoint's values.

The assignment map (`assignment_maps`) gives each variable a checkpoint
key, and a slice for partitions. Before anything is assigned or built,
every key, dtype and shape is checked against the checkpoint: all problems
are raised in one error, each naming the variable, the key and the map
entry, of TensorFlow's type (a key missing or a shape that does not fit:
`ValueError`; only dtypes differ: `InvalidArgumentError`, which TensorFlow
raises when its initializer runs).

Graph building, each variable's initializer and initial value read the
checkpoint, as TensorFlow's do; the initializers run when the program runs
its initializers. Where TensorFlow adds a `RestoreV2` and an assignment
per variable, the engine reads in batches (`multi_device_saver.execute_plan`):
plain resource variables are read and assigned by one function call per
batch of about `graph_restore_batch_bytes` (their initializer is that
call), the others by `RestoreV2`s of many values and an assignment each;
initial values are outputs of `RestoreV2`s of many values. Eagerly, values
are assigned at once, read in pieces that are all read before any is
assigned.
"""

import os
from typing import Any, Mapping, Union

from tensorflow.python.distribute import distribute_lib
from tensorflow.python.eager import context
from tensorflow.python.framework import errors
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor_shape
from tensorflow.python.ops import resource_variable_ops
from tensorflow.python.platform import tf_logging as logging

from tf_objckpt.engine import multi_device_saver
from tf_objckpt.engine import read_plan
from tf_objckpt.engine import checkpoint_opening
from tf_objckpt.engine import reads
from tf_objckpt.engine import sharding
from tf_objckpt.engine import tuning
from tf_objckpt.inspection import checkpoint_reader
from tf_objckpt.v1 import assignment_maps


def init_from_checkpoint(ckpt_dir_or_file: Union[str, os.PathLike],
                         assignment_map: Mapping[str, Any]) -> None:
  """Initializes variables from a checkpoint, by an assignment map.

  Args:
    ckpt_dir_or_file: A directory (its latest checkpoint), a checkpoint
      prefix, or one of the checkpoint's files.
    assignment_map: A dict, or a list of pairs, from checkpoint names or
      scopes to variable names, scopes, variables or partitions (see
      `assignment_maps`).

  Raises:
    ValueError: If a name matches no variable or scope, a key is missing
      from the checkpoint, or a shape does not fit; or if a directory
      holds no checkpoint.
    InvalidArgumentError: If only dtypes differ.
    NotFoundError: If there is no checkpoint at the path.
  """

  def initialize(_):
    _initialize(ckpt_dir_or_file, assignment_map)

  if distribute_lib.get_cross_replica_context():
    initialize(None)
  else:
    distribute_lib.get_replica_context().merge_call(initialize)


def _initialize(ckpt_dir_or_file, assignment_map):
  prefix = checkpoint_reader.resolve_save_path(ckpt_dir_or_file)
  values = reads.CheckpointValues(prefix,
                                  checkpoint_opening.open_reader(prefix))
  assignments = assignment_maps.resolve(assignment_map)
  _check(assignments, values)
  plan = read_plan.ReadPlan(
      _ToVariable(index, assignment)
      for index, assignment in enumerate(assignments))
  if context.executing_eagerly():
    read_plan.execute_eagerly(plan, values)
  else:
    _override_initializers(plan, prefix)
  for assignment in assignments:
    logging.debug("Initialize variable %s from checkpoint %s with %s",
                  assignment.name, prefix, assignment.key)


def _check(assignments, values):
  """Raises if any assignment does not fit the checkpoint; see the module."""
  problems = [
      problem for problem in (
          _problem(assignment, values) for assignment in assignments)
      if problem is not None
  ]
  if not problems:
    return
  text = (f"Cannot initialize variables from checkpoint "
          f"{values.save_path!r}; nothing was initialized. "
          f"{len(problems)} problem(s):\n  " +
          "\n  ".join(text for _, text in problems))
  if any(error_type is ValueError for error_type, _ in problems):
    raise ValueError(text)
  raise errors.InvalidArgumentError(None, None, text)


def _problem(assignment, values):
  """`(error type, text)` if `assignment` does not fit, else None.

  Each text starts with TensorFlow's message for the problem.
  """
  key, variable = assignment.key, assignment.variable
  entry = f"(assignment map entry {assignment.entry})"
  stored_shape = values.shapes.get(key)
  if stored_shape is None:
    return ValueError, (f"Tensor {key} is not found in {values.save_path} "
                        f"checkpoint, for variable {assignment.name} {entry}")
  # Shapes first: TensorFlow checks them when called, dtypes when run.
  if assignment.full_shape is not None:
    fits = list(stored_shape) == assignment.full_shape
    shape = tensor_shape.TensorShape(assignment.full_shape)
  else:
    shape = variable.shape
    fits = shape.is_compatible_with(stored_shape)
  if not fits:
    return ValueError, (
        f"Shape of variable {assignment.name} ({shape}) doesn't match with "
        f"shape of tensor {key} ({stored_shape}) from checkpoint reader "
        f"{entry}")
  stored_dtype = values.dtypes[key]
  if stored_dtype != variable.dtype.base_dtype:
    return errors.InvalidArgumentError, (
        f"expected dtype {variable.dtype.base_dtype.name} of variable "
        f"{assignment.name} does not equal original dtype "
        f"{stored_dtype.name} of tensor {key} {entry}")
  return None


class _ToVariable(read_plan.Destination):
  """A variable taking its value, or its slice, from the checkpoint.

  Graph building, a restore read for it sets its initial value; those
  the engine restores in batches get theirs from `_read_initial_values`.
  """

  __slots__ = ("variable", "has_initial_value")

  def __init__(self, index, assignment):
    variable = assignment.variable
    super().__init__(f"{index}:{variable.name}", [
        read_plan.plan_read(assignment.key, assignment.slice_spec,
                            variable.dtype, variable.shape)
    ])
    self.variable = variable
    self.has_initial_value = False

  @property
  def plain_variable(self):
    if isinstance(self.variable, resource_variable_ops.BaseResourceVariable):
      return self.variable
    return None

  @property
  def device(self):
    return self.variable.device

  def restore(self, values):
    if not context.executing_eagerly():
      self.set_initial_value(values[0])
    return self.variable.assign(values[0], read_value=False)

  def set_initial_value(self, value):
    value.set_shape(self.variable.shape)
    self.variable._initial_value = value  # pylint: disable=protected-access
    self.has_initial_value = True


def _override_initializers(plan, save_path):
  """Makes each variable's initializer and initial value read `save_path`."""
  with ops.name_scope("checkpoint_initializer"):
    restore_ops = multi_device_saver.execute_plan(plan, save_path)
    _read_initial_values([
        destination for destination in plan.destinations
        if not destination.has_initial_value
    ], save_path)
  for destination in plan.destinations:
    destination.variable._initializer_op = restore_ops[destination.name]  # pylint: disable=protected-access


def _read_initial_values(destinations, save_path):
  """Initial values of `destinations` read by batched `RestoreV2`s.

  They are read only if something evaluates them: initializers do not.
  """
  batch_size = tuning.TUNING.graph_batch_size
  for device, group in sharding.group_by_task(destinations).items():
    for start in range(0, len(group), batch_size):
      batch = group[start:start + batch_size]
      to_read = [destination.reads[0] for destination in batch]
      with ops.device(device):
        tensors = reads.restore_v2(save_path, [value.key for value in to_read],
                                   [value.slice_spec for value in to_read],
                                   [value.dtype for value in to_read])
      for destination, tensor in zip(batch, tensors):
        destination.set_initial_value(tensor)
