"""Reads and assigns many resource variables with few ops.

Checkpointing touches every variable, and one op per variable is what makes
it slow. Eagerly, each op costs a dispatch. When graph building, each
tensor costs Grappler, which optimizes the subgraph of every new
`Session.run` fetch, about 10 us per optimizer; an op costs more. So:

- eagerly, the variables of a device are read by one `_ReadVariablesOp`;
- graph building, a save reads variables in batches of at most
  `graph_batch_size` (`tuning`): a `_VarHandlesOp` makes their handles (it
  looks them up by container and shared name, so it reaches the variables
  of the session), then one `_ReadVariablesOp` reads them;
- graph building, a restore reads and assigns batches of variables, given
  their handles from here, through one function call each (the I/O
  engine's `graph_restores.restore_variables`);
- eagerly, a restore assigns runs of variables on a thread of its own
  (`assign_variables`): an eager op records its caller's Python stack, at a
  cost that grows with the stack's depth.

Only plain resource variables on a CPU are batched (`batch_key`); others
take the per-variable path.

Eagerly, TensorFlow runs each op as a one-op function: the first call of an
op signature builds and optimizes a function graph with one node per input
and output, which costs about 50 us per tensor, and more beyond a few
thousand (a 20,000-tensor `SaveV2` takes a second or more the first time,
and 30 ms once built). Ops with many tensors therefore run inside
`direct_kernels`, which makes TensorFlow build plain kernels for them.
"""

import contextlib
import functools
import threading

from tensorflow.core.framework import attr_value_pb2
from tensorflow.core.framework import tensor_shape_pb2
from tensorflow.python import pywrap_tfe
from tensorflow.python.eager import context
from tensorflow.python.eager import execute
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import ops
from tensorflow.python.ops import gen_resource_variable_ops
from tensorflow.python.ops import resource_variable_ops

from tf_objckpt.engine import thread_pools
from tf_objckpt.engine import tuning

_UNKNOWN_SHAPE = tensor_shape_pb2.TensorShapeProto(unknown_rank=True)
_FIRST_CPU = "/device:CPU:0"

# Runs `assign_variables` at a shallow stack.
_assign_pool = thread_pools.ThreadPool("tf_objckpt_assign", lambda: 1)
_direct_kernels_lock = threading.Lock()
_direct_kernels_users = 0


@contextlib.contextmanager
def direct_kernels(tensor_count):
  """Runs eager ops with `tensor_count` tensors on plain kernels.

  The setting belongs to the eager context, so while any caller is inside,
  every thread's new eager ops get plain kernels too; those compute the
  same values. The last caller to leave restores TensorFlow's setting.
  Outside eager execution, or for few tensors, does nothing.
  """
  if (tensor_count < tuning.TUNING.direct_kernels_min or
      not context.executing_eagerly()):
    yield
    return
  _count_direct_kernels_user(1)
  try:
    yield
  finally:
    _count_direct_kernels_user(-1)


def _count_direct_kernels_user(change):
  global _direct_kernels_users
  with _direct_kernels_lock:
    _direct_kernels_users += change
    if _direct_kernels_users == (1 if change > 0 else 0):
      eager_context = context.context()
      eager_context.ensure_initialized()
      pywrap_tfe.TFE_ContextSetRunEagerOpAsFunction(
          eager_context._handle,  # pylint: disable=protected-access
          change < 0 and context.run_eager_op_as_function_enabled())


def assign_variables(handles, values):
  """Assigns `values` to the variables of `handles`, eagerly.

  An eager op records the Python stack of its caller, at a cost that grows
  with the stack's depth (from about 5 us per assign at a shallow stack to
  12 us 25 frames down, where restores run). Runs of many assigns are
  therefore made on a thread of their own, whose stack is shallow, unless
  the caller's thread has op callbacks (TensorFlow keeps them per thread),
  which must see them.
  """
  if (len(handles) < tuning.TUNING.assign_thread_min or
      context.context().op_callbacks):
    _assign(handles, values)
  else:
    _assign_pool.submit(_assign_eagerly, handles, values).result()


def _assign(handles, values):
  for handle, value in zip(handles, values):
    gen_resource_variable_ops.assign_variable_op(handle, value)


def _assign_eagerly(handles, values):
  with context.eager_mode():
    _assign(handles, values)


