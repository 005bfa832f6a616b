"""Read plans: every value one restore step reads, and what receives it.

A `ReadPlan` is what one restore step (an immediate restore, a batch of
restore-on-create, a name-based restore, a v1 `Saver` restore) reads: a
list of destinations, each with the `reads.Read`s it receives (key, slice, dtype,
expected shape). Its builders are above the engine (`restoring.restore_plan`,
`v1.saver_builders`); here it is checked against the checkpoint
(`check`, once per step, before anything is assigned) and executed eagerly
(`execute_eagerly`); `multi_device_saver.execute_plan` executes it when graph
building. The engine chooses how to restore each destination: plain
variables (`Destination.plain_variable`) are assigned directly eagerly and
restored in batches when graph building; other destinations get their
values through their saveables.

`check` reports problems in one style on every path, naming the
checkpoint, each key with its object path, and both dtypes or shapes.
"""

import itertools
import math

from tensorflow.core.framework import types_pb2
from tensorflow.python.eager import context
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import errors
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor_shape
from tensorflow.python.ops import gen_resource_variable_ops
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.util import compat

from tf_objckpt.engine import reads
from tf_objckpt.engine import remote_tasks
from tf_objckpt.engine import tuning
from tf_objckpt.engine import variable_batches
from tf_objckpt.engine import variable_values
from tf_objckpt.foundation import checkpoint_keys as trackable_utils

# At most this many keys are spelled out in one error message.
_MAX_NAMES_IN_MESSAGE = 100


def plan_read(key, slice_spec, dtype, shape, reshape=False):
  """The `reads.Read` of one value (it reads nothing).

  Args:
    key: The checkpoint key.
    slice_spec: Its `shape_and_slice` string; a slice is checked against
      the full shape it names.
    dtype: The dtype the restore expects (None for any).
    shape: The shape assigned to (a `TensorShape`, a list, or None for any).
    reshape: Whether the value is reshaped to `shape` (only its number of
      elements must match).

  Returns:
    A `reads.Read`.
  """
  key = compat.as_str(key)
  if dtype is not None:
    if not isinstance(dtype, dtypes.DType):
      dtype = dtypes.as_dtype(dtype)
    dtype = dtype.base_dtype
  if slice_spec:
    # "<full shape dims> <slice>": the key holds the full tensor.
    slice_spec = compat.as_str(slice_spec)
    full_shape = slice_spec.split()[:-1]
    return reads.Read(key, slice_spec, dtype,
                      tuple(int(dim) for dim in full_shape),
                      reads.ShapeMatch.FULL_SHAPE)
  if shape is not None:
    if not isinstance(shape, tensor_shape.TensorShape):
      shape = tensor_shape.TensorShape(shape)
    if shape.rank is None or (reshape and not shape.is_fully_defined()):
      shape = None
    else:
      shape = tuple(shape.as_list())
  shape_match = (reads.ShapeMatch.SAME_SIZE if reshape and shape is not None
                 else reads.ShapeMatch.SAME_SHAPE)
  return reads.Read(key, "", dtype, shape, shape_match)


def whole_variable_read(key, variable):
  """The `reads.Read` of a resource variable's whole value, made quickly.

  What `plan_read(key, "", variable.dtype, variable.shape)` gives, for a `key`
  that is a `str` (as object graphs give them) and a variable, whose dtype
  is a base dtype: made for every plain variable of a restore.
  """
  try:
    dims = tuple(variable.shape.as_list())
  except ValueError:  # Unknown rank.
    dims = None
  return reads.Read(key, "", variable.dtype, dims)


class Destination:
  """What receives the values of some `Read`s, in order.

  Attributes:
    name: Names the destination's restore op (graph mode; restore ops are
      cached by it).
    reads: The `reads.Read`s whose values it receives.
  """

  __slots__ = ("name", "reads")
  python_state = False  # Whether it takes numpy values, handed over last.

  def __init__(self, name, reads):
    self.name = name
    self.reads = tuple(reads)

  @property
  def plain_variable(self):
    """The variable to restore by the engine's batched reads, or None."""
    return None

  @property
  def device(self):
    raise NotImplementedError

  def restore(self, values):
    """Hands over `values`; returns a restore op (graph mode) or None."""
    raise NotImplementedError


