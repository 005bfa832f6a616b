"""A trackable's saveables: what object-based checkpoints save of each object.

Object-based saves and restores ask each trackable for `{attribute name:
saveable factory}` (`saveable_objects_from_trackable`), by the protocol
the object implements: `_serialize_to_tensors` (adapted by
`TrackableSaveable`), the legacy `_gather_saveables_for_checkpoint`, or
Python state. A stock resource variable, or a Keras 3 variable saving as
the one it wraps (`keras3_variables`), gets a `VariableSaveable` directly:
the restore walk and the engine treat such "stock" variables apart, fast.
"""

import functools

from tensorflow.python.checkpoint import saveable_compat
from tensorflow.python.eager import context
from tensorflow.python.ops import gen_control_flow_ops
from tensorflow.python.ops import resource_variable_ops
from tensorflow.python.ops import variables
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.trackable import base_delegate
from tensorflow.python.trackable import python_state
from tensorflow.python.training.saving import saveable_object as tf_saveable_object
from tensorflow.python.types import core as core_types

from tf_objckpt.engine import saveable_objects
from tf_objckpt.foundation import checkpoint_keys as trackable_utils
from tf_objckpt.foundation import module_names
from tf_objckpt.foundation import tensorflow_internals
from tf_objckpt.saveables import keras3_variables
from tf_objckpt.saveables import python_state_saveables
from tf_objckpt.saveables import variable_saveables


class TrackableSaveable(saveable_objects.SaveableObject):
  """Adapts a trackable's `_serialize_to_tensors` to a `SaveableObject`.

  The spec names are the checkpoint keys (`name` + escaped local name); the
  local names become the object's attribute names in the object graph.
  """

  def __init__(self,
               obj,
               specs,
               name,
               local_names,
               prefix="",
               call_with_mapped_captures=None):
    self._trackable = obj
    self._local_names = local_names
    self._legacy_name = prefix
    self._call_with_mapped_captures = call_with_mapped_captures
    super().__init__(obj, specs, name)

  def restore(self, restored_tensors, restored_shapes=None):
    del restored_shapes  # Unused: trackables restore whole tensors.
    # An object that saves no tensors is not asked to restore (TensorFlow's
    # default `_restore_from_tensors` raises).
    result = self._restore(dict(zip(self._local_names,
                                    restored_tensors))) if self.specs else None
    if result is None and not context.executing_eagerly():
      return gen_control_flow_ops.no_op()
    return result

  def _restore(self, tensors):
    restore = tensorflow_internals.restore_from_tensors_function(
        self._trackable)
    if (self._call_with_mapped_captures is not None and
        isinstance(restore, core_types.ConcreteFunction)):
      return self._call_with_mapped_captures(restore, [tensors])
    return restore(tensors)

  def get_proto_names_and_checkpoint_keys(self):
    """(attribute name, checkpoint key) pairs for the object graph proto."""
    if self._legacy_name:
      # As TensorFlow does: one attribute for the whole object, keyed by the
      # prefix of its tensors' keys.
      return [(self._legacy_name, self.name)]
    return [(local_name, spec.name)
            for local_name, spec in zip(self._local_names, self.specs)]


_DEFAULT_SAVING_BY_CLASS: dict[type, bool] = {}


def is_variable(obj) -> bool:
  """Whether `obj` is a variable (of any kind, distributed or sharded too)."""
  return (isinstance(obj, variables.Variable) or
          resource_variable_ops.is_resource_variable(obj))


def has_default_variable_saving(obj) -> bool:
  """True for resource variables that keep the stock save logic.

  The class's answer is cached; an instance may still override
  `_serialize_to_tensors` itself, which is checked every time.
  """
  cls = type(obj)
  result = _DEFAULT_SAVING_BY_CLASS.get(cls)
  if result is None:
    base = resource_variable_ops.BaseResourceVariable
    result = tensorflow_internals.overrides_none(
        cls, base, ("_serialize_to_tensors", "_restore_from_tensors"))
    _DEFAULT_SAVING_BY_CLASS[cls] = result
  return result and not _overrides_serialization(obj)


def stock_variable(obj):
  """The stock resource variable that holds `obj`'s saved value, or None.

  A stock resource variable holds its own. A Keras 3 variable forwards its
  saving and restoring to the `tf.Variable` it wraps, so it is saved and
  restored as that variable: read in batches and assigned directly, rather
  than through one read op and one copy per variable. Checkpoints are the
  same, under the Keras variable's key.
  """
  if has_default_variable_saving(obj):
    return obj
  wrapped = keras3_variables.forwarded_variable(obj)
  if (wrapped is not None and not _overrides_serialization(obj) and
      has_default_variable_saving(wrapped)):
    return wrapped
  return None


