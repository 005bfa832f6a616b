"""Turning variables and trackables into `SaveableObject`s.

Two families of callers use this module:
- name-based saving (the v1 `Saver`), which starts from a list or dict of
  variables (`op_list_to_dict`, `validate_and_slice_inputs`,
  `saveable_objects_for_op`);
- object-based saving, which asks each trackable for its saveables
  (`saveable_objects_from_trackable`).
"""

import functools
import sys

from tensorflow.python.checkpoint import saveable_compat
from tensorflow.python.eager import context
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor as tensor_lib
from tensorflow.python.ops import array_ops
from tensorflow.python.ops import gen_control_flow_ops
from tensorflow.python.ops import gen_resource_variable_ops
from tensorflow.python.ops import ref_variable
from tensorflow.python.ops import resource_variable_ops
from tensorflow.python.ops import state_ops
from tensorflow.python.ops import variables
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.trackable import base_delegate
from tensorflow.python.trackable import python_state
from tensorflow.python.training.saving import saveable_object as tf_saveable_object
from tensorflow.python.training.saving import saveable_object_util as tf_saveable_object_util
from tensorflow.python.types import core as core_types
from tensorflow.python.util import nest

from tf_objckpt.engine import variable_values
from tf_objckpt.foundation import identity_containers as object_identity
from tf_objckpt import saveable_object
from tf_objckpt.foundation import checkpoint_keys as trackable_utils
# TensorFlow's name here for the engine's function.
from tf_objckpt.engine.variable_values import set_cpu0  # pylint: disable=unused-import

VARIABLE_VALUE_KEY = trackable_utils.VARIABLE_VALUE_KEY
_REF_VARIABLE_OPS = frozenset(["Variable", "VariableV2", "AutoReloadVariable"])
_VARIABLE_OPS = _REF_VARIABLE_OPS | {"VarHandleOp", "ReadVariableOp"}


# TensorFlow's SavedModel helpers: they work on any saveables and trackables.
create_saveable_object = tf_saveable_object_util.create_saveable_object
is_factory_for_restored_saveable_object = (
    tf_saveable_object_util.is_factory_for_restored_saveable_object)
recreate_saveable_objects = tf_saveable_object_util.recreate_saveable_objects
RestoredSaveableObject = tf_saveable_object_util.RestoredSaveableObject
saveable_object_to_restore_fn = (
    tf_saveable_object_util.saveable_object_to_restore_fn)
saveable_object_to_tensor_dict = (
    tf_saveable_object_util.saveable_object_to_tensor_dict)
SaveableCompatibilityConverter = (
    tf_saveable_object_util.SaveableCompatibilityConverter)
serialized_tensors_to_saveable_cache = (
    tf_saveable_object_util.serialized_tensors_to_saveable_cache)
validate_saveables_for_saved_model = (
    tf_saveable_object_util.validate_saveables_for_saved_model)


class ReferenceVariableSaveable(saveable_object.SaveableObject):
  """Saves and restores a TF1 reference variable (`VariableV2`)."""

  def __init__(self, var, slice_spec, name):
    spec = saveable_object.SaveSpec(var, slice_spec, name, dtype=var.dtype)
    super().__init__(var, [spec], name)

  def restore(self, restored_tensors, restored_shapes=None):
    value = restored_tensors[0]
    if restored_shapes is not None:
      value = array_ops.reshape(value, restored_shapes[0])
    return state_ops.assign(
        self.op, value,
        validate_shape=(restored_shapes is None and
                        self.op.get_shape().is_fully_defined()))