def batch_key(variable, handle_node=None):
  """What the variables batched with `variable` share (a device), or None.

  None unless `variable` is a plain resource variable on a CPU, of the
  default graph (or eager), without colocation constraints of its own.

  Args:
    variable: A variable.
    handle_node: When graph building, the NodeDef of its handle op if the
      caller has read it already (reading one costs about 4 us).
  """
  if not resource_variable_ops.is_resource_variable(variable):
    return None
  if context.executing_eagerly():
    device = variable.device
    return device if "CPU" in device.upper() else None
  if ops.inside_function():
    return None
  handle_op = variable.handle.op
  if (handle_op.graph is not ops.get_default_graph() or
      handle_op.type != "VarHandleOp"):
    return None
  handle_node = handle_node or handle_op.node_def
  if _colocated_elsewhere(handle_node):
    return None
  device = handle_node.device
  if not device and not _has_accelerators():
    return _FIRST_CPU  # Where the placer puts it: batched with those there.
  return device if "CPU" in device.upper() else None


def _colocated_elsewhere(node):
  """Whether the op of `node` is colocated with ops other than itself."""
  if "_class" not in node.attr:  # Looking up a missing key would add it.
    return False
  groups = [
      group for group in node.attr["_class"].list.s
      if group.startswith(b"loc:@")
  ]
  return bool(groups) and groups != [b"loc:@" + node.name.encode()]


def worth_batching(count):
  """Whether `count` variables of one `batch_key` are worth batching."""
  return context.executing_eagerly() or count >= tuning.TUNING.graph_batch_min


def read_variables(variables):
  """The values of `variables`, all of one `batch_key`."""
  if context.executing_eagerly():
    with direct_kernels(len(variables)):
      return execute.execute(b"_ReadVariablesOp",
                             num_outputs=len(variables),
                             inputs=[variable.handle for variable in variables],
                             attrs=("N", len(variables), "dtypes",
                                    _dtype_enums(variables)),
                             ctx=context.context())
  values = []
  batch_size = tuning.TUNING.graph_batch_size
  for start in range(0, len(variables), batch_size):
    batch = variables[start:start + batch_size]
    with ops.colocate_with(batch[0].handle.op):
      values.extend(
          create_op("_ReadVariablesOp",
                    "ReadVariables",
                    variable_handles(batch),
                    [variable.dtype for variable in batch],
                    N=attr_value_pb2.AttrValue(i=len(batch)),
                    dtypes=list_attr(type=_dtype_enums(batch))).outputs)
  return values


def variable_handles(variables):
  """A `_VarHandlesOp`'s handles to `variables` (graph building)."""
  with ops.colocate_with(variables[0].handle.op):
    return create_op("_VarHandlesOp",
                     "VarHandles", [], [dtypes.resource] * len(variables),
                     N=attr_value_pb2.AttrValue(i=len(variables)),
                     **handle_attrs(variables)).outputs


def handle_attrs(variables, shapes=True, handle_nodes=None):
  """The attributes with which a `_VarHandlesOp` finds `variables`.

  Args:
    variables: Graph-mode resource variables.
    shapes: Whether the handles carry the variables' shapes (which reads
      give their values); if False, shapes of unknown rank, which cost
      TensorFlow less to process and are enough to assign.
    handle_nodes: The NodeDefs of their handle ops, if read already.
  """
  # One NodeDef read per op costs less than two `get_attr` calls.
  if handle_nodes is None:
    handle_nodes = [variable.handle.op.node_def for variable in variables]
  if shapes:
    handle_shapes = [node.attr["shape"].shape for node in handle_nodes]
  else:
    handle_shapes = [_UNKNOWN_SHAPE] * len(variables)
  return dict(containers=list_attr(
      s=[node.attr["container"].s for node in handle_nodes]),
              shared_names=list_attr(
                  s=[node.attr["shared_name"].s for node in handle_nodes]),
              dtypes=list_attr(type=_dtype_enums(variables)),
              shapes=list_attr(shape=handle_shapes))


def _dtype_enums(variables):
  return [variable.dtype.as_datatype_enum for variable in variables]


def create_op(op_type, name, inputs, output_types, **attrs):
  """Adds an op to the default graph, given its attributes as protos."""
  return ops.get_default_graph().create_op(op_type,
                                           inputs,
                                           output_types,
                                           name=name,
                                           attrs=attrs)


def list_attr(**values):
  """A list-valued `AttrValue`."""
  return attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue(
      **values))


@functools.lru_cache(maxsize=None)
def _has_accelerators():
  """Whether ops without a device may be placed off the CPU."""
  return any(device.device_type != "CPU"
             for device in context.context().list_logical_devices())
