"""`Trackable` and its helpers, by TensorFlow's name for the module.

The code is in `objects.trackable`. The restore walk's positions
(`restoring.checkpoint_position`), initial values
(`restoring.initial_values`) and the saveables of Python state
(`saveables.python_state_saveables`) were born here, and TensorFlow's users
look for them here too.
"""

# pylint: disable=unused-import
from tf_objckpt.objects.trackable import no_automatic_dependency_tracking
from tf_objckpt.objects.trackable import no_automatic_dependency_tracking_scope
from tf_objckpt.objects.trackable import no_manual_dependency_tracking_scope
from tf_objckpt.objects.trackable import OBJECT_CONFIG_JSON_KEY
from tf_objckpt.objects.trackable import OBJECT_GRAPH_PROTO_KEY
from tf_objckpt.objects.trackable import ShardInfo
from tf_objckpt.objects.trackable import Trackable
from tf_objckpt.objects.trackable import TrackableReference
from tf_objckpt.objects.trackable import VARIABLE_VALUE_KEY
from tf_objckpt.objects.trackable import WeakTrackableReference
from tf_objckpt.restoring.checkpoint_position import CheckpointPosition
from tf_objckpt.restoring.initial_values import CheckpointInitialValue
from tf_objckpt.restoring.initial_values import CheckpointInitialValueCallable
from tf_objckpt.saveables.python_state_saveables import NoRestoreSaveable
from tf_objckpt.saveables.python_state_saveables import PythonStateSaveable
from tf_objckpt.saveables.python_state_saveables import PythonStringStateSaveable
# pylint: enable=unused-import