class ToVariable(Destination):
  """A stock resource variable whose whole value is assigned directly."""

  __slots__ = ("variable",)

  def __init__(self, name, key, variable):  # pylint: disable=super-init-not-called
    # Made for each plain variable of a restore: kept short.
    self.name = name
    self.reads = (whole_variable_read(key, variable),)
    self.variable = variable

  @property
  def plain_variable(self):
    return self.variable

  @property
  def device(self):
    return self.variable.device

  def restore(self, values):
    """Assigns the value as read (already checked by the plan)."""
    if context.executing_eagerly():
      return gen_resource_variable_ops.assign_variable_op(
          self.variable.handle, values[0])
    with ops.device(self.variable.device):
      return gen_resource_variable_ops.assign_variable_op(
          self.variable.handle, values[0])


class ToSaveable(Destination):
  """A `SaveableObject`, which restores its specs' values itself."""

  __slots__ = ("saveable",)

  def __init__(self, saveable, shape=None, reshape=False):
    """Reads `saveable`'s specs.

    Args:
      saveable: A `SaveableObject`.
      shape: The shape each value must have, if any.
      reshape: Whether values are reshaped to `shape` (v1 `Saver`s built
        with `reshape=True`): only their numbers of elements must match.
    """
    super().__init__(
        saveable.name,
        (plan_read(spec.name, spec.slice_spec, spec.dtype, shape, reshape)
         for spec in saveable.specs))
    self.saveable = saveable

  @property
  def plain_variable(self):
    if variable_values.is_plain_variable(self.saveable):
      return self.saveable.op
    return None

  @property
  def device(self):
    return self.saveable.device

  def restore(self, values):
    return self.saveable.restore(values, None)


class ToPythonState(Destination):
  """A `PythonStateSaveable`: numpy values, of any dtype and shape."""

  __slots__ = ("saveable",)
  python_state = True

  def __init__(self, saveable):
    super().__init__(
        saveable.name,
        (plan_read(spec.name, "", None, None) for spec in saveable.specs))
    self.saveable = saveable

  def restore(self, values):
    self.saveable.python_restore(values)


class ToCallback(Destination):
  """A function taking the values (a tool assigning Keras variables, say)."""

  __slots__ = ("_restore",)

  def __init__(self, name, reads, restore):
    super().__init__(name, reads)
    self._restore = restore

  def restore(self, values):
    return self._restore(values)


class ToInitialValue(Destination):
  """The initial value of a variable being created (restore-on-create).

  The variable's initializer reads it (`CheckpointValues.read_one`, with
  the values read ahead for other variables awaited).
  """

  __slots__ = ()

  def __init__(self, value):
    super().__init__(value.key, (value,))


class ToRestoreOp(Destination):
  """Values a restore op already in the graph reads (graph mode).

  Such an op reads whichever checkpoint is fed, so its reads are checked
  like new ones; executing the plan builds nothing for it.
  """

  __slots__ = ("op",)

  def __init__(self, name, reads, op):
    super().__init__(name, reads)
    self.op = op


class ReadPlan:
  """The destinations of one restore step and their reads.

  Checking a plan that fits compares whole lists (keys, dtypes, shapes)
  rather than looping over the reads in Python; only a plan that does
  not fit is examined read by read to explain why. Plans are equal when
  they read the same values.
  """

  def __init__(self, destinations):
    self.destinations = tuple(destinations)
    self.reads = tuple(
        itertools.chain.from_iterable(
            destination.reads for destination in self.destinations))
    self.keys = frozenset([value.key for value in self.reads])

  def __eq__(self, other):
    return isinstance(other, ReadPlan) and self.reads == other.reads

  def __hash__(self):
    return hash(self.reads)

  def fits(self, stored_dtypes, stored_shapes):
    """Whether every dtype and shape agrees exactly with the checkpoint."""
    exact = [
        value for value in self.reads if value.shape is not None and
        value.shape_match is not reads.ShapeMatch.SAME_SIZE
    ]
    return ([
        stored_dtypes[value.key] if value.dtype is not None else None
        for value in self.reads
    ] == [value.dtype for value in self.reads] and
            list(map(stored_shapes.__getitem__, [value.key for value in exact]))
            == [list(value.shape) for value in exact] and all(
                math.prod(stored_shapes[value.key]) == math.prod(value.shape)
                for value in self.reads
                if value.shape is not None and
                value.shape_match is reads.ShapeMatch.SAME_SIZE))


