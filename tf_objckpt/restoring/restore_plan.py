"""Restore plans: what a restore will read, checked before anything is assigned.

A plan lists every (checkpoint key, dtype, shape) a restore reads. Every
restore path checks its plan against the checkpoint's index first: object-based
restores (eagerly and graph building), restore-on-create, name-based restores
through `Checkpoint`, and the v1 `Saver`. So a restore that cannot complete
assigns nothing, and all paths report problems in one style, naming the
checkpoint, each key with its object path, and both dtypes or shapes.
"""

import math
from typing import NamedTuple, Optional

from tensorflow.core.framework import types_pb2
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import errors
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor_shape
from tensorflow.python.framework import tensor_util
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.util import compat

from tf_objckpt import trackable_utils

# How a stored shape must relate to an entry's expected shape.
SAME_SHAPE = 0  # Compatible shapes (the variable's; None dims match any).
SAME_SIZE = 1  # Equal numbers of elements (the v1 Saver reshapes).
FULL_SHAPE = 2  # Equal to the full shape of a partitioned variable.

# At most this many keys are spelled out in one error message.
_MAX_NAMES_IN_MESSAGE = 100


class PlanEntry(NamedTuple):
  """One value a restore reads: its key, dtype and expected shape."""
  key: str
  dtype: Optional[dtypes.DType]  # A base dtype (interned); None: any.
  shape: Optional[tuple]  # Dims, None dims match any; None: unchecked.
  mode: int


def entry(key, slice_spec, dtype, shape, reshape=False):
  """The plan entry of one value.

  Args:
    key: The checkpoint key.
    slice_spec: Its `shape_and_slice` string; a slice is checked against
      the full shape it names.
    dtype: The dtype the restore expects (None for any).
    shape: The shape assigned to (a `TensorShape`, a list, or None for any).
    reshape: Whether the value is reshaped to `shape` (only its number of
      elements must match).

  Returns:
    A `PlanEntry`.
  """
  key = compat.as_str(key)
  if dtype is not None:
    dtype = dtypes.as_dtype(dtype).base_dtype
  if slice_spec:
    # "<full shape dims> <slice>": the key holds the full tensor.
    full_shape = compat.as_str(slice_spec).split()[:-1]
    return PlanEntry(key, dtype, tuple(int(dim) for dim in full_shape),
                     FULL_SHAPE)
  if shape is not None:
    if not isinstance(shape, tensor_shape.TensorShape):
      shape = tensor_shape.TensorShape(shape)
    if shape.rank is None or (reshape and not shape.is_fully_defined()):
      shape = None
    else:
      shape = tuple(shape.as_list())
  mode = SAME_SIZE if reshape and shape is not None else SAME_SHAPE
  return PlanEntry(key, dtype, shape, mode)


class RestorePlan:
  """The entries of one restore, arranged for a quick check.

  Checking a plan that fits compares whole lists (keys, dtypes, shapes)
  rather than looping over the entries in Python; only a plan that does
  not fit is examined entry by entry to explain why.
  """

  def __init__(self, entries):
    self.entries = tuple(entries)
    self.keys = frozenset(entry.key for entry in self.entries)
    self._dtype_keys = [entry.key for entry in self.entries]
    self._dtypes = [entry.dtype for entry in self.entries]
    exact = [entry for entry in self.entries
             if entry.shape is not None and entry.mode != SAME_SIZE]
    self._shape_keys = [entry.key for entry in exact]
    self._shapes = [list(entry.shape) for entry in exact]
    self._size_checks = [(entry.key, math.prod(entry.shape))
                         for entry in self.entries
                         if entry.shape is not None and entry.mode == SAME_SIZE]

  def __eq__(self, other):
    return isinstance(other, RestorePlan) and self.entries == other.entries

  def __hash__(self):
    return hash(self.entries)

  def fits(self, stored_dtypes, stored_shapes):
    """Whether every dtype and shape agrees exactly with the checkpoint."""
    return (
        list(map(stored_dtypes.__getitem__, self._dtype_keys)) ==
        self._dtypes and
        list(map(stored_shapes.__getitem__, self._shape_keys)) ==
        self._shapes and
        all(math.prod(stored_shapes[key]) == size
            for key, size in self._size_checks))


