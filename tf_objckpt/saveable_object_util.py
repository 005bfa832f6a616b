"""Saveables of variables and trackables, by TensorFlow's name for the module.

Code and TensorFlow's own tests written against
`tensorflow.python.training.saving.saveable_object_util` import these names
from here. The code is where its callers' layers put it:
- name-based saving (the v1 `Saver`), from lists and dicts of variables:
  `saveables/named_saveables.py`;
- object-based saving, which asks each trackable for its saveables:
  `saveables/trackable_saveables.py`;
- the saveables of variables: `saveables/variable_saveables.py`.
TensorFlow's SavedModel helpers work on any saveables and trackables: they
are TensorFlow's own.
"""

# pylint: disable=unused-import
from tensorflow.python.training.saving.saveable_object_util import create_saveable_object
from tensorflow.python.training.saving.saveable_object_util import is_factory_for_restored_saveable_object
from tensorflow.python.training.saving.saveable_object_util import recreate_saveable_objects
from tensorflow.python.training.saving.saveable_object_util import RestoredSaveableObject
from tensorflow.python.training.saving.saveable_object_util import saveable_object_to_restore_fn
from tensorflow.python.training.saving.saveable_object_util import saveable_object_to_tensor_dict
from tensorflow.python.training.saving.saveable_object_util import SaveableCompatibilityConverter
from tensorflow.python.training.saving.saveable_object_util import serialized_tensors_to_saveable_cache
from tensorflow.python.training.saving.saveable_object_util import validate_saveables_for_saved_model

from tf_objckpt.engine.variable_values import set_cpu0
from tf_objckpt.foundation.checkpoint_keys import VARIABLE_VALUE_KEY
from tf_objckpt.saveables.named_saveables import op_list_to_dict
from tf_objckpt.saveables.named_saveables import saveable_objects_for_op
from tf_objckpt.saveables.named_saveables import validate_and_slice_inputs
from tf_objckpt.saveables.trackable_saveables import saveable_objects_from_trackable
from tf_objckpt.saveables.trackable_saveables import trackable_has_serialize_to_tensor
from tf_objckpt.saveables.trackable_saveables import TrackableSaveable
from tf_objckpt.saveables.variable_saveables import ReferenceVariableSaveable
from tf_objckpt.saveables.variable_saveables import ResourceVariableSaveable
# pylint: enable=unused-import
