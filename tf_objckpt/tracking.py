"""`AutoTrackable`, by TensorFlow's name for the module.

The code is in `objects.auto_trackable`.
"""

from tf_objckpt.objects.auto_trackable import AutoTrackable  # pylint: disable=unused-import
