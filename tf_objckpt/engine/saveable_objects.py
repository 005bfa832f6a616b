"""`SaveSpec` and `SaveableObject`: the unit a checkpoint writer consumes.

A `SaveableObject` names one piece of state and says how to read it
(`specs`: tensors, or callables producing them, with checkpoint keys) and how
to write it back (`restore`). Both subclass TensorFlow's classes of the same
name so that TensorFlow's own savers accept ours and the other way round.
They are the engine's types, declared where the engine consumes them; every
saveable the package makes is in `saveables/`. `saveable_object`,
TensorFlow's name for this module, re-exports them.
"""

from tensorflow.python.training.saving import saveable_object as tf_saveable_object

from tf_objckpt.foundation import module_names


class SaveSpec(tf_saveable_object.SaveSpec):
  """One tensor to save: its value (or a callable), key, slice and device."""

  # pylint: disable=super-init-not-called
  def __init__(self, tensor, slice_spec, name, dtype=None, device=None):
    """Describes a tensor stored under checkpoint key `name`.

    Args:
      tensor: A tensor, or a callable returning one when the save runs (used
        to read variables lazily, on their own device).
      slice_spec: The `shape_and_slice` string for partitioned values, or "".
      name: The checkpoint key.
      dtype: The tensor's dtype; required when `tensor` is callable.
      device: The device producing the tensor; required when `tensor` is
        callable. Savers group writes by this device.
    """
    self._tensor = tensor
    self.slice_spec = slice_spec
    self.name = name
    if callable(tensor):
      if dtype is None or device is None:
        raise AssertionError(
            "A SaveSpec with a callable tensor needs an explicit dtype and "
            f"device (key {name!r}).")
      self.dtype = dtype
      self.device = device
    else:
      self.dtype = tensor.dtype
      self.device = tensor.device if device is None else device

  @property
  def tensor(self):
    """The value to write; calls the callable, if one was given."""
    return self._tensor() if callable(self._tensor) else self._tensor


class SaveableObject(tf_saveable_object.SaveableObject):
  """State that saves as one or more `SaveSpec`s and restores from them."""

  # pylint: disable=super-init-not-called
  def __init__(self, op, specs, name):
    """Creates a saveable.

    Args:
      op: The object producing the values (for example a variable); savers
        use it to reject the same state saved under two names.
      specs: The `SaveSpec`s to write, all on one device.
      name: The name (checkpoint key prefix) of this saveable.
    """
    self.op = op
    self.specs = specs
    self.name = name

  @property
  def optional_restore(self):
    """Whether a missing value is tolerated by load-status assertions."""
    return False

  @property
  def device(self):
    """The device of this saveable's tensors."""
    return self.specs[0].device

  def restore(self, restored_tensors, restored_shapes=None):
    """Writes `restored_tensors` (one per spec) back; returns an op or None."""
    raise NotImplementedError(
        f"{type(self).__name__} does not implement restore().")


module_names.keep_module_name("tf_objckpt.saveable_object", SaveSpec,
                              SaveableObject)
