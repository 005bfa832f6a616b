"""The I/O engine's front, by TensorFlow's name for the module.

The code is in `engine/multi_device_saver.py` (`Saver`, TensorFlow's
`MultiDeviceSaver`, and the execution of read plans); code and
TensorFlow's own tests written against
`tensorflow.python.checkpoint.functional_saver` import these names from
here. `MultiDeviceSaver` is TensorFlow's name for `Saver`.
"""

# pylint: disable=unused-import
from tf_objckpt.engine.multi_device_saver import apply_restored
from tf_objckpt.engine.multi_device_saver import execute_plan
from tf_objckpt.engine.multi_device_saver import group_by_device
from tf_objckpt.engine.multi_device_saver import Saver
from tf_objckpt.engine.multi_device_saver import Saver as MultiDeviceSaver
from tf_objckpt.engine.registered_savers import registered_saver_filename
from tf_objckpt.engine.writes import sharded_filename
# pylint: enable=unused-import
