"""Saveables of values under names: the v1 `Saver`'s variables, and the like.

Name-based saving starts from a list of variables (`op_list_to_dict` names
each as the v1 `Saver` does), or a `{name: value}` dict, and turns each
value into `SaveableObject`s under its name (`validate_and_slice_inputs`,
`saveable_objects_for_op`): variables of any kind, partitioned variables
and their slices, trackables (by their legacy saveables first), and
saveables as they are. Object-based saves use the same conversion for what
an object's saveable factory returns (`saveables_for_attribute`).
"""

from tensorflow.python.eager import context
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor as tensor_lib
from tensorflow.python.ops import ref_variable
from tensorflow.python.ops import resource_variable_ops
from tensorflow.python.ops import variables
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.training.saving import saveable_object as tf_saveable_object
from tensorflow.python.util import nest

from tf_objckpt.foundation import checkpoint_keys as trackable_utils
from tf_objckpt.foundation import identity_containers as object_identity
from tf_objckpt.foundation import module_names
from tf_objckpt.foundation import tensorflow_internals
from tf_objckpt.saveables import trackable_saveables
from tf_objckpt.saveables import variable_saveables

_REF_VARIABLE_OPS = frozenset(["Variable", "VariableV2", "AutoReloadVariable"])
_VARIABLE_OPS = _REF_VARIABLE_OPS | {"VarHandleOp", "ReadVariableOp"}


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
    info = tensorflow_internals.save_slice_info(variable)
    if not info:
      raise ValueError(f"Slices must all be slices: {variable}")
    if full_name is None:
      full_name = info.full_name
    elif full_name != info.full_name:
      raise ValueError(
          f"Slices must all be from the same tensor: {full_name} != "
          f"{info.full_name}")
    if variable.op.type in _REF_VARIABLE_OPS:
      yield variable_saveables.ReferenceVariableSaveable(
          variable, info.spec, name)
    else:
      yield variable_saveables.ResourceVariableSaveable(variable, info.spec,
                                                        name)


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
    raise TypeError("Saveables must be keyed by string names; got name "
                    f"{name!r} for {op!r}.")
  if isinstance(op, tf_saveable_object.SaveableObject):
    yield op
  elif isinstance(op, (list, tuple, variables.PartitionedVariable)):
    yield from _slice_saveables(list(op), name)
  elif (isinstance(op, tf_base.Trackable) and
        not isinstance(op, variables.Variable)):
    factories = trackable_saveables.saveable_objects_from_trackable(
        op, tf1_saver=True)
    for attribute, factory in factories.items():
      if attribute in (trackable_utils.VARIABLE_VALUE_KEY,
                       trackable_utils.SERIALIZE_TO_TENSORS_NAME):
        full_name = name
      else:
        full_name = name + "_" + attribute
      made = factory(full_name) if callable(factory) else factory
      yield from saveable_objects_for_op(made, made.name)
  elif isinstance(op, resource_variable_ops.BaseResourceVariable):
    variable = (tensorflow_internals.graph_element(op)
                if tensorflow_internals.in_graph_mode(op) else op)
    yield variable_saveables.ResourceVariableSaveable(variable, "", name)
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
      yield variable_saveables.ReferenceVariableSaveable(value, "", name)
    else:
      yield variable_saveables.ResourceVariableSaveable(value, "", name)


def _variable_name(var, convert_variable_to_tensor):
  """The graph name a v1 `Saver` uses for an unpartitioned graph variable."""
  if convert_variable_to_tensor:
    if isinstance(var, resource_variable_ops.BaseResourceVariable):
      var = tensorflow_internals.graph_element(var)
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
        var,
        (resource_variable_ops.BaseResourceVariable, ref_variable.RefVariable))
    slice_info = tensorflow_internals.save_slice_info(var)
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
      factories = trackable_saveables.saveable_objects_from_trackable(
          var, tf1_saver=True)
      made = [
          factory() if callable(factory) else factory
          for factory in factories.values()
      ]
      names_to_saveables.update(op_list_to_dict(made))
    elif not tensorflow_internals.in_graph_mode(var, default=True):
      if not isinstance(var, resource_variable_ops.BaseResourceVariable):
        raise ValueError(
            "Can only save/restore ResourceVariables when eager execution is "
            f"enabled. Got type: {type(var)}.")
      shared_name = tensorflow_internals.shared_name(var)
      existing = names_to_saveables.setdefault(shared_name, var)
      if existing is not var:
        raise ValueError(
            "Two different ResourceVariable objects with the same shared_name "
            f"'{shared_name}' were passed to the Saver; they were likely "
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


def saveables_for_attribute(factory,
                            key,
                            attribute=None,
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


module_names.keep_module_name("tf_objckpt.saveable_object_util",
                              op_list_to_dict, saveable_objects_for_op,
                              validate_and_slice_inputs)
