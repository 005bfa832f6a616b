"""Initial values read from a checkpoint, for variables being created.

Restore-on-create: a variable created while a restore waits for it starts
with its checkpointed value, read through the restore's `CheckpointPosition`
(`checkpoint_position`), so it is never initialized and then overwritten.
Keras 3 variables traced in a symbolic build get it as their initializer.
"""

from tensorflow.python.trackable import base as tf_base

from tf_objckpt.foundation import checkpoint_keys


class CheckpointInitialValueCallable(tf_base.CheckpointInitialValueCallable):
  """A variable initializer that reads the variable's checkpointed value.

  Passing this as `initializer` makes a new variable start with its
  checkpointed value, so it is never initialized and then overwritten.
  """

  # pylint: disable=super-init-not-called
  def __init__(self, checkpoint_position):
    self._checkpoint_position = checkpoint_position

  def __call__(self, shape=None, dtype=None, shard_info=None):
    return CheckpointInitialValue(self._checkpoint_position,
                                  shape,
                                  shard_info=shard_info,
                                  dtype=dtype)


class CheckpointInitialValue(tf_base.CheckpointInitialValue):
  """An initial value read from a checkpoint, tagged with its restore UID.

  Variables recognize it and record the UID, so later restores from older
  `restore()` calls do not overwrite the value.
  """

  # pylint: disable=super-init-not-called
  def __init__(self,
               checkpoint_position,
               shape=None,
               shard_info=None,
               dtype=None):
    checkpoint_position.check_initial_value(None if shard_info else shape,
                                            dtype)
    shape_and_slice = _shape_and_slice(shape, shard_info)
    self.wrapped_value = checkpoint_position.value_tensors({
        checkpoint_keys.VARIABLE_VALUE_KEY: shape_and_slice
    })[checkpoint_keys.VARIABLE_VALUE_KEY]
    self._checkpoint_position = checkpoint_position


def awaits_initialization(trackable):
  """Whether `trackable` is a Keras 3 variable not initialized yet.

  Keras 3 creates such variables while tracing a build symbolically; they
  are initialized by calling their `_initializer` when the trace ends.
  """
  return (getattr(trackable, "_value", False) is None and
          callable(getattr(trackable, "_initializer", None)) and
          hasattr(trackable, "_deferred_initialize"))


def _shape_and_slice(shape, shard_info):
  """The RestoreV2 `shape_and_slice` string for one shard, or ""."""
  if not shard_info:
    return ""
  full_shape = " ".join("%d" % d for d in shape) + " "
  return full_shape + ":".join(
      "%d,%d" % (offset, size)
      for offset, size in zip(shard_info.offset, shard_info.shape))
