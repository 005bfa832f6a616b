"""Checkpoint key names, by TensorFlow's name for the module.

The code is in `foundation.checkpoint_keys`.
"""

# pylint: disable=unused-import
from tf_objckpt.foundation.checkpoint_keys import checkpoint_key
from tf_objckpt.foundation.checkpoint_keys import ESCAPE_CHAR
from tf_objckpt.foundation.checkpoint_keys import escape_local_name
from tf_objckpt.foundation.checkpoint_keys import OBJECT_ATTRIBUTES_NAME
from tf_objckpt.foundation.checkpoint_keys import object_path_of_key
from tf_objckpt.foundation.checkpoint_keys import OPTIMIZER_SLOTS_NAME
from tf_objckpt.foundation.checkpoint_keys import SERIALIZE_TO_TENSORS_NAME
from tf_objckpt.foundation.checkpoint_keys import slot_variable_key
from tf_objckpt.foundation.checkpoint_keys import VARIABLE_VALUE_KEY
# pylint: enable=unused-import
