"""Graph-mode restores of many plain variables through few ops.

Graph building, plain variables are restored in batches of about
`graph_restore_batch_bytes` (`tuning`), each by one call of a function that
finds them by name (`_VarHandlesOp`), reads their values (`RestoreV2`s
that run at once, one per read thread, as eager reads do) and assigns
them. Grappler, which runs on the first `Session.run` of a restore
and costs about 5 ms per optimizer pass per thousand edges, sees only the
calls and the path they read. A restore over the restore memory limit
(`restore_memory`) keeps at most `read_threads` batches running at once
(`ReadChain`), so that a session holds a few batches of values, not a
second copy of the model.
"""

import hashlib

from tensorflow.core.framework import attr_value_pb2
from tensorflow.core.framework import function_pb2
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import function
from tensorflow.python.framework import ops
from tensorflow.python.util import compat

from tf_objckpt.engine import read_lanes
from tf_objckpt.engine import reads
from tf_objckpt.engine import restore_memory
from tf_objckpt.engine import tuning
from tf_objckpt.engine import variable_batches


class ReadChain:
  """Graph building: at most `width` of a restore's reads run at once.

  Ops that a session can run at the same time all hold their values at the
  same time: a restore whose reads are independent holds the whole model
  twice, once in its variables and once read. Each read (a call of a
  restore function, or a `RestoreV2` and the ops that assign its values)
  is therefore made to wait, through control dependencies, for the read
  `width` places before it to finish. A chain of width None adds none.
  """

  def __init__(self, width, run_bytes=None):
    self._width = width
    self._run_bytes = tuning.TUNING.graph_restore_batch_bytes
    if run_bytes is not None:
      self._run_bytes = max(1, min(self._run_bytes, run_bytes))
    self._finished = []

  @classmethod
  def for_bytes(cls, total_bytes, options=None):
    """The chain of a restore reading about `total_bytes`.

    Restores whose values fit under the restore memory limit of `options`
    (`restore_memory`, decided when the ops are built) run every read at
    once; larger ones, `read_threads` reads at a time, each of at most
    about `graph_restore_batch_bytes` (and half the limit, see `runs`).
    """
    limit = restore_memory.restore_memory_limit(options)
    if restore_memory.fits(total_bytes, limit):
      return cls(None)
    return cls(max(1, tuning.TUNING.read_threads), limit // 2)

  def runs(self, sizes):
    """Slices of reads of `sizes` bytes, each to read with one op.

    All in one run for a chain that adds no dependencies; else runs of
    about `graph_restore_batch_bytes` (or half the limit, if less).
    """
    if self._width is None:
      return [slice(0, len(sizes))]
    return read_lanes.runs_of_bytes(sizes, self.run_bytes)

  @property
  def run_bytes(self):
    """About how many bytes one read of the chain holds at most."""
    return self._run_bytes

  def waits_for(self):
    """The ops the next read must wait for."""
    if self._width is None or len(self._finished) < self._width:
      return []
    return self._finished[-self._width]

  def add(self, finished_ops):
    """Records the next read, done once `finished_ops` have run."""
    self._finished.append([op for op in finished_ops if op is not None])


def restore_variables(file_prefix,
                      variables,
                      names,
                      slices,
                      handle_nodes,
                      chain=None):
  """Ops restoring `variables` (of one `batch_key`) from a checkpoint.

  Variables are restored in batches of about `graph_restore_batch_bytes`,
  each by one call of a function that finds them by name (`_VarHandlesOp`),
  reads their values (`RestoreV2`) and assigns them. Grappler, which runs
  on the first `Session.run` of a restore and costs about 5 ms per
  optimizer pass per thousand edges, sees only the calls and the path they
  read: handles, keys and values stay inside the calls.

  Args:
    file_prefix: The checkpoint path, a string tensor.
    variables: Resource variables.
    names: Their checkpoint keys.
    slices: Their `shape_and_slice` strings.
    handle_nodes: The NodeDefs of their handle ops.
    chain: The restore's `ReadChain` (None: calls run at once).

  Returns:
    The op restoring each variable (one per batch), in order.
  """
  chain = chain or ReadChain(None)
  sizes = [variable_bytes(v) for v in variables]
  restore_ops = []
  for batch in read_lanes.runs_of_bytes(sizes, chain.run_bytes):
    with ops.control_dependencies(chain.waits_for()):
      restore_op = _call_restore_function(file_prefix, variables[batch],
                                          names[batch], slices[batch],
                                          handle_nodes[batch], sizes[batch])
    chain.add([restore_op])
    restore_ops.extend([restore_op] * len(variables[batch]))
  return restore_ops


def variable_bytes(variable):
  """About how many bytes `variable` holds (0 if its shape is unknown)."""
  if not variable.shape.is_fully_defined():
    return 0
  return reads.byte_size(variable.shape.as_list(), variable.dtype.base_dtype)


def _call_restore_function(file_prefix, variables, names, slices, handle_nodes,
                           sizes):
  """One call of a function restoring `variables` (of about `sizes` bytes).

  The call names the function as its op, so the function runs on the
  device of its variables like any op, without the placement and
  partitioning that a `PartitionedCall` does when it first runs.
  """
  graph = ops.get_default_graph()
  definition = _restore_function(
      variable_batches.handle_attrs(variables,
                                    shapes=False,
                                    handle_nodes=handle_nodes), names, slices,
      read_lanes.lanes(sizes))
  function_name = definition.signature.name
  if not graph._is_function(function_name):  # pylint: disable=protected-access
    library = function_pb2.FunctionDefLibrary(function=[definition])
    for defined_function in function.from_library(library):
      defined_function.add_to_graph(graph)
  with ops.colocate_with(variables[0].handle.op):
    return variable_batches.create_op(
        function_name,
        "RestoreVariables", [file_prefix], [],
        _disable_call_shape_inference=attr_value_pb2.AttrValue(b=True))


def _restore_function(handle_attrs, names, slices, lanes):
  """The FunctionDef restoring the variables `handle_attrs` finds.

  Its one input is the checkpoint path; the keys and slices it reads are
  constants of its body, read by one `RestoreV2` per lane (lists of
  indices, `read_lanes.lanes`), which the session runs at once; no value
  is assigned before every lane has read (a damaged value anywhere assigns
  nothing). It finds the variables by container and shared name, on the
  device it runs on (its caller is colocated with them).
  `_noinline` keeps Grappler from copying its body into the graph, and
  `_tf_data_function` from optimizing it with the graph (there is nothing
  in it to optimize). Named after its content, so that the same name in any
  graph (one imported from another program's meta graph, say) means the
  same function.
  """
  definition = function_pb2.FunctionDef()
  signature = definition.signature
  signature.is_stateful = True
  signature.input_arg.add(name="prefix", type=dtypes.string.as_datatype_enum)
  definition.attr["_noinline"].b = True
  definition.attr["_tf_data_function"].b = True
  dtype_enums = handle_attrs["dtypes"].list.type
  count = len(dtype_enums)
  reads = [f"values{lane_number}" for lane_number in range(len(lanes))]
  for read, lane in zip(reads, lanes):
    _add_restore_v2(definition, read, [names[i] for i in lane],
                    [slices[i] for i in lane], [dtype_enums[i] for i in lane])
  # All or nothing: every assign needs a handle, and the handles wait for
  # every read (two edges, where a wait of each assign would be thousands).
  handles = definition.node_def.add(
      name="handles",
      op="_VarHandlesOp",
      input=[f"^{read}" for read in reads] if len(reads) > 1 else [])
  handles.attr["N"].i = count
  for attr, value in handle_attrs.items():
    handles.attr[attr].CopyFrom(value)
  for read, lane in zip(reads, lanes):
    for position, index in enumerate(lane):
      assign = definition.node_def.add(
          name=f"assign{index}",
          op="AssignVariableOp",
          input=[f"handles:resources:{index}", f"{read}:tensors:{position}"])
      assign.attr["dtype"].type = dtype_enums[index]
  digest = hashlib.sha256(
      definition.SerializeToString(deterministic=True)).hexdigest()[:16]
  signature.name = f"tf_objckpt_restore_variables_{count}_{digest}"
  return definition


def _add_restore_v2(definition, name, keys, slices, dtype_enums):
  """Adds to `definition` a `RestoreV2` named `name` and its constants."""
  for suffix, strings in (("names", keys), ("slices", slices)):
    constant = definition.node_def.add(name=f"{name}_{suffix}", op="Const")
    constant.attr["dtype"].type = dtypes.string.as_datatype_enum
    value = constant.attr["value"].tensor
    value.dtype = dtypes.string.as_datatype_enum
    value.tensor_shape.dim.add(size=len(strings))
    value.string_val.extend(compat.as_bytes(string) for string in strings)
  values = definition.node_def.add(
      name=name,
      op="RestoreV2",
      input=["prefix", f"{name}_names:output:0", f"{name}_slices:output:0"])
  values.attr["dtypes"].list.type.extend(dtype_enums)
