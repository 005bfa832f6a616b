"""TensorFlow's `checkpoint_utils`: reading checkpoints, and warm starts.

TensorFlow's name for this module (`tensorflow.python.training.
checkpoint_utils`), whose functions TensorFlow exports under `tf.train`
(`load_checkpoint`, `list_variables`, `load_variable`,
`checkpoints_iterator`) and `tf.compat.v1.train` (those and
`init_from_checkpoint`). The readers live in
`inspection.checkpoint_reader`, the polling for new checkpoints in
`api.checkpoint_polling`, and the warm start in `v1.warm_start` (with its
assignment maps in `v1.assignment_maps`).
"""

# pylint: disable=unused-import
from tf_objckpt.api.checkpoint_polling import checkpoints_iterator
from tf_objckpt.api.checkpoint_polling import wait_for_new_checkpoint
from tf_objckpt.inspection.checkpoint_reader import CheckpointReader
from tf_objckpt.inspection.checkpoint_reader import list_variables
from tf_objckpt.inspection.checkpoint_reader import load_checkpoint
from tf_objckpt.inspection.checkpoint_reader import load_variable
from tf_objckpt.v1.warm_start import init_from_checkpoint
# pylint: enable=unused-import
