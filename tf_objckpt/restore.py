"""The restore walk's node, by TensorFlow's name for the module.

Code and TensorFlow's own tests written against
`tensorflow.python.checkpoint.restore` import `CheckpointPosition` from
here. The code is in `restoring/`: the position in
`checkpoint_position.py`, the walk in `restore_walk.py` and
`node_binding.py`, its Keras 3 steps in `keras3_slot_binding.py`.
"""

# pylint: disable=unused-import
from tf_objckpt.restoring.checkpoint_position import CheckpointPosition
# pylint: enable=unused-import
