"""The values the engine saves from variables, read on the CPU.

A plain variable's value is described by a `VariableValueSpec`; `spec_tensors`
reads such values a batch at a time (`variable_batches`) and every other
spec's on its own. A save reads variables on their device and moves the
values to the CPU, where `SaveV2` runs (`set_cpu0`, `read_to_cpu`).
"""

from tensorflow.python.eager import context
from tensorflow.python.framework import device as pydev
from tensorflow.python.framework import ops
from tensorflow.python.ops import array_ops
from tensorflow.python.ops import gen_resource_variable_ops

from tf_objckpt.engine import saveable_objects
from tf_objckpt.engine import tuning
from tf_objckpt.engine import variable_batches
from tf_objckpt.foundation import tensorflow_internals


def set_cpu0(device_string: str) -> str:
  """Returns `device_string` with the device replaced by CPU:0.

  Restores read on the CPU of the task that owns the variable; job, replica
  and task are kept. Custom devices are returned unchanged.
  """
  if context.is_custom_device(device_string):
    return device_string
  spec = pydev.DeviceSpec.from_string(device_string)
  return spec.replace(device_type="CPU", device_index=0).to_string()


def read_to_cpu(var, device):
  """Reads `var` on its device (`var.device`), then moves the value to CPU."""
  if context.executing_eagerly():
    value = gen_resource_variable_ops.read_variable_op(var.handle, var.dtype)
  elif has_reusable_read(var):
    # The read made with the variable; a new op per variable would cost
    # more to build and add to the graph than the save itself.
    value = tensorflow_internals.graph_element(var)
  else:
    with ops.device(device):
      value = gen_resource_variable_ops.read_variable_op(var.handle, var.dtype)
  if not device or "CPU" in device.upper():
    return value
  with ops.device("/device:CPU:0"):
    return array_ops.identity(value)


def has_reusable_read(var):
  """Whether a graph variable's own read op can be saved from this graph.

  Graph-mode resource variables read themselves once when created, outside
  any control flow or control dependencies, like the v1 `Saver` expects.
  """
  value = tensorflow_internals.graph_element(var)
  return (value is not None and tensorflow_internals.in_graph_mode(var) and
          value.graph is ops.get_default_graph() and
          value.op.type == "ReadVariableOp" and not value.op.control_inputs)


class VariableValueSpec(saveable_objects.SaveSpec):
  """The VARIABLE_VALUE spec of a variable: reads it when the save runs."""

  # pylint: disable=super-init-not-called
  def __init__(self, var, name, device):
    self.variable = var
    self.name = name
    self.slice_spec = ""
    self.dtype = var.dtype
    self.device = device

  @property
  def tensor(self):
    return read_to_cpu(self.variable, self.device)


def spec_tensors(specs):
  """The tensors to save for `specs` (None for uninitialized variables).

  Plain variables on a CPU are read a batch (of at most `read_batch_limit`,
  see `tuning`) at a time (`variable_batches`), which costs far less than
  one read op each.
  """
  tensors = [None] * len(specs)
  batches = {}
  for index, spec in enumerate(specs):
    key = (variable_batches.batch_key(spec.variable) if isinstance(
        spec, VariableValueSpec) else None)
    if key is None:
      tensors[index] = spec.tensor
    else:
      batches.setdefault(key, []).append(index)
  for indices in batches.values():
    if not variable_batches.worth_batching(len(indices)):
      values = [specs[index].tensor for index in indices]
    else:
      variables = [specs[index].variable for index in indices]
      values = []
      limit = tuning.TUNING.read_batch_limit
      for start in range(0, len(variables), limit):
        values.extend(
            variable_batches.read_variables(variables[start:start + limit]))
    for index, value in zip(indices, values):
      tensors[index] = value
  return tensors


def is_plain_variable(saveable):
  """Whether `saveable` saves one whole variable's value, as the engine's
  batched restores can (its one spec is a `VariableValueSpec`)."""
  return (len(saveable.specs) == 1 and
          isinstance(saveable.specs[0], VariableValueSpec) and
          saveable.op is saveable.specs[0].variable)