class ResourceVariableSaveable(saveable_object.SaveableObject):
  """Saves and restores a resource variable, or a read of one (graph mode)."""

  def __init__(self, var, slice_spec, name):
    self._var_device = var.device
    self._var_shape = var.shape
    if isinstance(var, tensor_lib.Tensor):
      self.handle_op = var.op.inputs[0]
      tensor = var
    elif resource_variable_ops.is_resource_variable(var):
      self.handle_op = var.handle
      tensor = functools.partial(_read_slice_to_cpu, var)
    else:
      raise ValueError(
          "Expected a resource variable or a read of one to save as "
          f"{name!r}, got {var!r}.")
    spec = saveable_object.SaveSpec(
        tensor, slice_spec, name, dtype=var.dtype, device=var.device)
    super().__init__(var, [spec], name)

  def restore(self, restored_tensors, restored_shapes=None):
    value = restored_tensors[0]
    if restored_shapes is not None:
      value = array_ops.reshape(value, restored_shapes[0])
    if not context.executing_eagerly():
      # A copy on the variable's device, as in TensorFlow's graphs.
      with ops.device(self._var_device):
        value = array_ops.identity(value)
    return assign_checked(self.handle_op, self._var_shape, self._var_device,
                          value, self.name)


def _read_slice_to_cpu(var):
  """Reads a variable given to the v1 `Saver` whole (partitioned slices).

  When graph building, with TensorFlow's ops: a no-copy read in a "Read"
  scope and copies on the variable's device and on the CPU.
  """
  if context.executing_eagerly():
    return variable_values.read_to_cpu(var, var.device)
  with ops.device(var.device):
    value = var.read_value_no_copy()
    with ops.device("/device:CPU:0"):
      return array_ops.identity(value)


def assign_checked(handle, variable_shape, device, value, name):
  """Assigns `value` to a variable handle after checking shapes agree.

  Raises:
    ValueError: naming the checkpoint key when the shapes differ.
  """
  if not variable_shape.is_compatible_with(value.shape):
    raise ValueError(
        f"Received incompatible tensor with shape {value.shape} when "
        f"attempting to restore variable with shape {variable_shape} "
        f"(checkpoint key {name!r}).")
  if context.executing_eagerly():  # Runs on the variable's device anyway.
    return gen_resource_variable_ops.assign_variable_op(handle, value)
  with ops.device(device):
    return gen_resource_variable_ops.assign_variable_op(handle, value)


def _comes_from_variable(value) -> bool:
  return (isinstance(value, tensor_lib.Tensor) and
          value.op.type in _VARIABLE_OPS)


def _slice_saveables(slices, name):
  """Yields one saveable per slice of a partitioned variable."""
  full_name = None
  for variable in slices:
    if isinstance(variable, tf_saveable_object.SaveableObject):
      yield variable
      continue
    if not isinstance(variable, variables.Variable):
      raise ValueError(f"Slices must all be Variables: {variable}")
    info = variable._save_slice_info  # pylint: disable=protected-access
    if not info:
      raise ValueError(f"Slices must all be slices: {variable}")
    if full_name is None:
      full_name = info.full_name
    elif full_name != info.full_name:
      raise ValueError(
          f"Slices must all be from the same tensor: {full_name} != "
          f"{info.full_name}")
    if variable.op.type in _REF_VARIABLE_OPS:
      yield ReferenceVariableSaveable(variable, info.spec, name)
    else:
      yield ResourceVariableSaveable(variable, info.spec, name)


def saveable_objects_for_op(op, name):
  """Yields the `SaveableObject`s that save `op` under `name`.

  Args:
    op: A variable, a partitioned variable or list of slices, a trackable,
      or a `SaveableObject`.
    name: The checkpoint key (or key prefix) to use.

  Raises:
    TypeError: If `name` is not a string or `op` is not a variable.
    ValueError: If `op` cannot be saved.
  """
  if not isinstance(name, str):
    raise TypeError(
        "Saveables must be keyed by string names; got name "
        f"{name!r} for {op!r}.")
  if isinstance(op, tf_saveable_object.SaveableObject):
    yield op
  elif isinstance(op, (list, tuple, variables.PartitionedVariable)):
    yield from _slice_saveables(list(op), name)
  elif (isinstance(op, tf_base.Trackable) and
        not isinstance(op, variables.Variable)):
    for attribute, factory in saveable_objects_from_trackable(
        op, tf1_saver=True).items():
      if attribute in (VARIABLE_VALUE_KEY,
                       trackable_utils.SERIALIZE_TO_TENSORS_NAME):
        full_name = name
      else:
        full_name = name + "_" + attribute
      made = factory(full_name) if callable(factory) else factory
      yield from saveable_objects_for_op(made, made.name)
  elif isinstance(op, resource_variable_ops.BaseResourceVariable):
    # pylint: disable=protected-access
    variable = op._graph_element if op._in_graph_mode else op
    yield ResourceVariableSaveable(variable, "", name)
  else:
    if context.executing_eagerly():
      raise ValueError(
          "Can only save/restore ResourceVariables when executing eagerly, "
          f"got type: {type(op)}, for {name!r}.")
    value = ops.convert_to_tensor(op, as_ref=True)
    if not _comes_from_variable(value):
      raise TypeError(
          "names_to_saveables must be a dict mapping string names to "
          f"Tensors/Variables. Not a variable: {value!r}, given as {name!r}.")
    if value.op.type in _REF_VARIABLE_OPS:
      yield ReferenceVariableSaveable(value, "", name)
    else:
      yield ResourceVariableSaveable(value, "", name)


