"""`SaveSpec` and `SaveableObject`, by TensorFlow's name for the module.

The code is in `engine/saveable_objects.py`; code and TensorFlow's own tests
written against `tensorflow.python.training.saving.saveable_object` import
these names from here. The saveables of Python state are ours, kept here
where users found them.
"""

# pylint: disable=unused-import
from tf_objckpt.engine.saveable_objects import NoRestoreSaveable
from tf_objckpt.engine.saveable_objects import PythonStateSaveable
from tf_objckpt.engine.saveable_objects import PythonStringStateSaveable
from tf_objckpt.engine.saveable_objects import SaveableObject
from tf_objckpt.engine.saveable_objects import SaveSpec
# pylint: enable=unused-import
