"""Object-based checkpoints, by TensorFlow 1's name for the module.

The same names as `tf_objckpt.checkpoint` (TensorFlow 2's name): code and
TensorFlow's own tests written against `tensorflow.python.training.tracking.
util` import them from here.
"""

# pylint: disable=unused-import
from tf_objckpt.api.load_status import CheckpointLoadStatus
from tf_objckpt.api.load_status import InitializationOnlyStatus
from tf_objckpt.api.name_based_status import NameBasedSaverStatus
from tf_objckpt.api.object_checkpoints import Checkpoint
from tf_objckpt.api.object_checkpoints import CheckpointV1
from tf_objckpt.api.object_checkpoints import streaming_restore
from tf_objckpt.api.sessions import get_session
from tf_objckpt.api.sessions import register_session_provider
from tf_objckpt.api.trackable_saver import CheckpointOptions
from tf_objckpt.api.trackable_saver import frozen_saver
from tf_objckpt.api.trackable_saver import saver_with_op_caching
from tf_objckpt.api.trackable_saver import TrackableSaver
from tf_objckpt.inspection.object_metadata import object_metadata
from tf_objckpt.inspection.object_metadata import ObjectGraphProtoPrettyPrinter
from tf_objckpt.objects.graph_walk import gather_initializers
from tf_objckpt.objects.graph_walk import list_objects
from tf_objckpt.objects.variable_creation import add_variable
from tf_objckpt.objects.variable_creation import capture_dependencies
# pylint: enable=unused-import