def check(plan, save_path, stored_dtypes, stored_shapes,
          shape_error=errors.InvalidArgumentError,
          dtype_error=errors.InvalidArgumentError, list_unexpected=False):
  """Raises unless every entry of `plan` can be read from the checkpoint.

  Args:
    plan: A `RestorePlan`.
    save_path: The checkpoint's path, for messages.
    stored_dtypes: The checkpoint's `{key: DType}`.
    stored_shapes: The checkpoint's `{key: dims}`.
    shape_error: The error type when only variables' shapes differ (a
      reshape or a slice that does not fit is an `InvalidArgumentError`).
    dtype_error: The error type when only dtypes differ (any mix of
      problems: `InvalidArgumentError`).
    list_unexpected: Name the checkpoint's keys the plan does not read when
      keys are missing.

  Raises:
    NotFoundError: If keys are missing.
    The error types above: If dtypes or shapes differ; one message lists
      every mismatch.
  """
  if not plan.entries:
    return
  save_path = compat.as_str(save_path)
  missing = plan.keys.difference(stored_shapes)
  if missing:
    _raise_missing(save_path, plan, missing, stored_shapes, list_unexpected)
  if plan.fits(stored_dtypes, stored_shapes):
    return
  dtype_problems, shape_problems, other_problems = [], [], []
  for plan_entry in plan.entries:
    if (plan_entry.dtype is not None and
        stored_dtypes[plan_entry.key] != plan_entry.dtype):
      dtype_problems.append(_dtype_problem(plan_entry, stored_dtypes))
      continue
    problem = _shape_problem(plan_entry, stored_shapes[plan_entry.key])
    if problem and plan_entry.mode == SAME_SHAPE:
      shape_problems.append(problem)
    elif problem:
      other_problems.append(problem)
  problems = dtype_problems + shape_problems + other_problems
  if not problems:
    return
  if len(shape_problems) == len(problems):
    error_type = shape_error
  elif len(dtype_problems) == len(problems):
    error_type = dtype_error
  else:
    error_type = errors.InvalidArgumentError
  _raise(error_type,
         f"Cannot restore from checkpoint {save_path!r}; nothing was "
         f"restored. {len(problems)} value(s) do not fit:\n  " +
         "\n  ".join(problems))


def expected_shape(saveable):
  """The shape a saveable's single value must have, or None if unknown.

  Variables' saveables know it; so do `_serialize_to_tensors` saveables of
  variable-like objects (Keras 3 variables), whose shape is checked here so
  that a mismatch is found before anything is assigned.
  """
  shape = getattr(saveable, "_var_shape", None)
  if shape is not None:
    return shape
  obj = getattr(saveable, "_trackable", None)
  if (obj is None or len(saveable.specs) != 1 or
      getattr(saveable, "_local_names", None) !=
      [trackable_utils.VARIABLE_VALUE_KEY]):
    return None
  shape = getattr(obj, "shape", None)
  try:
    return tensor_shape.TensorShape(shape) if shape is not None else None
  except (TypeError, ValueError):
    return None


def describe_key(key):
  """Names a checkpoint key and the object it belongs to."""
  return f"checkpoint key {_key_and_object(key)}"


def _key_and_object(key):
  path = trackable_utils.object_path_of_key(key)
  if path == key:
    return repr(key)
  return f"{key!r} (object {path!r})"


def _dtype_problem(plan_entry, stored_dtypes):
  """TensorFlow's phrase (RestoreV2's), then the dtypes by their Python names."""
  stored = stored_dtypes[plan_entry.key]
  return (f"{describe_key(plan_entry.key)}: expected dtype "
          f"{_kernel_dtype_name(plan_entry.dtype)} does not equal original "
          f"dtype {_kernel_dtype_name(stored)}; the checkpoint holds dtype "
          f"{stored.name} but {plan_entry.dtype.name} is expected")


def _kernel_dtype_name(dtype):
  """A dtype as TensorFlow's kernels name it in errors ("float", "double")."""
  enum_name = types_pb2.DataType.Name(dtype.as_datatype_enum)
  return enum_name[len("DT_"):].lower()


def _shape_problem(plan_entry, stored):
  """Why a stored shape does not fit `plan_entry`, or None if it does."""
  expected = plan_entry.shape
  if expected is None:
    return None
  if plan_entry.mode == SAME_SIZE:
    if math.prod(stored) == math.prod(expected):
      return None
    return (f"{describe_key(plan_entry.key)}: cannot reshape the "
            f"checkpoint's shape {tuple(stored)} ({math.prod(stored)} "
            f"elements) to {expected} ({math.prod(expected)} elements)")
  if len(stored) == len(expected) and all(
      dim is None or dim == saved for dim, saved in zip(expected, stored)):
    return None
  what = ("partitioned variable with full shape"
          if plan_entry.mode == FULL_SHAPE else "variable with shape")
  return (f"{describe_key(plan_entry.key)}: received incompatible tensor "
          f"with shape {tuple(stored)} when attempting to restore "
          f"{what} {_shape_text(expected)}")


