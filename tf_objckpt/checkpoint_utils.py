"""TensorFlow's `checkpoint_utils`: reading checkpoints, and warm starts.

TensorFlow's name for this module (`tensorflow.python.training.
checkpoint_utils`), whose functions TensorFlow exports under `tf.train`
(`load_checkpoint`, `list_variables`, `load_variable`). The readers live
in `inspection.checkpoint_reader`.
"""

# pylint: disable=unused-import
from tf_objckpt.inspection.checkpoint_reader import CheckpointReader
from tf_objckpt.inspection.checkpoint_reader import list_variables
from tf_objckpt.inspection.checkpoint_reader import load_checkpoint
from tf_objckpt.inspection.checkpoint_reader import load_variable
# pylint: enable=unused-import

__all__ = ["load_checkpoint", "load_variable", "list_variables"]
