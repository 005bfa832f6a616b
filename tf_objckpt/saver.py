"""The v1 name-based `Saver` and meta graphs, by TensorFlow's name.

`Saver` is in `v1.name_based_saver`, which keeps checkpoints as
`v1.saver_retention` decides and checks its restores as `v1.saver_restores`
says; the meta graph functions are in `v1.meta_graphs` and
`v1.saver_imports`, the builders of its
ops in `v1.saver_builders`, the state file's functions in
`engine.state_file`. The private names below are TensorFlow's, which its
tests and SavedModel loading call.
"""

# pylint: disable=unused-import
from tf_objckpt.engine.state_file import checkpoint_exists
from tf_objckpt.engine.state_file import generate_checkpoint_state_proto
from tf_objckpt.engine.state_file import get_checkpoint_mtimes
from tf_objckpt.engine.state_file import get_checkpoint_state
from tf_objckpt.engine.state_file import latest_checkpoint
from tf_objckpt.engine.state_file import remove_checkpoint
from tf_objckpt.engine.state_file import update_checkpoint_state
from tf_objckpt.v1.meta_graphs import export_meta_graph
from tf_objckpt.v1.name_based_saver import _get_saver_or_default
from tf_objckpt.v1.name_based_saver import Saver
from tf_objckpt.v1.name_based_saver import saver_from_object_based_checkpoint
from tf_objckpt.v1.object_based_names import object_graph_key_mapping
from tf_objckpt.v1.saver_builders import BaseSaverBuilder
from tf_objckpt.v1.saver_builders import BulkSaverBuilder
from tf_objckpt.v1.saver_imports import _create_saver_from_imported_meta_graph
from tf_objckpt.v1.saver_imports import _import_meta_graph_with_return_elements
from tf_objckpt.v1.saver_imports import import_meta_graph
# pylint: enable=unused-import