def _shape_text(dims):
  return str(tensor_shape.TensorShape(list(dims)))


def _raise_missing(save_path, plan, missing, stored_shapes, list_unexpected):
  message = (f"Key {min(missing)} not found in checkpoint {save_path}. "
             "Nothing was restored.\n"
             f"Keys to restore that the checkpoint lacks ({len(missing)}): "
             f"{_key_list(missing)}")
  if list_unexpected:
    unexpected = set(stored_shapes).difference(plan.keys)
    unexpected.discard(tf_base.OBJECT_GRAPH_PROTO_KEY)
    message += ("\nKeys in the checkpoint that are not restored "
                f"({len(unexpected)}): {_key_list(unexpected)}")
  _raise(errors.NotFoundError, message)


def _key_list(keys):
  keys = sorted(keys)
  text = ", ".join(_key_and_object(key)
                   for key in keys[:_MAX_NAMES_IN_MESSAGE])
  if len(keys) > _MAX_NAMES_IN_MESSAGE:
    text += f", ... ({len(keys) - _MAX_NAMES_IN_MESSAGE} more)"
  return text or "(none)"


def _raise(error_type, message):
  if issubclass(error_type, errors.OpError):
    raise error_type(None, None, message)
  raise error_type(message)


# ----------------------------------------------------------------------------
# Plans of v1 `Saver` graphs, whose saveables are unknown.
# ----------------------------------------------------------------------------


def _walk_identities(tensor):
  """Follows `tensor` through Identity ops to its only non-Identity consumer.

  Returns:
    `(consumer_op, input_tensor)` or `(None, None)` when the value is used in
    more than one place.
  """
  while True:
    consumers = tensor.consumers()
    if len(consumers) != 1:
      return None, None
    consumer = consumers[0]
    if consumer.type != "Identity":
      return consumer, tensor
    tensor = consumer.outputs[0]


def _assigned_shape(restored):
  """The shape a restored tensor must have, read from the graph.

  Returns:
    `(shape, reshaped)`: `shape` is a fully defined `TensorShape` or None when
    nothing enforces it; `reshaped` tells that the value goes through a
    Reshape (the saver was built with `reshape=True`).
  """
  consumer, value = _walk_identities(restored)
  if consumer is None:
    return None, False
  if consumer.type == "Reshape":
    shape = consumer.outputs[0].shape
    return (shape if shape.is_fully_defined() else None), True
  if len(consumer.inputs) < 2 or consumer.inputs[1].name != value.name:
    return None, False
  shape = None
  if consumer.type == "Assign":
    if consumer.get_attr("validate_shape"):
      shape = consumer.inputs[0].shape
  elif consumer.type == "AssignVariableOp":
    handle_op = consumer.inputs[0].op
    if handle_op.type == "VarHandleOp":
      shape = tensor_shape.TensorShape(handle_op.get_attr("shape"))
  if shape is not None and not shape.is_fully_defined():
    shape = None
  return shape, False


def plan_from_graph(graph, restore_op_name):
  """The restore plan of the `RestoreV2` ops feeding a graph's restore op.

  Used for savers made from a `SaverDef` (imported meta graphs, possibly
  written by TensorFlow), whose saveables are unknown: shapes come from the
  ops assigning the restored tensors. Tensors whose keys are not constants
  are left out (the restore op itself still checks them).
  """
  root = graph.as_graph_element(restore_op_name)
  if not isinstance(root, ops.Operation):
    root = root.op
  seen = {root}
  pending = [root]
  restore_ops = []
  while pending:
    op = pending.pop()
    if op.type == "RestoreV2":
      restore_ops.append(op)
      continue
    for dep in op.control_inputs + [t.op for t in op.inputs]:
      if dep not in seen:
        seen.add(dep)
        pending.append(dep)
  entries = []
  for op in sorted(restore_ops, key=lambda o: o.name):
    names = tensor_util.constant_value(op.inputs[1])
    slices = tensor_util.constant_value(op.inputs[2])
    if names is None or slices is None:
      continue
    for output, key, slice_spec, dtype in zip(
        op.outputs, names.flat, slices.flat, op.get_attr("dtypes")):
      shape, reshaped = _assigned_shape(output)
      entries.append(entry(key, slice_spec, dtype, shape, reshaped))
  return RestorePlan(entries)
