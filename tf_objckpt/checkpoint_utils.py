"""TensorFlow's `checkpoint_utils`: reading checkpoints, and warm starts.

TensorFlow's name for this module (`tensorflow.python.training.
checkpoint_utils`), whose functions TensorFlow exports under `tf.train`
(`load_checkpoint`, `list_variables`, `load_variable`,
`checkpoints_iterator`). The readers live in
`inspection.checkpoint_reader`, the polling for new checkpoints in
`api.checkpoint_polling`.
"""

# pylint: disable=unused-import
from tf_objckpt.api.checkpoint_polling import checkpoints_iterator
from tf_objckpt.api.checkpoint_polling import wait_for_new_checkpoint
from tf_objckpt.inspection.checkpoint_reader import CheckpointReader
from tf_objckpt.inspection.checkpoint_reader import list_variables
from tf_objckpt.inspection.checkpoint_reader import load_checkpoint
from tf_objckpt.inspection.checkpoint_reader import load_variable
# pylint: enable=unused-import

__all__ = ["load_checkpoint", "load_variable", "list_variables",
           "checkpoints_iterator"]
