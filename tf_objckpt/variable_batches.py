"""Reads and assigns many resource variables with few ops.

Checkpointing touches every variable, and one op per variable is what makes
it slow. Eagerly, each op costs a dispatch. When graph building, each
tensor costs Grappler, which optimizes the subgraph of every new
`Session.run` fetch, about 10 us per optimizer; an op costs more. So:

- eagerly, the variables of a device are read by one `_ReadVariablesOp`;
- graph building, a save reads variables in batches of at most
  `GRAPH_BATCH_SIZE`: a `_VarHandlesOp` makes their handles (it looks them
  up by container and shared name, so it reaches the variables of the
  session), then one `_ReadVariablesOp` reads them;
- graph building, a restore reads and assigns batches of at most
  `GRAPH_RESTORE_BATCH_SIZE` variables with one call each of a function
  that Grappler does not look into (`restore_variables`).

Only plain resource variables on a CPU are batched (`batch_key`); others
take the per-variable path.
"""

import functools
import hashlib

from tensorflow.core.framework import attr_value_pb2
from tensorflow.core.framework import function_pb2
from tensorflow.core.protobuf import config_pb2
from tensorflow.core.protobuf import rewriter_config_pb2
from tensorflow.python.eager import context
from tensorflow.python.eager import execute
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import function
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor_util
from tensorflow.python.ops import resource_variable_ops

GRAPH_BATCH_SIZE = 64
GRAPH_RESTORE_BATCH_SIZE = 256
# Fewer variables than this are not worth batched ops when graph building:
# they would add ops where each variable's own handle and read exist.
_GRAPH_BATCH_MIN = 16
_RESTORE_FUNCTION_ATTRS = (
    ("dtypes", "list(type)"), ("containers", "list(string)"),
    ("shared_names", "list(string)"), ("shapes", "list(shape)"),
    ("names", "tensor"), ("slices", "tensor"))
_NO_GRAPPLER_CONFIG = config_pb2.ConfigProto(
    graph_options=config_pb2.GraphOptions(
        rewrite_options=rewriter_config_pb2.RewriterConfig(
            disable_meta_optimizer=True))).SerializeToString()


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
  if ops.inside_function():
    return None
  handle_op = variable.handle.op
  if (handle_op.graph is not ops.get_default_graph() or
      handle_op.type != "VarHandleOp" or _colocated_elsewhere(handle_op)):
    return None
  device = handle_op.device
  if "CPU" in device.upper() or (not device and not _has_accelerators()):
    return device
  return None


def _colocated_elsewhere(op):
  """Whether `op` has colocation constraints other than with itself."""
  groups = [group for group in op.node_def.attr["_class"].list.s
            if group.startswith(b"loc:@")]
  return bool(groups) and groups != [b"loc:@" + op.name.encode()]


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


def restore_variables(file_prefix, variables, names, slices):
  """Ops restoring `variables` (of one `batch_key`) from a checkpoint.

  Each batch of `GRAPH_RESTORE_BATCH_SIZE` variables is restored by one call
  of a function that reads their values (`RestoreV2`) and assigns them
  through their handles. The per-variable parts (keys, handle names,
  shapes, dtypes) are attributes of the call, so one function serves every
  batch of a size and Grappler, which skips such functions, never sees the
  variables' tensors: it costs the session's first run of a restore about
  10 us per tensor and optimizer. The function runs without Grappler; there
  is nothing in it to optimize.

  Args:
    file_prefix: The checkpoint path, a string tensor.
    variables: Resource variables.
    names: Their checkpoint keys.
    slices: Their `shape_and_slice` strings.

  Returns:
    The op restoring each variable (one per batch).
  """
  restore_ops = []
  for start in range(0, len(variables), GRAPH_RESTORE_BATCH_SIZE):
    end = start + GRAPH_RESTORE_BATCH_SIZE
    batch = variables[start:end]
    function_name = _add_restore_function(ops.get_default_graph(),
                                          len(batch))
    call = attr_value_pb2.NameAttrList(
        name=function_name, attr=_handle_attrs(batch))
    for index, variable in enumerate(batch):
      call.attr[f"T{index}"].type = variable.dtype.as_datatype_enum
    call.attr["names"].tensor.CopyFrom(
        tensor_util.make_tensor_proto(names[start:end], dtypes.string))
    call.attr["slices"].tensor.CopyFrom(
        tensor_util.make_tensor_proto(slices[start:end], dtypes.string))
    with ops.colocate_with(batch[0].handle.op):
      restore_op = _create_op(
          "StatefulPartitionedCall", "RestoreVariables", [file_prefix], [],
          Tin=_list_attr(type=[dtypes.string.as_datatype_enum]),
          Tout=_list_attr(type=[]),
          f=attr_value_pb2.AttrValue(func=call),
          config_proto=attr_value_pb2.AttrValue(s=_NO_GRAPPLER_CONFIG),
          executor_type=attr_value_pb2.AttrValue(s=b""))
    restore_ops.extend([restore_op] * len(batch))
  return restore_ops


