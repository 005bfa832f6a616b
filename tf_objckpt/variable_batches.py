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
  `GRAPH_RESTORE_BATCH_SIZE` variables, given their handles, with one
  call each of a function (`restore_variables`).

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
from tensorflow.python.framework import constant_op
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import function
from tensorflow.python.framework import ops
from tensorflow.python.ops import array_ops
from tensorflow.python.ops import resource_variable_ops

GRAPH_BATCH_SIZE = 64
GRAPH_RESTORE_BATCH_SIZE = 256
# Fewer variables than this are not worth batched ops when graph building:
# they would add ops where each variable's own handle and read exist.
_GRAPH_BATCH_MIN = 16
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

  Variables of a dtype are restored in batches of up to
  `GRAPH_RESTORE_BATCH_SIZE`, each by one call of a function that reads
  their values (`RestoreV2`) and assigns them through the handles it is
  given. The keys to read are inputs too, so one function serves every
  batch of a dtype and size. Grappler, which costs the first `Session.run`
  of a restore about 10 us per tensor and optimizer, sees only the
  handles: the values stay inside the call, whose body runs without
  Grappler (there is nothing in it to optimize).

  Args:
    file_prefix: The checkpoint path, a string tensor.
    variables: Resource variables.
    names: Their checkpoint keys.
    slices: Their `shape_and_slice` strings.

  Returns:
    The op restoring each variable (one per batch), in order.
  """
  indices_by_dtype = {}
  for index, variable in enumerate(variables):
    indices_by_dtype.setdefault(variable.dtype.base_dtype, []).append(index)
  restore_ops = [None] * len(variables)
  for dtype, indices in indices_by_dtype.items():
    for start in range(0, len(indices), GRAPH_RESTORE_BATCH_SIZE):
      batch = indices[start:start + GRAPH_RESTORE_BATCH_SIZE]
      restore_op = _call_restore_function(
          file_prefix, dtype, [variables[index] for index in batch],
          [names[index] for index in batch],
          [slices[index] for index in batch])
      for index in batch:
        restore_ops[index] = restore_op
  return restore_ops


def _call_restore_function(file_prefix, dtype, variables, names, slices):
  """One call of the restore function for `variables`, all of `dtype`."""
  graph = ops.get_default_graph()
  definition = _restore_function(dtype.as_datatype_enum, len(variables))
  function_name = definition.signature.name
  if not graph._is_function(function_name):  # pylint: disable=protected-access
    library = function_pb2.FunctionDefLibrary(function=[definition])
    for defined_function in function.from_library(library):
      defined_function.add_to_graph(graph)
  with ops.colocate_with(variables[0].handle.op):
    inputs = [file_prefix, _feedable_strings(names, "names"),
              _feedable_strings(slices, "slices")]
    inputs.extend(_handles(variables))
    return _create_op(
        "StatefulPartitionedCall", "RestoreVariables", inputs, [],
        Tin=_list_attr(type=[tensor.dtype.as_datatype_enum
                             for tensor in inputs]),
        Tout=_list_attr(type=[]),
        f=attr_value_pb2.AttrValue(
            func=attr_value_pb2.NameAttrList(name=function_name)),
        config_proto=attr_value_pb2.AttrValue(s=_NO_GRAPPLER_CONFIG),
        executor_type=attr_value_pb2.AttrValue(s=b""))


def _feedable_strings(values, name):
  """A string tensor of `values` that Grappler does not take for a constant.

  Were it a constant, Grappler would copy the restore function into a new
  one, specialized to it, for every call.
  """
  return array_ops.placeholder_with_default(
      constant_op.constant(values, dtypes.string), [len(values)], name=name)


@functools.lru_cache(maxsize=None)
def _restore_function(dtype_enum, count):
  """The FunctionDef restoring `count` variables of `dtype_enum`.

  Its inputs are the checkpoint path, the keys and slices to read and the
  variables' handles. `_noinline` keeps Grappler from copying its body into
  the graph, and `_tf_data_function` from optimizing it with the graph:
  Grappler leaves such functions to be optimized when instantiated, and
  this one is instantiated without Grappler. Named after its content, so
  that the same name in any graph (one imported from another program's
  meta graph, say) means the same function.
  """
  definition = function_pb2.FunctionDef()
  signature = definition.signature
  signature.is_stateful = True
  for name in ("prefix", "names", "slices"):
    signature.input_arg.add(name=name, type=dtypes.string.as_datatype_enum)
  for index in range(count):
    signature.input_arg.add(name=f"handle{index}",
                            type=dtypes.resource.as_datatype_enum)
  definition.attr["_noinline"].b = True
  definition.attr["_tf_data_function"].b = True
  values = definition.node_def.add(
      name="values", op="RestoreV2", input=["prefix", "names", "slices"])
  values.attr["dtypes"].CopyFrom(_list_attr(type=[dtype_enum] * count))
  for index in range(count):
    assign = definition.node_def.add(
        name=f"assign{index}", op="AssignVariableOp",
        input=[f"handle{index}", f"values:tensors:{index}"])
    assign.attr["dtype"].type = dtype_enum
  digest = hashlib.sha256(
      definition.SerializeToString(deterministic=True)).hexdigest()[:16]
  signature.name = (f"tf_objckpt_restore_variables_"
                    f"{dtypes.as_dtype(dtype_enum).name}_{count}_{digest}")
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
