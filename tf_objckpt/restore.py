"""The restore walk's node and chosen-node restores, by TensorFlow's name.

Code and TensorFlow's own tests written against
`tensorflow.python.checkpoint.restore` import `CheckpointPosition` and
`restore_nodes` (and TensorFlow's private `_extract_saveable_name`) from
here. The code is in `restoring/`: the position in
`checkpoint_position.py`, the walk in `restore_walk.py` and
`node_binding.py`, its Keras 3 steps in `keras3_slot_binding.py`, restores
of chosen nodes in `node_restores.py`; the name of a saveable in
`foundation/checkpoint_keys.py`.
"""

# pylint: disable=unused-import
from tf_objckpt.foundation.checkpoint_keys import saveable_name as _extract_saveable_name
from tf_objckpt.restoring.checkpoint_position import CheckpointPosition
from tf_objckpt.restoring.node_restores import restore_nodes
# pylint: enable=unused-import
