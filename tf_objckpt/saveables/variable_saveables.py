"""The saveables of variables: how each kind of variable is read and assigned.

A reference variable (`VariableV2`) and a resource variable, or a read of
one, as the v1 `Saver` saves them (`ReferenceVariableSaveable`,
`ResourceVariableSaveable`: whole, or one slice of a partitioned variable),
and a plain resource variable in an object-based checkpoint
(`VariableSaveable`, built directly for speed). A restore assigns only a
value whose shape fits (`assign_checked`), naming the key when not.
"""

import functools

from tensorflow.python.eager import context
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor as tensor_lib
from tensorflow.python.ops import array_ops
from tensorflow.python.ops import gen_resource_variable_ops
from tensorflow.python.ops import resource_variable_ops
from tensorflow.python.ops import state_ops

from tf_objckpt.engine import saveable_objects
from tf_objckpt.engine import variable_values
from tf_objckpt.foundation import checkpoint_keys as trackable_utils
from tf_objckpt.foundation import module_names

_VARIABLE_VALUE_KEY = trackable_utils.VARIABLE_VALUE_KEY


class ReferenceVariableSaveable(saveable_objects.SaveableObject):
  """Saves and restores a TF1 reference variable (`VariableV2`)."""

  def __init__(self, var, slice_spec, name):
    spec = saveable_objects.SaveSpec(var, slice_spec, name, dtype=var.dtype)
    super().__init__(var, [spec], name)

  def restore(self, restored_tensors, restored_shapes=None):
    value = restored_tensors[0]
    if restored_shapes is not None:
      value = array_ops.reshape(value, restored_shapes[0])
    return state_ops.assign(
        self.op,
        value,
        validate_shape=(restored_shapes is None and
                        self.op.get_shape().is_fully_defined()))


class ResourceVariableSaveable(saveable_objects.SaveableObject):
  """Saves and restores a resource variable, or a read of one (graph mode)."""

  def __init__(self, var, slice_spec, name):
    self._var_device = var.device
    self._var_shape = var.shape
    if isinstance(var, tensor_lib.Tensor):
      self.handle_op = var.op.inputs[0]
      tensor = var
    elif resource_variable_ops.is_resource_variable(var):
      self.handle_op = var.handle
      tensor = functools.partial(_read_slice_to_cpu, var)
    else:
      raise ValueError(
          "Expected a resource variable or a read of one to save as "
          f"{name!r}, got {var!r}.")
    spec = saveable_objects.SaveSpec(tensor,
                                     slice_spec,
                                     name,
                                     dtype=var.dtype,
                                     device=var.device)
    super().__init__(var, [spec], name)

  def restore(self, restored_tensors, restored_shapes=None):
    value = restored_tensors[0]
    if restored_shapes is not None:
      value = array_ops.reshape(value, restored_shapes[0])
    if not context.executing_eagerly():
      # A copy on the variable's device, as in TensorFlow's graphs.
      with ops.device(self._var_device):
        value = array_ops.identity(value)
    return assign_checked(self.handle_op, self._var_shape, self._var_device,
                          value, self.name)


def _read_slice_to_cpu(var):
  """Reads a variable given to the v1 `Saver` whole (partitioned slices).

  When graph building, with TensorFlow's ops: a no-copy read in a "Read"
  scope and copies on the variable's device and on the CPU.
  """
  if context.executing_eagerly():
    return variable_values.read_to_cpu(var, var.device)
  with ops.device(var.device):
    value = var.read_value_no_copy()
    with ops.device("/device:CPU:0"):
      return array_ops.identity(value)


def assign_checked(handle, variable_shape, device, value, name):
  """Assigns `value` to a variable handle after checking shapes agree.

  Raises:
    ValueError: naming the checkpoint key when the shapes differ.
  """
  if not variable_shape.is_compatible_with(value.shape):
    raise ValueError(
        f"Received incompatible tensor with shape {value.shape} when "
        f"attempting to restore variable with shape {variable_shape} "
        f"(checkpoint key {name!r}).")
  if context.executing_eagerly():  # Runs on the variable's device anyway.
    return gen_resource_variable_ops.assign_variable_op(handle, value)
  with ops.device(device):
    return gen_resource_variable_ops.assign_variable_op(handle, value)


class VariableSaveable(ResourceVariableSaveable):
  """The saveable of a plain resource variable in an object-based checkpoint.

  Equivalent to what the variable's `_serialize_to_tensors` describes (one
  value under VARIABLE_VALUE) but built directly: this runs once per variable
  per save and restore, so it skips the generic path's Python work.
  """

  # pylint: disable=super-init-not-called
  def __init__(self, var, name=""):
    device = var.device
    self.op = var
    self.name = name
    self.specs = [
        variable_values.VariableValueSpec(var, name + _VARIABLE_VALUE_KEY,
                                          device)
    ]
    self.handle_op = var.handle
    self._var_device = device
    self._var_shape = var.shape

  def restore(self, restored_tensors, restored_shapes=None):
    """Assigns the value as read: no copy op, unlike v1 `Saver` graphs."""
    del restored_shapes  # Whole variables only.
    return assign_checked(self.handle_op, self._var_shape, self._var_device,
                          restored_tensors[0], self.specs[0].name)

  def get_proto_names_and_checkpoint_keys(self):
    return [(_VARIABLE_VALUE_KEY, self.specs[0].name)]


module_names.keep_module_name("tf_objckpt.saveable_object_util",
                              ReferenceVariableSaveable,
                              ResourceVariableSaveable)
