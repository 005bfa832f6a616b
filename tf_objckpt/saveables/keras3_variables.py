"""Keras 3 variables that save as the `tf.Variable` they wrap.

A Keras 3 variable (TensorFlow backend) wraps a `tf.Variable` and forwards
its saving and restoring to it, so checkpoints hold the wrapped variable's
value under the Keras variable's key. Such a variable is saved and restored
as that `tf.Variable` (`trackable_saveables.stock_variable`), unless its
class changes the forwarding. Keras is looked up, never imported: its
variables exist only once it is.
"""

import sys

from tf_objckpt.foundation import tensorflow_internals

# The Keras 3 module whose `Variable` wraps a `tf.Variable` (TensorFlow
# backend).
_KERAS3_BACKEND_MODULE = "keras.src.backend.tensorflow.core"
_FORWARDS_SAVING_BY_CLASS: dict[type, bool] = {}


def forwarded_variable(obj):
  """The `tf.Variable` Keras 3 variable `obj` forwards its saving to, or None.

  None if `obj` is not a Keras 3 variable keeping Keras' forwarding save
  logic, or if Keras has not initialized it yet.
  """
  if not _forwards_saving(type(obj)):
    return None
  return obj.__dict__.get("_value")  # None until Keras initializes it.


def _forwards_saving(cls) -> bool:
  """Whether `cls` keeps the Keras 3 variable's forwarding save logic."""
  result = _FORWARDS_SAVING_BY_CLASS.get(cls)
  if result is None:
    keras_backend = sys.modules.get(_KERAS3_BACKEND_MODULE)
    keras_variable = getattr(keras_backend, "Variable", None)
    result = keras_variable is not None and tensorflow_internals.overrides_none(
        cls, keras_variable, ("_serialize_to_tensors", "_restore_from_tensors"))
    _FORWARDS_SAVING_BY_CLASS[cls] = result
  return result
