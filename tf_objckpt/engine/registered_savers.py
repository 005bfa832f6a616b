"""Objects saved by registered savers (`register_checkpoint_saver`).

TensorFlow lets a library register save and restore functions for the
objects a predicate accepts (DTensor and TPU embeddings do). Such an object
writes no attributes of its own: its node in the object graph names the
saver and the object (`registered_saver`), the saver's save function writes
files under `<prefix>-<saver name>` that are merged into the checkpoint
with the other shards, and its restore function reads them back from the
merged checkpoint, given every object of that saver at once.

`RegisteredSave` is what a save hands the engine for one saver (it carries
no tensors: the engine calls `save` and merges what it wrote);
`restore_functions` are called by the restore walk.
"""

from tensorflow.python.framework import constant_op
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import tensor_util
from tensorflow.python.ops import string_ops
from tensorflow.python.saved_model import registration
from tensorflow.python.util import nest


def saver_name(trackable):
  """The name of the saver registered for `trackable`, or None."""
  return registration.get_registered_saver_name(trackable)


def registered_saver_filename(filename_tensor, saver_name):
  """The prefix a registered saver writes under: `<prefix>-<saver name>`."""
  return string_ops.string_join(
      [filename_tensor, constant_op.constant(f"-{saver_name}")])


class RegisteredSave:
  """The objects of one registered saver in one save."""

  def __init__(self, name, trackables):
    """`trackables`: `{object name: trackable}` (names are object paths)."""
    self.registered_saver_name = name
    self.trackables = trackables

  def save(self, file_prefix):
    """Calls the save function; returns the prefixes it wrote (tensors).

    Raises:
      ValueError: If the function returns anything but string tensors.
    """
    written = registration.get_save_function(self.registered_saver_name)(
        trackables=self.trackables, file_prefix=file_prefix)
    if written is None:
      return []
    prefixes = nest.flatten(written)
    if not all(
        tensor_util.is_tf_type(prefix) and prefix.dtype == dtypes.string
        for prefix in prefixes):
      raise ValueError(
          "Registered saver must return a (maybe empty) list of string type "
          f"tensors. Got {written}.")
    return prefixes


def should_restore(trackable, name):
  """Whether saver `name`'s restore applies to `trackable`.

  Raises:
    ValueError: If it does not and the saver is strict about it.
  """
  try:
    registration.validate_restore_function(trackable, name)
  except ValueError:
    if registration.get_strict_predicate_restore(name):
      raise
    return False
  return True


def restore(by_saver, merged_prefix):
  """Calls each saver's restore function with its objects.

  Args:
    by_saver: `{saver name: {object name: trackable}}`.
    merged_prefix: The checkpoint path (a string tensor).

  Returns:
    What the functions returned that are ops (graph mode).
  """
  results = []
  for name, trackables in by_saver.items():
    result = registration.get_restore_function(name)(
        trackables=trackables, merged_prefix=merged_prefix)
    if result is not None:
      results.append(result)
  return results