def _variable_name(var, convert_variable_to_tensor):
  """The graph name a v1 `Saver` uses for an unpartitioned graph variable."""
  if convert_variable_to_tensor:
    if isinstance(var, resource_variable_ops.BaseResourceVariable):
      var = var._graph_element  # pylint: disable=protected-access
    else:
      var = ops.convert_to_tensor(var, as_ref=True)
    if not _comes_from_variable(var):
      raise TypeError(f"Variable to save is not a Variable: {var}")
  if var.op.type == "ReadVariableOp":
    return var.op.inputs[0].op.name, var
  return var.op.name, var


def op_list_to_dict(op_list, convert_variable_to_tensor=True):
  """Maps each variable in `op_list` to the name a v1 `Saver` saves it under.

  Slices of one partitioned variable are grouped in a list under the full
  variable name; trackables contribute their own saveables.

  Args:
    op_list: A (nested) list, tuple or set of variables and saveables.
    convert_variable_to_tensor: Whether graph variables are replaced by the
      tensor of their variable op.

  Returns:
    A dict from checkpoint name to a variable, list of slices or saveable.

  Raises:
    TypeError: If `op_list` is not a collection or holds a non-variable.
    ValueError: If two values would be saved under one name.
  """
  if not isinstance(op_list, (list, tuple, set)):
    raise TypeError("Variables to save should be passed in a dict or a "
                    f"list. Got {op_list}")
  names_to_saveables = {}
  for var in sorted(nest.flatten(list(op_list)), key=lambda v: v.name):
    is_variable = isinstance(
        var, (resource_variable_ops.BaseResourceVariable,
              ref_variable.RefVariable))
    slice_info = getattr(var, "_save_slice_info", None)
    if isinstance(var, tf_saveable_object.SaveableObject):
      names_to_saveables[var.name] = var
    elif isinstance(var, variables.PartitionedVariable):
      _add_unique(names_to_saveables, var.name, var)
    elif isinstance(var, variables.Variable) and slice_info:
      group = names_to_saveables.setdefault(slice_info.full_name, [])
      if not isinstance(group, list):
        raise ValueError("Mixing slices and non-slices with the same name: "
                         f"{slice_info.full_name}")
      group.append(var)
    elif isinstance(var, tf_base.Trackable) and not is_variable:
      made = [factory() if callable(factory) else factory
              for factory in saveable_objects_from_trackable(
                  var, tf1_saver=True).values()]
      names_to_saveables.update(op_list_to_dict(made))
    elif not getattr(var, "_in_graph_mode", True):
      if not isinstance(var, resource_variable_ops.BaseResourceVariable):
        raise ValueError(
            "Can only save/restore ResourceVariables when eager execution is "
            f"enabled. Got type: {type(var)}.")
      # pylint: disable=protected-access
      existing = names_to_saveables.setdefault(var._shared_name, var)
      if existing is not var:
        raise ValueError(
            "Two different ResourceVariable objects with the same shared_name "
            f"'{var._shared_name}' were passed to the Saver; they were likely "
            "created in different graphs and cannot be saved together.")
    else:
      name, var = _variable_name(var, convert_variable_to_tensor)
      _add_unique(names_to_saveables, name, var)
  return names_to_saveables


