"""`AutoTrackable`: dependencies declared by attribute assignment.

TensorFlow's name for this module is `tracking`, which re-exports it.
"""

from tf_objckpt.foundation import module_names
# The wrappers of lists, dicts and tuples register themselves with
# `wrapping` when imported: attribute assignment needs every one of them.
from tf_objckpt.objects import dicts  # noqa: F401
from tf_objckpt.objects import lists  # noqa: F401
from tf_objckpt.objects import trackable
from tf_objckpt.objects import tuples  # noqa: F401
from tf_objckpt.objects import wrapping


class AutoTrackable(trackable.Trackable):
  """A trackable that depends on whatever trackables its attributes hold.

  `obj.v = tf.Variable(1.)` makes the variable a checkpoint dependency of
  `obj` named "v"; assigning another object to `obj.v` replaces it, and
  `del obj.v` removes it. Lists, dicts and tuples are wrapped (see
  `data_structures`) so that the trackables inside them are dependencies
  too, named as TensorFlow names them. Any TensorFlow trackable (variables,
  `tf.Module`s, Keras objects) can be held, and TensorFlow objects in turn
  track an `AutoTrackable`, since it is a TensorFlow `Trackable`.

  `data_structures.NoDependency(value)` stores `value` without a dependency,
  as does assignment while `_setattr_tracking` is False (see
  `trackable.no_automatic_dependency_tracking`).
  """

  def __setattr__(self, name, value):
    """Stores `value`, tracking it when it is (or contains) a trackable."""
    try:
      if getattr(self, name) is value:
        return  # `self.x = self.x` must not re-wrap or re-track.
    except AttributeError:
      pass
    if getattr(self, "_self_setattr_tracking", True):
      value = wrapping.sticky_attribute_assignment(trackable=self,
                                                   name=name,
                                                   value=value)
    super().__setattr__(name, value)

  def __delattr__(self, name):
    """Deletes the attribute and the dependency of the same name."""
    self._delete_tracking(name)
    super().__delattr__(name)

  def _no_dependency(self, value):
    """Marks `value` so that storing it adds no dependency."""
    return wrapping.NoDependency(value)

  def _delete_tracking(self, name):
    """Removes the dependency named `name`, if there is one."""
    self._maybe_initialize_trackable()
    names = self._self_unconditional_dependency_names
    if name not in names:
      return
    del names[name]
    references = self._unconditional_checkpoint_dependencies
    for index, reference in enumerate(references):
      if reference[0] == name:
        del references[index]
        break

  def _trackable_children(self, save_type="checkpoint", cache=None, **kwargs):
    """Returns `{name: dependency}` in the order they were first tracked.

    The same for every `save_type`: unlike TensorFlow's AutoTrackable, no
    `tf.function` attributes are collected or traced for SavedModels.
    """
    return super()._trackable_children(save_type, cache=cache, **kwargs)

  def _add_trackable_child(self, name, value):
    """Adds a dependency as an attribute (used by SavedModel loading)."""
    self.__setattr__(name, value)


module_names.keep_module_name("tf_objckpt.tracking", AutoTrackable)