def _overrides_serialization(obj):
  """Whether `obj` sets its own (de)serialization methods on the instance."""
  attributes = getattr(obj, "__dict__", None)
  return attributes is not None and ("_serialize_to_tensors" in attributes or
                                     "_restore_from_tensors" in attributes)


def _serialized_tensor_specs(tensor_dict, name):
  """SaveSpecs (and local names) for a `_serialize_to_tensors` result."""
  specs = []
  local_names = []
  for local_name, value in tensor_dict.items():
    local_names.append(local_name)
    key = name + trackable_utils.escape_local_name(local_name)
    slices = value if isinstance(value, dict) else {"": value}
    for slice_spec, tensor in slices.items():
      if isinstance(tensor, tf_saveable_object.SaveSpec):
        tensor.name = key
        tensor.slice_spec = slice_spec
        specs.append(tensor)
      else:
        specs.append(saveable_objects.SaveSpec(tensor, slice_spec, key))
  return specs, local_names


def _serialize_to_tensors_factory(obj, legacy_name=""):
  """The saveable factory of a trackable implementing `_serialize_to_tensors`.

  `legacy_name` (see `saveable_compat.legacy_saveable_name`; "ITERATOR" for
  dataset iterators) continues the key prefix, keeping the keys the object
  had when it saved through a named SaveableObject.
  """

  def make_saveable(name="", call_with_mapped_captures=None):
    name += legacy_name
    save = tensorflow_internals.serialize_to_tensors_function(obj)
    if (call_with_mapped_captures is not None and
        isinstance(save, core_types.ConcreteFunction)):
      tensors = call_with_mapped_captures(save, [])
    else:
      tensors = save()
    specs, local_names = _serialized_tensor_specs(tensors, name)
    return TrackableSaveable(
        obj,
        specs,
        name,
        local_names,
        prefix=legacy_name,
        call_with_mapped_captures=call_with_mapped_captures)

  return make_saveable


def trackable_has_serialize_to_tensor(obj) -> bool:
  """Whether `obj` saves through `_serialize_to_tensors` (the TF2 protocol).

  The most derived class that defines either `_serialize_to_tensors` or the
  legacy `_gather_saveables_for_checkpoint` decides.
  """
  if "_serialize_to_tensors" in getattr(obj, "__dict__", {}):
    return True
  for cls in type(obj).mro():
    if cls is base_delegate.DelegatingTrackableMixin:
      # It forwards `_serialize_to_tensors` to the object it wraps (a
      # LossScaleOptimizer's optimizer, say): that object decides.
      return trackable_has_serialize_to_tensor(
          tensorflow_internals.delegate_of(obj))
    if cls is tf_base.Trackable:
      return False
    if "_serialize_to_tensors" in cls.__dict__:
      return True
    if "_gather_saveables_for_checkpoint" in cls.__dict__:
      return False
  return False


def saveable_objects_from_trackable(obj, tf1_saver=False):
  """Returns `{attribute name: saveable factory}` for a trackable.

  A factory is called with the checkpoint key (prefix) and returns a
  `SaveableObject`. Python state (`PythonState`) is saved as a string.

  Args:
    obj: A trackable.
    tf1_saver: Prefer the legacy `_gather_saveables_for_checkpoint` (what
      the v1 `Saver` uses).
  """
  variable = None if tf1_saver else stock_variable(obj)
  if variable is not None:
    return {
        trackable_utils.SERIALIZE_TO_TENSORS_NAME:
            functools.partial(variable_saveables.VariableSaveable, variable)
    }
  if isinstance(obj, python_state.PythonState):
    return {
        python_state.PYTHON_STATE:
            functools.partial(python_state_saveables.PythonStringStateSaveable,
                              state_callback=obj.serialize,
                              restore_callback=obj.deserialize)
    }
  if tf1_saver:
    legacy = tensorflow_internals.gather_saveables(obj)
    if legacy:
      return legacy
  if trackable_has_serialize_to_tensor(obj):
    # The v1 Saver ignores legacy names, as TensorFlow's does.
    legacy_name = "" if tf1_saver else (
        saveable_compat.get_saveable_name(obj) or "")
    return {
        trackable_utils.SERIALIZE_TO_TENSORS_NAME:
            _serialize_to_tensors_factory(obj, legacy_name)
    }
  return tensorflow_internals.gather_saveables(obj)


module_names.keep_module_name("tf_objckpt.saveable_object_util",
                              saveable_objects_from_trackable,
                              trackable_has_serialize_to_tensor,
                              TrackableSaveable)