def _add_unique(names_to_saveables, name, value):
  if name in names_to_saveables:
    raise ValueError(f"At least two variables have the same name: {name}")
  names_to_saveables[name] = value


def validate_and_slice_inputs(names_to_saveables):
  """Converts a name -> variable dict into a flat list of saveables.

  Raises:
    TypeError: If a name is not a string or a value is not saveable.
    ValueError: If the same state would be saved under two names.
  """
  saveables = []
  seen_ops = object_identity.ObjectIdentitySet()
  for name, op in sorted(names_to_saveables.items(), key=lambda x: x[0]):
    for saveable in saveable_objects_for_op(op, name):
      if saveable.op is not None and saveable.op in seen_ops:
        raise ValueError("The same saveable will be restored with two names: "
                         f"{saveable.name}")
      saveables.append(saveable)
      seen_ops.add(saveable.op)
  return saveables


class TrackableSaveable(saveable_object.SaveableObject):
  """Adapts a trackable's `_serialize_to_tensors` to a `SaveableObject`.

  The spec names are the checkpoint keys (`name` + escaped local name); the
  local names become the object's attribute names in the object graph.
  """

  def __init__(self, obj, specs, name, local_names, prefix="",
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
    result = self._restore(
        dict(zip(self._local_names, restored_tensors))) if self.specs else None
    if result is None and not context.executing_eagerly():
      return gen_control_flow_ops.no_op()
    return result

  def _restore(self, tensors):
    restore = self._trackable._restore_from_tensors  # pylint: disable=protected-access
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


class VariableSaveable(ResourceVariableSaveable):
  """The saveable of a plain resource variable in an object-based checkpoint.

  Equivalent to what the variable's `_serialize_to_tensors` describes (one
  value under VARIABLE_VALUE) but built directly: this runs once per variable
  per save and restore, so it skips the generic path's Python work.
  """

  # pylint: disable=super-init-not-called
  def __init__(self, var, name=""):
    device = var.device
    self.op = var
    self.name = name
    self.specs = [variable_values.VariableValueSpec(
        var, name + VARIABLE_VALUE_KEY, device)]
    self.handle_op = var.handle
    self._var_device = device
    self._var_shape = var.shape

  def restore(self, restored_tensors, restored_shapes=None):
    """Assigns the value as read: no copy op, unlike v1 `Saver` graphs."""
    del restored_shapes  # Whole variables only.
    return assign_checked(self.handle_op, self._var_shape, self._var_device,
                          restored_tensors[0], self.specs[0].name)

  def get_proto_names_and_checkpoint_keys(self):
    return [(VARIABLE_VALUE_KEY, self.specs[0].name)]


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
    result = (issubclass(cls, base) and
              cls._serialize_to_tensors is base._serialize_to_tensors and  # pylint: disable=protected-access
              cls._restore_from_tensors is base._restore_from_tensors)  # pylint: disable=protected-access
    _DEFAULT_SAVING_BY_CLASS[cls] = result
  return result and not _overrides_serialization(obj)


# The Keras 3 module whose `Variable` wraps a `tf.Variable` (TensorFlow
# backend). Looked up, never imported: its variables exist only once it is.
_KERAS3_BACKEND_MODULE = "keras.src.backend.tensorflow.core"
_FORWARDS_SAVING_BY_CLASS: dict[type, bool] = {}


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
  if not _forwards_saving(type(obj)) or _overrides_serialization(obj):
    return None
  wrapped = obj.__dict__.get("_value")  # None until Keras initializes it.
  if wrapped is not None and has_default_variable_saving(wrapped):
    return wrapped
  return None


def _forwards_saving(cls) -> bool:
  """Whether `cls` keeps the Keras 3 variable's forwarding save logic."""
  result = _FORWARDS_SAVING_BY_CLASS.get(cls)
  if result is None:
    keras_backend = sys.modules.get(_KERAS3_BACKEND_MODULE)
    keras_variable = getattr(keras_backend, "Variable", None)
    result = (keras_variable is not None and
              issubclass(cls, keras_variable) and
              cls._serialize_to_tensors is keras_variable._serialize_to_tensors and  # pylint: disable=protected-access
              cls._restore_from_tensors is keras_variable._restore_from_tensors)  # pylint: disable=protected-access
    _FORWARDS_SAVING_BY_CLASS[cls] = result
  return result


def _overrides_serialization(obj):
  """Whether `obj` sets its own (de)serialization methods on the instance."""
  attributes = getattr(obj, "__dict__", None)
  return attributes is not None and (
      "_serialize_to_tensors" in attributes or
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
        specs.append(saveable_object.SaveSpec(tensor, slice_spec, key))
  return specs, local_names


def _serialize_to_tensors_factory(obj, legacy_name=""):
  """The saveable factory of a trackable implementing `_serialize_to_tensors`.

  `legacy_name` (see `saveable_compat.legacy_saveable_name`; "ITERATOR" for
  dataset iterators) continues the key prefix, keeping the keys the object
  had when it saved through a named SaveableObject.
  """

  def make_saveable(name="", call_with_mapped_captures=None):
    name += legacy_name
    save = obj._serialize_to_tensors  # pylint: disable=protected-access
    if (call_with_mapped_captures is not None and
        isinstance(save, core_types.ConcreteFunction)):
      tensors = call_with_mapped_captures(save, [])
    else:
      tensors = save()
    specs, local_names = _serialized_tensor_specs(tensors, name)
    return TrackableSaveable(obj, specs, name, local_names,
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
      return trackable_has_serialize_to_tensor(obj._trackable)  # pylint: disable=protected-access
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
    return {trackable_utils.SERIALIZE_TO_TENSORS_NAME:
                functools.partial(VariableSaveable, variable)}
  if isinstance(obj, python_state.PythonState):
    return {python_state.PYTHON_STATE: functools.partial(
        saveable_object.PythonStringStateSaveable,
        state_callback=obj.serialize, restore_callback=obj.deserialize)}
  if tf1_saver:
    legacy = obj._gather_saveables_for_checkpoint()  # pylint: disable=protected-access
    if legacy:
      return legacy
  if trackable_has_serialize_to_tensor(obj):
    # The v1 Saver ignores legacy names, as TensorFlow's does.
    legacy_name = "" if tf1_saver else (
        saveable_compat.get_saveable_name(obj) or "")
    return {trackable_utils.SERIALIZE_TO_TENSORS_NAME:
                _serialize_to_tensors_factory(obj, legacy_name)}
  return obj._gather_saveables_for_checkpoint()  # pylint: disable=protected-access


def saveables_for_attribute(factory, key, attribute=None,
                            call_with_mapped_captures=None):
  """Calls a saveable factory and returns its saveables as a tuple.

  Args:
    factory: The attribute's saveable factory (or saveable).
    key: The attribute's checkpoint key.
    attribute: The attribute's name.
    call_with_mapped_captures: Optional function calling a restored
      object's `ConcreteFunction` `_serialize_to_tensors` with its captures
      mapped into another graph (SavedModel exports).

  Raises:
    AssertionError: If a saveable's name does not contain `key` (it would be
      written under a key the object graph does not mention).
  """
  if not callable(factory):
    made = factory
  elif (call_with_mapped_captures is not None and
        attribute == trackable_utils.SERIALIZE_TO_TENSORS_NAME):
    made = factory(name=key,
                   call_with_mapped_captures=call_with_mapped_captures)
  else:
    made = factory(name=key)
  if isinstance(made, tf_saveable_object.SaveableObject):
    saveables = (made,)
  else:
    saveables = tuple(saveable_objects_for_op(made, key))
  for saveable in saveables:
    if key not in saveable.name:
      raise AssertionError(
          f"The object produced a SaveableObject with name "
          f"{saveable.name!r} for attribute {attribute!r}. Expected a name "
          f"containing {key!r}: it would be written under a key the object "
          f"graph does not mention.")
  return saveables
