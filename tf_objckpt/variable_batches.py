"""Reads and assigns many resource variables with few ops.

Checkpointing touches every variable, and one op per variable is what makes
it slow. Eagerly, each op costs a dispatch. When graph building, each op
costs Grappler, which optimizes the subgraph of every new `Session.run`
fetch, a fraction of a millisecond, and more than linearly with an op's
number of outputs. So:

- eagerly, the variables of a device are read by one `_ReadVariablesOp`;
- graph building, variables go in batches of at most `GRAPH_BATCH_SIZE`: a
  `_VarHandlesOp` makes their handles (it looks them up by container and
  shared name, so it reaches the variables of the session), then one
  `_ReadVariablesOp` reads them, or one call of a function assigns them.
  The function is marked `_noinline`, so Grappler optimizes its body once
  rather than once per call, and named after its dtypes, so that graphs
  and meta graphs of different programs agree on what a name means.

Only plain resource variables on a CPU are batched (`batch_key`); others
take the per-variable path.
"""

import functools
import hashlib

from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.eager import context
from tensorflow.python.eager import execute
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import function
from tensorflow.python.framework import ops
from tensorflow.python.ops import gen_resource_variable_ops
from tensorflow.python.ops import resource_variable_ops

GRAPH_BATCH_SIZE = 64
# Fewer variables than this are not worth batched ops when graph building:
# they would add ops where each variable's own handle and read exist.
_GRAPH_BATCH_MIN = 16


def batch_key(variable):
  """What the variables batched with `variable` share (a device), or None.

  None unless `variable` is a plain resource variable on a CPU, of the
  default graph (or eager), without colocation constraints of its own.
  """
  if not resource_variable_ops.is_resource_variable(variable):
    return None
  if context.executing_eagerly():
    device = variable.device
    return device if "CPU" in device.upper() else None
  handle = variable.handle
  if (ops.inside_function() or handle.graph is not ops.get_default_graph() or
      handle.op.type != "VarHandleOp" or
      handle.op.colocation_groups() != [b"loc:@" + handle.op.name.encode()]):
    return None
  device = handle.op.device
  if "CPU" in device.upper() or (not device and not _has_accelerators()):
    return device
  return None


def worth_batching(count):
  """Whether `count` variables of one `batch_key` are worth batching."""
  return context.executing_eagerly() or count >= _GRAPH_BATCH_MIN


def read_variables(variables):
  """The values of `variables`, all of one `batch_key`."""
  if context.executing_eagerly():
    return execute.execute(
        b"_ReadVariablesOp", num_outputs=len(variables),
        inputs=[variable.handle for variable in variables],
        attrs=("N", len(variables), "dtypes", _dtype_enums(variables)),
        ctx=context.context())
  values = []
  for start in range(0, len(variables), GRAPH_BATCH_SIZE):
    batch = variables[start:start + GRAPH_BATCH_SIZE]
    with ops.colocate_with(batch[0].handle.op):
      values.extend(_create_op(
          "_ReadVariablesOp", "ReadVariables", _handles(batch),
          [variable.dtype for variable in batch],
          N=attr_value_pb2.AttrValue(i=len(batch)),
          dtypes=_list_attr(type=_dtype_enums(batch))).outputs)
  return values


def assign_variables(variables, values):
  """Ops assigning `values` to `variables`, all of one `batch_key` (graph).

  Returns:
    One op per batch of `GRAPH_BATCH_SIZE` variables, for each variable.
  """
  assign_ops = []
  for start in range(0, len(variables), GRAPH_BATCH_SIZE):
    batch = variables[start:start + GRAPH_BATCH_SIZE]
    handles = _handles(batch)
    with ops.colocate_with(batch[0].handle.op):
      assign_op = _assign_function(tuple(_dtype_enums(batch)))(
          *handles, *values[start:start + len(batch)])
    assign_ops.extend([assign_op] * len(batch))
  return assign_ops


def _handles(variables):
  """A `_VarHandlesOp`'s handles to `variables` (graph building)."""
  handle_ops = [variable.handle.op for variable in variables]
  with ops.colocate_with(handle_ops[0]):
    return _create_op(
        "_VarHandlesOp", "VarHandles", [], [dtypes.resource] * len(variables),
        N=attr_value_pb2.AttrValue(i=len(variables)),
        containers=_list_attr(s=[op.get_attr("container")
                                 for op in handle_ops]),
        shared_names=_list_attr(s=[op.get_attr("shared_name")
                                   for op in handle_ops]),
        dtypes=_list_attr(type=_dtype_enums(variables)),
        shapes=_list_attr(shape=[variable.shape.as_proto()
                                 for variable in variables])).outputs


@functools.lru_cache(maxsize=None)
def _assign_function(dtype_enums):
  """The function assigning values of `dtype_enums` through handles.

  Named after its content, so that the same name in any graph (one
  imported from another program's meta graph, say) means the same function.
  """
  count = len(dtype_enums)
  digest = hashlib.sha256(repr(dtype_enums).encode()).hexdigest()[:16]

  @function.Defun(*([dtypes.resource] * count +
                    [dtypes.as_dtype(enum) for enum in dtype_enums]),
                  func_name=f"tf_objckpt_assign_variables_{digest}",
                  noinline=True)
  def assign_all(*handles_and_values):
    for handle, value in zip(handles_and_values[:count],
                             handles_and_values[count:]):
      gen_resource_variable_ops.assign_variable_op(handle, value)

  return assign_all


def _dtype_enums(variables):
  return [variable.dtype.as_datatype_enum for variable in variables]


def _create_op(op_type, name, inputs, output_types, **attrs):
  return ops.get_default_graph().create_op(
      op_type, inputs, output_types, name=name, attrs=attrs)


def _list_attr(**values):
  return attr_value_pb2.AttrValue(
      list=attr_value_pb2.AttrValue.ListValue(**values))


@functools.lru_cache(maxsize=None)
def _has_accelerators():
  """Whether ops without a device may be placed off the CPU."""
  return any(device.device_type != "CPU"
             for device in context.context().list_logical_devices())
