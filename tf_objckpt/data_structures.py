"""Trackable containers: the list, dict and tuple wrappers.

When a plain `list`, `dict` or `tuple` is assigned to an attribute of an
`AutoTrackable`, it is replaced by one of the wrappers named here. The wrapper
behaves like the original container, and in addition declares a checkpoint
dependency on every trackable it holds: list and tuple elements are named by
their index ("0", "1", ...), dict values by their key, namedtuple elements by
both field name and index. These are the names TensorFlow gives, so the
checkpoints of both libraries have the same keys.

Restoring into an object graph relies on the same names pointing at the same
objects when the graph is rebuilt. A container mutated in a way that breaks
this (replacing, removing or reordering trackable elements, changing the
wrapped container behind the wrapper's back, using non-string dict keys for
trackables) still works as a container, but refuses to be saved with a
`ValueError`.

The classes live in `tf_objckpt.objects` (`wrapping`, `structure_base`,
`lists`, `dicts`, `tuples`); this module gives them TensorFlow's names.
Importing it also registers every wrapper with `wrap_or_unwrap`.
"""

# TensorFlow's names for the containers and their helpers, which keep this
# module, where they were defined before they moved to `objects`, as their
# `__module__` (`foundation.module_names`): pickles name them here as before,
# and loading one imports this module, which registers every wrapper.
# pylint: disable=unused-import
from tf_objckpt.objects.dicts import _DictWrapper
from tf_objckpt.objects.dicts import Mapping
from tf_objckpt.objects.lists import List
from tf_objckpt.objects.lists import ListWrapper
from tf_objckpt.objects.lists import set_list_item
from tf_objckpt.objects.lists import set_tuple_item
from tf_objckpt.objects.structure_base import TrackableDataStructure
from tf_objckpt.objects.tuples import _TupleWrapper
from tf_objckpt.objects.wrapping import NoDependency
from tf_objckpt.objects.wrapping import sticky_attribute_assignment
from tf_objckpt.objects.wrapping import wrap_or_unwrap
# pylint: enable=unused-import
