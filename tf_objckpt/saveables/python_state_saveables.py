"""The saveables of Python state and of values written only.

`PythonStringStateSaveable` saves state that lives in Python rather than in
tensors (a string a callback returns; graph building, fed at each save) and
hands the restored string back; `NoRestoreSaveable` writes a value that a
restore skips (the object graph). `saveable_object` and `base`, where
TensorFlow's users find them, re-export them.
"""

from tensorflow.python.eager import context
from tensorflow.python.framework import constant_op
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import ops
from tensorflow.python.ops import gen_control_flow_ops

from tf_objckpt.engine import saveable_objects
from tf_objckpt.foundation import module_names


class NoRestoreSaveable(saveable_objects.SaveableObject):
  """Writes a tensor into the checkpoint; restoring it does nothing."""

  def __init__(self, tensor, name, dtype=None, device=None):
    spec = saveable_objects.SaveSpec(tensor,
                                     "",
                                     name,
                                     dtype=dtype,
                                     device=device)
    super().__init__(tensor, [spec], name)

  def restore(self, restored_tensors, restored_shapes=None):
    del restored_tensors, restored_shapes  # Nothing to restore.
    if context.executing_eagerly():
      return None
    return gen_control_flow_ops.no_op()


class PythonStateSaveable(saveable_objects.SaveableObject):
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
    spec = saveable_objects.SaveSpec(self._fed_state,
                                     "",
                                     name,
                                     dtype=dtypes.string)
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


module_names.keep_module_name("tf_objckpt.saveable_object", NoRestoreSaveable,
                              PythonStateSaveable, PythonStringStateSaveable)
