"""`CheckpointManager` and the state file's functions, by TensorFlow's names.

The manager is in `api.checkpoint_manager`, which keeps checkpoints as
`api.retention` decides; the functions reading and writing the
`checkpoint` state file are in `engine.state_file`.
"""

# pylint: disable=unused-import
from tf_objckpt.api.checkpoint_manager import CheckpointManager
from tf_objckpt.engine.state_file import checkpoint_exists
from tf_objckpt.engine.state_file import checkpoint_exists_internal
from tf_objckpt.engine.state_file import generate_checkpoint_state_proto
from tf_objckpt.engine.state_file import get_checkpoint_mtimes
from tf_objckpt.engine.state_file import get_checkpoint_state
from tf_objckpt.engine.state_file import latest_checkpoint
from tf_objckpt.engine.state_file import meta_graph_filename
from tf_objckpt.engine.state_file import remove_checkpoint
from tf_objckpt.engine.state_file import update_checkpoint_state
from tf_objckpt.engine.state_file import update_checkpoint_state_internal
# pylint: enable=unused-import
