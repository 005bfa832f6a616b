"""`SaveSpec` and `SaveableObject`: the unit a checkpoint writer consumes.

A `SaveableObject` names one piece of state and says how to read it
(`specs`: tensors, or callables producing them, with checkpoint keys) and how
to write it back (`restore`). Both subclass TensorFlow's classes of the same
name so that TensorFlow's own savers accept ours and the other way round.
The saveables of state that lives in Python rather than in tensors
(`PythonStateSaveable`) and of write-only values (`NoRestoreSaveable`) are
here too. `saveable_object`, TensorFlow's name for this module, re-exports
them.
"""

from tensorflow.python.eager import context
from tensorflow.python.framework import constant_op
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import ops
from tensorflow.python.ops import gen_control_flow_ops
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


class NoRestoreSaveable(SaveableObject):
  """Writes a tensor into the checkpoint; restoring it does nothing."""

  def __init__(self, tensor, name, dtype=None, device=None):
    spec = SaveSpec(tensor, "", name, dtype=dtype, device=device)
    super().__init__(tensor, [spec], name)

  def restore(self, restored_tensors, restored_shapes=None):
    del restored_tensors, restored_shapes  # Nothing to restore.
    if context.executing_eagerly():
      return None
    return gen_control_flow_ops.no_op()


class PythonStateSaveable(SaveableObject):
  """A saveable whose value comes from Python rather than from the graph.

  In graph mode its value is fed at save time (`feed_dict_additions`), so
  the cached save op does not embed a stale constant.
  """

  def feed_dict_additions(self):
    """Returns a feed dict that supplies the current Python state."""
    raise NotImplementedError

  def freeze(self):
    """Returns a saveable with the current state baked in as a constant."""
    raise NotImplementedError


class PythonStringStateSaveable(PythonStateSaveable):
  """Saves a Python string produced by `state_callback`.

  On restore the string is passed to `restore_callback`, eagerly, even when
  graph building (Python state lives outside the graph).
  """

  def __init__(self, name, state_callback, restore_callback=None):
    """Creates the saveable.

    Args:
      name: The checkpoint key.
      state_callback: Returns the string to save; called at every save.
      restore_callback: Receives the restored string; None to only save.
    """

    def current_state():
      with ops.init_scope():
        return state_callback()

    self._state_callback = current_state
    self._restore_callback = restore_callback
    with ops.device("/cpu:0"):
      # Fed with the current state at each graph-mode save.
      self._fed_state = constant_op.constant(b"")
    spec = SaveSpec(self._fed_state, "", name, dtype=dtypes.string)
    super().__init__(self._fed_state, [spec], name)

  @property
  def optional_restore(self):
    """Save-only state never counts as missing when restoring."""
    return self._restore_callback is None

  def feed_dict_additions(self):
    state = self._state_callback()
    return {self._fed_state: state}

  def freeze(self):
    state = self._state_callback

    def current_value():
      return constant_op.constant(state(), dtype=dtypes.string)

    return NoRestoreSaveable(tensor=current_value,
                             name=self.name,
                             dtype=dtypes.string,
                             device=_host_cpu())

  def python_restore(self, restored_strings):
    """Hands the restored string, as bytes, to the restore callback.

    Bytes, not text: the state may be binary (a `np.save` buffer, say).
    """
    if self._restore_callback is not None:
      restored, = restored_strings
      if hasattr(restored, "numpy"):
        restored = restored.numpy()
      self._restore_callback(restored)

  def restore(self, restored_tensors, restored_shapes=None):
    del restored_shapes  # Strings are scalars.
    self.python_restore(restored_tensors)
    if context.executing_eagerly():
      return None
    return gen_control_flow_ops.no_op()


def _host_cpu():
  """The device of a tensor made now under `ops.device("/cpu:0")`.

  Saves write one file per task, so a value's device must name its task as
  the variables beside it do: eagerly, the full name of this host's CPU.
  """
  if context.executing_eagerly():
    with ops.device("/cpu:0"):
      return context.context().device_name
  return "/device:CPU:0"


module_names.keep_module_name("tf_objckpt.saveable_object", SaveSpec,
                              SaveableObject, NoRestoreSaveable,
                              PythonStateSaveable, PythonStringStateSaveable)
