"""The types the public API's hints name, shared by every layer.

TensorFlow ships no type information, so its classes are `Any` to a type
checker; these aliases still say what a value is, in one place. Importing
this module does not import TensorFlow.
"""

import os
import typing
from typing import Optional, Union

if typing.TYPE_CHECKING:
  import tensorflow as tf

# A checkpoint's path or prefix as TensorFlow takes it: a string, a path
# object or, inside a `tf.function`, a string tensor.
CheckpointPath = Union[str, os.PathLike, "tf.Tensor"]
# A path as a string or, inside a `tf.function`, a string tensor: what a
# save returns.
PathOrTensor = Union[str, "tf.Tensor"]
# The session graph-mode calls run in (None: the default session).
Session = Optional["tf.compat.v1.Session"]
# Options of a save or restore (None: the defaults).
Options = Optional["tf.train.CheckpointOptions"]
