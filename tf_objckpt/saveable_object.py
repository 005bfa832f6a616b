"""`SaveSpec` and `SaveableObject`, by TensorFlow's name for the module.

The code is in `engine/saveable_objects.py` (the engine's types) and
`saveables/python_state_saveables.py`; code and TensorFlow's own tests written
against `tensorflow.python.training.saving.saveable_object` import these
names from here. The saveables of Python state are ours, kept here where
users found them.
"""

# pylint: disable=unused-import
from tf_objckpt.engine.saveable_objects import SaveableObject
from tf_objckpt.engine.saveable_objects import SaveSpec
from tf_objckpt.saveables.python_state_saveables import NoRestoreSaveable
from tf_objckpt.saveables.python_state_saveables import PythonStateSaveable
from tf_objckpt.saveables.python_state_saveables import PythonStringStateSaveable
# pylint: enable=unused-import
