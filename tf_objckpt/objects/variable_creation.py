"""Variables that trackables track: `add_variable`, `capture_dependencies`.

A variable created for a trackable is tracked by it under a local name; if
a restore is waiting for that name, the variable starts with the
checkpointed value (restore-on-create) and its initializer is never
called. TensorFlow's name for the module of these functions is
`checkpoint`, which re-exports them.
"""

import contextlib
import inspect
from typing import Any, Iterator

from tensorflow.python.framework import dtypes
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor_shape
from tensorflow.python.ops import variable_scope
from tensorflow.python.ops import variable_v1
from tensorflow.python.trackable import base as tf_base

from tf_objckpt.foundation import module_names
from tf_objckpt.foundation import tensorflow_internals
from tf_objckpt.objects import restore_positions


def _new_resource_variable(name,
                           shape,
                           dtype,
                           initializer=None,
                           partition_info=None,
                           **kwargs):
  """Creates a resource variable, never reusing one (unlike get_variable)."""
  dtype = dtypes.as_dtype(dtype)
  static_shape = tensor_shape.as_shape(shape)
  if (type(initializer) is tf_base.CheckpointInitialValueCallable and  # pylint: disable=unidiomatic-typecheck
      isinstance(initializer.checkpoint_position,
                 restore_positions.RestorePosition)):
    # Our value, queued by a TensorFlow owner: check it as ours checks.
    initializer.checkpoint_position.check_initial_value(shape, dtype)
  with ops.init_scope():
    if initializer is None:
      store = variable_scope._get_default_variable_store()  # pylint: disable=protected-access
      initializer, from_value = store._get_default_initializer(  # pylint: disable=protected-access
          name=name,
          shape=static_shape,
          dtype=dtype)
    else:
      from_value = not callable(initializer)
    if from_value:
      if shape is not None:
        raise ValueError(
            f"Variable {name!r} was given both a constant initializer and a "
            "shape. If initializer is a constant, do not specify shape.")
      initial_value = initializer
    else:
      if inspect.isclass(initializer):  # An initializer class: make one.
        initializer = initializer(dtype=dtype)

      shape_list = None if shape is None else static_shape.as_list()
      kwargs_for_initializer = {"dtype": dtype}
      if "partition_info" in inspect.signature(initializer).parameters:
        kwargs_for_initializer["partition_info"] = partition_info

      def initial_value():
        return initializer(shape_list, **kwargs_for_initializer)

    # A full shape is passed on so that a restored initial value of another
    # shape is an error rather than a variable of the wrong shape.
    if shape is not None and static_shape.is_fully_defined():
      kwargs["shape"] = static_shape
    return variable_v1.VariableV1(initial_value=initial_value,
                                  name=name,
                                  dtype=dtype.base_dtype,
                                  use_resource=True,
                                  **kwargs)


def add_variable(trackable: Any,
                 name: str,
                 shape: Any = None,
                 dtype: Any = dtypes.float32,
                 initializer: Any = None,
                 trainable: bool = True) -> Any:
  """Creates a variable tracked by `trackable` as `name`.

  Variable scopes do not influence it. If a restore is waiting for `name`,
  the variable starts with the checkpointed value and `initializer` is never
  called.
  """
  return tensorflow_internals.add_variable_with_custom_getter(
      trackable,
      name=name,
      shape=shape,
      dtype=dtype,
      initializer=initializer,
      getter=_new_resource_variable,
      trainable=trainable)


@contextlib.contextmanager
def capture_dependencies(template: Any) -> Iterator[None]:
  """Tracks variables created in this scope as dependencies of `template`.

  Needs `template.variable_scope` to be active. A variable is tracked under
  its name relative to the template's scope; a nested template that
  captures its own variables becomes a dependency instead of them.
  """
  scope = template.variable_scope.name
  # Passed down to creators below this one, so that a nested template's
  # creator can tell this template to track it.
  this_template = (template, scope)

  def relative(name):
    return name[len(scope) + 1:]

  def creator(next_creator,
              name,
              initial_value,
              trackable_parent=None,
              **kwargs):
    kwargs["trackable_parent"] = this_template
    if name is None or not name.startswith(scope):
      return next_creator(name=name, initial_value=initial_value, **kwargs)
    if trackable_parent:  # Created in a nested template: track that one.
      nested, nested_scope = trackable_parent
      tensorflow_internals.track(template,
                                 nested,
                                 name=relative(nested_scope),
                                 overwrite=True)
      return next_creator(name=name, initial_value=initial_value, **kwargs)

    def create_with_full_name(initializer, **inner_kwargs):
      inner_kwargs.pop("name")  # The scope-relative name; keep the full one.
      return next_creator(initial_value=initializer, name=name, **inner_kwargs)

    return tensorflow_internals.add_variable_with_custom_getter(
        template,
        initializer=initial_value,
        name=relative(name),
        getter=create_with_full_name,
        overwrite=True,
        **kwargs)

  with variable_scope.variable_creator_scope(creator):
    yield


module_names.keep_module_name("tf_objckpt.checkpoint", add_variable,
                              capture_dependencies)
