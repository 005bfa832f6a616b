"""Reads many resource variables, and finds their handles, with few ops.

Checkpointing touches every variable, and one op per variable is what makes
it slow: eagerly, each op costs a dispatch; when graph building, each op
costs Grappler, which optimizes the subgraph of every new `Session.run`
fetch, a fraction of a millisecond. TensorFlow has batched kernels for this:
`_VarHandlesOp` makes the handles of many variables (looked up by container
and shared name, so they reach the variables of the session) and
`_ReadVariablesOp` reads many variables.

Grappler's cost also grows faster than linearly with an op's number of
outputs, so graph-mode batches hold at most `GRAPH_BATCH_SIZE` variables.
"""

import functools

from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.eager import context
from tensorflow.python.eager import execute
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import ops
from tensorflow.python.ops import resource_variable_ops

GRAPH_BATCH_SIZE = 64
# Fewer variables than this are not worth a batched op when graph building:
# it would add ops where each variable's own handle and read already exist.
_GRAPH_BATCH_MIN = 16


def worth_batching(count):
  """Whether `count` variables of one device are read or found batched."""
  return context.executing_eagerly() or count >= _GRAPH_BATCH_MIN


def read_variables(variables):
  """Reads `variables`, all on one CPU device (see `batch_key`)."""
  if context.executing_eagerly():
    return execute.execute(
        b"_ReadVariablesOp", num_outputs=len(variables),
        inputs=[variable.handle for variable in variables],
        attrs=("N", len(variables),
               "dtypes", [variable.dtype.as_datatype_enum
                          for variable in variables]),
        ctx=context.context())
  values = []
  for start in range(0, len(variables), GRAPH_BATCH_SIZE):
    batch = variables[start:start + GRAPH_BATCH_SIZE]
    with ops.colocate_with(batch[0].handle.op):
      values.extend(_create_op(
          "_ReadVariablesOp", "ReadVariables", _batch_handles(batch),
          [variable.dtype for variable in batch],
          N=_int_attr(len(batch)),
          dtypes=_list_attr(type=[variable.dtype.as_datatype_enum
                                  for variable in batch])).outputs)
  return values


def graph_handles(variables):
  """Handles to `variables`, all on one CPU device (graph building)."""
  handles = []
  for start in range(0, len(variables), GRAPH_BATCH_SIZE):
    batch = variables[start:start + GRAPH_BATCH_SIZE]
    with ops.colocate_with(batch[0].handle.op):
      handles.extend(_batch_handles(batch))
  return handles


def batch_key(variable):
  """What variables read together share (their device), or None.

  None when `variable` is not a plain resource variable on a CPU: of this
  graph (or eager), without colocation constraints of its own.
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


def _batch_handles(variables):
  """A `_VarHandlesOp` with the handles of `variables` (graph building)."""
  handle_ops = [variable.handle.op for variable in variables]
  return _create_op(
      "_VarHandlesOp", "VarHandles", [], [dtypes.resource] * len(variables),
      N=_int_attr(len(variables)),
      containers=_list_attr(s=[op.get_attr("container") for op in handle_ops]),
      shared_names=_list_attr(s=[op.get_attr("shared_name")
                                 for op in handle_ops]),
      dtypes=_list_attr(type=[variable.dtype.as_datatype_enum
                              for variable in variables]),
      shapes=_list_attr(shape=[variable.shape.as_proto()
                               for variable in variables])).outputs


def _create_op(op_type, name, inputs, output_types, **attrs):
  return ops.get_default_graph().create_op(
      op_type, inputs, output_types, name=name, attrs=attrs)


def _int_attr(value):
  return attr_value_pb2.AttrValue(i=value)


def _list_attr(**values):
  return attr_value_pb2.AttrValue(
      list=attr_value_pb2.AttrValue.ListValue(**values))


@functools.lru_cache(maxsize=None)
def _has_accelerators():
  """Whether ops without a device may be placed off the CPU."""
  return any(device.device_type != "CPU"
             for device in context.context().list_logical_devices())
