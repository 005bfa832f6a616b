"""Object-based checkpoints, by TensorFlow 1's name for the module.

The same names as `tf_objckpt.checkpoint` (TensorFlow 2's name): code and
TensorFlow's own tests written against `tensorflow.python.training.tracking.
util` import them from here.
"""

# pylint: disable=unused-import
from tf_objckpt.checkpoint import add_variable
from tf_objckpt.checkpoint import capture_dependencies
from tf_objckpt.checkpoint import Checkpoint
from tf_objckpt.checkpoint import CheckpointLoadStatus
from tf_objckpt.checkpoint import CheckpointOptions
from tf_objckpt.checkpoint import CheckpointV1
from tf_objckpt.checkpoint import frozen_saver
from tf_objckpt.checkpoint import gather_initializers
from tf_objckpt.checkpoint import get_session
from tf_objckpt.checkpoint import InitializationOnlyStatus
from tf_objckpt.checkpoint import list_objects
from tf_objckpt.checkpoint import NameBasedSaverStatus
from tf_objckpt.checkpoint import object_metadata
from tf_objckpt.checkpoint import ObjectGraphProtoPrettyPrinter
from tf_objckpt.checkpoint import register_session_provider
from tf_objckpt.checkpoint import saver_with_op_caching
from tf_objckpt.checkpoint import streaming_restore
from tf_objckpt.checkpoint import TrackableSaver
# pylint: enable=unused-import