def check(plan,
          values,
          shape_error=errors.InvalidArgumentError,
          dtype_error=errors.InvalidArgumentError,
          list_unexpected=False,
          assign_words=False):
  """Raises unless every read of `plan` can be served by the checkpoint.

  Args:
    plan: A `ReadPlan`.
    values: The checkpoint (`reads.CheckpointValues`: its path, dtypes and
      shapes).
    shape_error: The error type when only variables' shapes differ (a
      reshape or a slice that does not fit is an `InvalidArgumentError`).
    dtype_error: The error type when only dtypes differ (any mix of
      problems: `InvalidArgumentError`).
    list_unexpected: Name the checkpoint's keys the plan does not read when
      keys are missing.
    assign_words: Follow each variable's shape mismatch with the words of
      TensorFlow's Assign kernel ("Assign requires shapes of both tensors to
      match. lhs shape= [3,2] rhs shape= [2,3]"), which code catching the
      errors of a v1 `Saver`'s graph-mode restore searches for.

  Raises:
    NotFoundError: If keys are missing.
    The error types above: If dtypes or shapes differ; one message lists
      every mismatch.
  """
  if not plan.reads:
    return
  save_path = compat.as_str(values.save_path)
  stored_dtypes, stored_shapes = values.dtypes, values.shapes
  missing = plan.keys.difference(stored_shapes)
  if missing:
    _raise_missing(save_path, plan, missing, stored_shapes, list_unexpected)
  if plan.fits(stored_dtypes, stored_shapes):
    return
  dtype_problems, shape_problems, other_problems = [], [], []
  for value in plan.reads:
    if value.dtype is not None and stored_dtypes[value.key] != value.dtype:
      dtype_problems.append(_dtype_problem(value, stored_dtypes))
      continue
    problem = _shape_problem(value, stored_shapes[value.key], assign_words)
    if problem and value.shape_match is reads.ShapeMatch.SAME_SHAPE:
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
  _raise(
      error_type, f"Cannot restore from checkpoint {save_path!r}; nothing was "
      f"restored. {len(problems)} value(s) do not fit:\n  " +
      "\n  ".join(problems))


def execute_eagerly(plan, values):
  """Restores a checked `plan` from `values` (a `reads.CheckpointValues`).

  Tensors are read and handed over in pieces (`restore_in_pieces`); Python
  state is read first and handed over last, once every tensor is read, so
  a damaged value leaves it as it was too.
  """
  hand_over_python_state = read_python_state(plan, values)
  with remote_tasks.completed_on(_devices(plan.destinations),
                                 "the restore's assigns"):
    values.restore_in_pieces(_eager_units(plan.destinations, values))
  hand_over_python_state()


def restore_variable_eagerly(destination, values, check_plan):
  """Checks and restores one `ToVariable` by itself, eagerly.

  What `check_plan(ReadPlan([destination]))` and `execute_eagerly` do, for
  variables created one by one after a restore: a value whose dtype and
  shape agree exactly with the checkpoint's is read (most often read
  ahead) and assigned; any other goes through `check_plan`, which raises
  unless it fits.
  """
  value, = destination.reads
  if (values.dtypes.get(value.key) is not value.dtype or value.shape is None or
      list(value.shape) != values.shapes[value.key]):
    check_plan(ReadPlan([destination]))
  handle = destination.variable.handle
  with remote_tasks.completed_on(_devices([destination]),
                                 "the restore's assign"):
    device, = _read_devices([destination])
    values.restore_in_pieces([
        reads.RestoreUnit(
            destination.reads,
            lambda tensors: gen_resource_variable_ops.assign_variable_op(
                handle, tensors[0]), device)
    ])


def _devices(destinations):
  """The device of each destination, or None for those that do not say.

  A generator: `remote_tasks` reads it only in a cluster.
  """
  for destination in destinations:
    if isinstance(destination,
                  ToVariable) or (isinstance(destination, ToSaveable) and
                                  destination.saveable.specs):
      yield destination.device
    else:
      yield None


def _read_devices(destinations):
  """Where to read each destination's values: another task's CPU, or None.

  In a cluster, a destination on another task has its values read there,
  as TensorFlow does, so that their bytes do not cross the network.
  """
  if not remote_tasks.connected():
    return [None] * len(destinations)
  return remote_tasks.remote_cpus(_devices(destinations))