def _add_restore_function(graph, count):
  """Adds the restore function for batches of `count` to `graph`."""
  definition = _restore_function(count)
  name = definition.signature.name
  if not graph._is_function(name):  # pylint: disable=protected-access
    library = function_pb2.FunctionDefLibrary(function=[definition])
    for defined_function in function.from_library(library):
      defined_function.add_to_graph(graph)
  return name


@functools.lru_cache(maxsize=None)
def _restore_function(count):
  """The FunctionDef restoring `count` variables, named after its content.

  Its attributes, set by each call: `dtypes` and `T0`... (the variables'
  dtypes, as a list and one by one), `containers`, `shared_names` and
  `shapes` (find the variables, as `_VarHandlesOp` does), `names` and
  `slices` (what `RestoreV2` reads). `_noinline` and `_nospecialize` keep
  Grappler from copying its body into the graph or into a function per
  call.
  """
  definition = function_pb2.FunctionDef()
  signature = definition.signature
  signature.is_stateful = True
  signature.input_arg.add(name="prefix", type=dtypes.string.as_datatype_enum)
  for name, attr_type in _RESTORE_FUNCTION_ATTRS:
    signature.attr.add(name=name, type=attr_type)
  for index in range(count):
    signature.attr.add(name=f"T{index}", type="type")
  definition.attr["_noinline"].b = True
  definition.attr["_nospecialize"].b = True
  for name in ("names", "slices"):
    node = definition.node_def.add(name=name, op="Const")
    node.attr["dtype"].type = dtypes.string.as_datatype_enum
    node.attr["value"].placeholder = name
  handles = definition.node_def.add(name="handles", op="_VarHandlesOp")
  handles.attr["N"].i = count
  for name in ("dtypes", "containers", "shared_names", "shapes"):
    handles.attr[name].placeholder = name
  values = definition.node_def.add(
      name="values", op="RestoreV2",
      input=["prefix", "names:output:0", "slices:output:0"])
  values.attr["dtypes"].placeholder = "dtypes"
  for index in range(count):
    assign = definition.node_def.add(
        name=f"assign{index}", op="AssignVariableOp",
        input=[f"handles:resources:{index}", f"values:tensors:{index}"])
    assign.attr["dtype"].placeholder = f"T{index}"
  digest = hashlib.sha256(
      definition.SerializeToString(deterministic=True)).hexdigest()[:16]
  signature.name = f"tf_objckpt_restore_variables_{count}_{digest}"
  return definition


def _handles(variables):
  """A `_VarHandlesOp`'s handles to `variables` (graph building)."""
  with ops.colocate_with(variables[0].handle.op):
    return _create_op(
        "_VarHandlesOp", "VarHandles", [], [dtypes.resource] * len(variables),
        N=attr_value_pb2.AttrValue(i=len(variables)),
        **_handle_attrs(variables)).outputs


def _handle_attrs(variables):
  """The attributes with which a `_VarHandlesOp` finds `variables`."""
  # One NodeDef read per op costs less than two `get_attr` calls.
  node_defs = [variable.handle.op.node_def for variable in variables]
  return dict(
      containers=_list_attr(s=[node.attr["container"].s
                               for node in node_defs]),
      shared_names=_list_attr(s=[node.attr["shared_name"].s
                                 for node in node_defs]),
      dtypes=_list_attr(type=_dtype_enums(variables)),
      shapes=_list_attr(shape=[variable.shape.as_proto()
                               for variable in variables]))


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
