"""tf_objckpt: TensorFlow-compatible object-based checkpointing.

Checkpoints written here are TensorFlow checkpoints (same keys, same object
graph), and TensorFlow's checkpoints restore here. See README.md.
"""

from tf_objckpt.base import NoRestoreSaveable
from tf_objckpt.base import PythonStringStateSaveable
from tf_objckpt.base import Trackable
from tf_objckpt.checkpoint_management import CheckpointManager
from tf_objckpt.checkpoint_management import checkpoint_exists
from tf_objckpt.checkpoint_management import get_checkpoint_mtimes
from tf_objckpt.checkpoint_management import get_checkpoint_state
from tf_objckpt.checkpoint_management import latest_checkpoint
from tf_objckpt.checkpoint_management import meta_graph_filename
from tf_objckpt.checkpoint_management import remove_checkpoint
from tf_objckpt.checkpoint_management import update_checkpoint_state
from tf_objckpt.data_structures import NoDependency
from tf_objckpt.tracking import AutoTrackable
from tf_objckpt.util import add_variable
from tf_objckpt.util import capture_dependencies
from tf_objckpt.util import Checkpoint
from tf_objckpt.util import CheckpointOptions
from tf_objckpt.util import CheckpointV1
from tf_objckpt.util import frozen_saver
from tf_objckpt.util import gather_initializers
from tf_objckpt.util import list_objects
from tf_objckpt.util import object_metadata
from tf_objckpt.util import saver_with_op_caching
from tf_objckpt.util import streaming_restore
from tf_objckpt.util import TrackableSaver


def __getattr__(name):
  """Imports the v1 Saver lazily: it pulls in meta graph machinery.

  So does the switch that makes TensorFlow use our classes.
  """
  if name in ("Saver", "export_meta_graph", "import_meta_graph"):
    from tf_objckpt import saver  # pylint: disable=g-import-not-at-top
    return getattr(saver, name)
  if name in ("patch_tensorflow", "unpatch_tensorflow"):
    from tf_objckpt import patching  # pylint: disable=g-import-not-at-top
    return getattr(patching, name)
  raise AttributeError(f"module 'tf_objckpt' has no attribute {name!r}")
