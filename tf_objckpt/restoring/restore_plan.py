"""Building read plans: what one restore step reads, and into what.

Every restore step builds one `read_plan.ReadPlan` (the engine's type),
checks it once against the checkpoint (`read_plan.check`) and has the
engine execute it: an object-based restore (`restore_coordinator`) for the
immediate restore and each later batch (restore-on-create, graph-mode
restore ops cached by an earlier restore), a name-based restore through
`Checkpoint` (`name_based`), and the v1 `Saver` (`v1.saver_builders`, and
`plan_from_graph` for `SaverDef`s whose saveables are unknown). So a
restore that cannot complete assigns nothing, and all paths report
problems in one style.

Here: the destinations the walk finds (plain variables, saveables, Python
state, restore ops already built) turned into a plan, the shape each
saveable must have, and plans read from a v1 `Saver`'s graph.
"""

from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor_shape
from tensorflow.python.framework import tensor_util

from tf_objckpt.engine import read_plan
from tf_objckpt.foundation import checkpoint_keys as trackable_utils


def plan_of(
    saveables=(), python_saveables=(), variables=(), cached=(), built_ops=None):
  """The plan of one restore step of the object-based walk.

  Args:
    saveables: `SaveableObject`s to restore.
    python_saveables: `PythonStateSaveable`s to restore.
    variables: `(name, checkpoint key, variable)` of stock resource
      variables whose value is assigned directly.
    cached: `(name, saveable, restore op)` of saveables restored by ops an
      earlier restore built under `name` (graph mode).
    built_ops: Graph building, `{name: restore op}` that earlier restores
      built: a variable named there is restored by that op.

  Returns:
    A `read_plan.ReadPlan`; restore ops already built come first.
  """
  destinations = [
      read_plan.ToRestoreOp(name, _saveable_reads(saveable), op)
      for name, saveable, op in cached
  ]
  destinations.extend(
      read_plan.ToSaveable(saveable, expected_shape(saveable))
      for saveable in saveables)
  for name, key, variable in variables:
    destination = read_plan.ToVariable(name, key, variable)
    built_op = built_ops.get(name) if built_ops else None
    if built_op is not None:
      destination = read_plan.ToRestoreOp(name, destination.reads, built_op)
    destinations.append(destination)
  destinations.extend(
      read_plan.ToPythonState(saveable) for saveable in python_saveables)
  return read_plan.ReadPlan(destinations)


def plan_of_initial_value(key, dtype, shape):
  """The plan of a value read before its variable exists (restore-on-create).

  A dtype or shape of None is not checked.
  """
  return read_plan.ReadPlan(
      [read_plan.ToInitialValue(read_plan.plan_read(key, "", dtype, shape))])


def _saveable_reads(saveable):
  return read_plan.ToSaveable(saveable, expected_shape(saveable)).reads


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
  if (obj is None or len(saveable.specs) != 1 or getattr(
      saveable, "_local_names", None) != [trackable_utils.VARIABLE_VALUE_KEY]):
    return None
  shape = getattr(obj, "shape", None)
  try:
    return tensor_shape.TensorShape(shape) if shape is not None else None
  except (TypeError, ValueError):
    return None


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
    for output, key, slice_spec, dtype in zip(op.outputs,
                                              names.flat, slices.flat,
                                              op.get_attr("dtypes")):
      shape, reshaped = _assigned_shape(output)
      entries.append(
          read_plan.plan_read(key, slice_spec, dtype, shape, reshaped))
  return read_plan.ReadPlan([read_plan.ToRestoreOp(root.name, entries, root)])