def _eager_units(destinations, values):
  """The `RestoreUnit`s of `restore_in_pieces` for `destinations`.

  Plain variables next to each other, read on one device, share a unit (a
  run of a fraction of a piece of `values`, see `tuning`), which assigns
  them in one loop: what is left per variable is its assign op. Python
  state is left out.
  """
  units = []
  run_reads, run_handles, run_bytes, run_device = [], [], 0, None
  byte_sizes = values.byte_sizes
  limit = values.piece_bytes / tuning.TUNING.assign_runs_per_piece
  for destination, device in zip(destinations, _read_devices(destinations)):
    if type(destination) is not ToVariable:  # pylint: disable=unidiomatic-typecheck
      if not destination.python_state:
        units.append(
            reads.RestoreUnit(destination.reads, destination.restore, device))
      continue
    value, = destination.reads
    size = byte_sizes[value.key]
    if run_reads and (run_bytes + size > limit or device != run_device):
      units.append(_assign_run(run_reads, run_handles, run_device))
      run_reads, run_handles, run_bytes = [], [], 0
    run_reads.append(value)
    run_handles.append(destination.variable.handle)
    run_bytes += size
    run_device = device
  if run_reads:
    units.append(_assign_run(run_reads, run_handles, run_device))
  return units


def _assign_run(run_reads, handles, device):
  """The unit assigning each value read (on `device`) to its variable."""

  def assign_all(tensors):
    variable_batches.assign_variables(handles, tensors)

  return reads.RestoreUnit(run_reads, assign_all, device)


def read_python_state(plan, values):
  """Reads the values of `plan`'s Python state now.

  Returns:
    A function handing them over, called once the tensors are restored
    (or their restore ops built).
  """
  python = [
      destination for destination in plan.destinations
      if destination.python_state
  ]
  if not python:
    return _nothing_to_hand_over
  numpy_values = [[
      values.python_value(value.key) for value in destination.reads
  ] for destination in python]

  def hand_over():
    for destination, restored in zip(python, numpy_values):
      destination.restore(restored)

  return hand_over


def _nothing_to_hand_over():
  pass


def describe_key(key):
  """Names a checkpoint key and the object it belongs to."""
  return f"checkpoint key {_key_and_object(key)}"


def _key_and_object(key):
  path = trackable_utils.object_path_of_key(key)
  if path == key:
    return repr(key)
  return f"{key!r} (object {path!r})"


def _dtype_problem(value, stored_dtypes):
  """TensorFlow's phrase (RestoreV2's), then the dtypes by their Python names."""
  stored = stored_dtypes[value.key]
  return (f"{describe_key(value.key)}: expected dtype "
          f"{_kernel_dtype_name(value.dtype)} does not equal original "
          f"dtype {_kernel_dtype_name(stored)}; the checkpoint holds dtype "
          f"{stored.name} but {value.dtype.name} is expected")


def _kernel_dtype_name(dtype):
  """A dtype as TensorFlow's kernels name it in errors ("float", "double")."""
  enum_name = types_pb2.DataType.Name(dtype.as_datatype_enum)
  return enum_name[len("DT_"):].lower()


def _shape_problem(value, stored, assign_words=False):
  """Why a stored shape does not fit `value`, or None if it does.

  With `assign_words`, a variable's mismatch ends in the words of
  TensorFlow's Assign kernel.
  """
  expected = value.shape
  if expected is None:
    return None
  if value.shape_match is reads.ShapeMatch.SAME_SIZE:
    if math.prod(stored) == math.prod(expected):
      return None
    return (f"{describe_key(value.key)}: cannot reshape the "
            f"checkpoint's shape {tuple(stored)} ({math.prod(stored)} "
            f"elements) to {expected} ({math.prod(expected)} elements)")
  if len(stored) == len(expected) and all(
      dim is None or dim == saved for dim, saved in zip(expected, stored)):
    return None
  what = ("partitioned variable with full shape" if value.shape_match
          is reads.ShapeMatch.FULL_SHAPE else "variable with shape")
  problem = (f"{describe_key(value.key)}: received incompatible tensor "
             f"with shape {tuple(stored)} when attempting to restore "
             f"{what} {_shape_text(expected)}")
  if assign_words and value.shape_match is reads.ShapeMatch.SAME_SHAPE:
    problem += (" (Assign requires shapes of both tensors to match. lhs "
                f"shape= {_kernel_shape(expected)} rhs shape= "
                f"{_kernel_shape(stored)})")
  return problem


def _kernel_shape(dims):
  """A shape as TensorFlow's kernels write it: "[3,2]"."""
  return "[" + ",".join("?" if dim is None else str(dim) for dim in dims) + "]"


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
  text = ", ".join(_key_and_object(key) for key in keys[:_MAX_NAMES_IN_MESSAGE])
  if len(keys) > _MAX_NAMES_IN_MESSAGE:
    text += f", ... ({len(keys) - _MAX_NAMES_IN_MESSAGE} more)"
  return text or "(none)"


def _raise(error_type, message):
  if issubclass(error_type, errors.OpError):
    raise error_type(None, None, message)
  raise error_type(message)
