"""Identity containers against TensorFlow's `object_identity`, call by call.

Variables and numpy arrays overload `==` and cannot be hashed, so the
restore walk and the savers keep them in containers keyed on identity. The
same calls on TensorFlow's containers and on ours, with such objects (and
two equal-looking ones), must see the same members; the weak containers
must not keep their objects alive. Once a key is gone, our weak dictionary
leaves it out, where TensorFlow's still counts it and fails to iterate.

Covers: tf_objckpt.object_identity, tf_objckpt.foundation.identity_containers.
"""

import gc

import numpy as np
import tensorflow as tf
from tensorflow.python.util import object_identity as tf_object_identity

import testlib as tl
from tf_objckpt import object_identity

_MODULES = {"tf": tf_object_identity, "ours": object_identity}


def _objects():
  """Unhashable objects with overloaded `==`; equal in pairs."""
  return [tf.Variable(1.), tf.Variable(1.), np.zeros(2), _Unhashable(0)]


class _Unhashable:
  """An object that, like a variable, overloads `==` and has no hash."""

  __hash__ = None

  def __init__(self, value):
    self.value = value

  def __eq__(self, other):
    return True


def _unwrapped(members):
  """The objects in `members`.

  TensorFlow's `ObjectIdentitySet.intersection` returns a plain set of its
  identity wrappers, ours an `ObjectIdentitySet`: both hold the same objects.
  """
  return [getattr(member, "unwrapped", member) for member in members]


def _indices(members, objects):
  """Which of `objects` are in `members`, by identity, sorted."""
  return sorted(i for i, obj in enumerate(objects)
                if any(obj is member for member in members))


def _dictionary_scenario(impl):
  module = _MODULES[impl]
  objects = _objects()
  seen = []
  mapping = module.ObjectIdentityDictionary()
  for i, obj in enumerate(objects[:3]):
    mapping[obj] = i
  mapping[objects[0]] = 10  # Replaces, as the key is the same object.
  seen.append(
      (len(mapping), _indices(mapping,
                              objects), [obj in mapping for obj in objects]))
  seen.append([mapping[obj] for obj in objects[:3]])
  del mapping[objects[1]]
  seen.append((len(mapping), _indices(mapping, objects),
               tl.outcome(mapping.__getitem__, objects[1]).name,
               tl.outcome(mapping.__delitem__,
                          objects[3]).name, mapping.get(objects[3], "default")))
  return seen


def _set_scenario(impl):
  module = _MODULES[impl]
  objects = _objects()
  seen = []
  members = module.ObjectIdentitySet(objects[:2])
  members.add(objects[2])
  members.add(objects[0])
  seen.append(
      (len(members), _indices(members,
                              objects), [obj in members for obj in objects]))
  members.discard(objects[1])
  members.discard(objects[3])  # Not a member: nothing happens.
  seen.append(_indices(members, objects))
  members.update(objects[3:])
  seen.append(_indices(members, objects))
  seen.append(_indices(_unwrapped(members.intersection(objects[2:])), objects))
  seen.append(_indices(members.difference(objects[:1]), objects))
  seen.append(isinstance(members.difference([]), module.ObjectIdentitySet))
  members.clear()
  seen.append(len(members))
  return seen


def _weak_scenario(impl):
  """What the weak containers hold once an object is gone."""
  module = _MODULES[impl]
  kept, dropped = _Unhashable(1), _Unhashable(2)
  mapping = module.ObjectIdentityWeakKeyDictionary()
  members = module.ObjectIdentityWeakSet()
  for obj in (kept, dropped):
    mapping[obj] = obj.value
    members.add(obj)
  before = (len(mapping), len(members))
  del dropped, obj
  gc.collect()
  listed = tl.outcome(lambda: [(key is kept, mapping[key]) for key in mapping])
  return {
      "before": before,
      "set": (len(members), _indices(members, [kept])),
      "kept": (kept in members, kept in mapping, mapping[kept]),
      "dictionary": (len(mapping), listed.name, listed.result)
  }


def test_dictionaries_key_on_identity_like_tensorflows():
  assert tl.agreed(_dictionary_scenario)[0][:2] == (3, [0, 1, 2])


def test_sets_hold_members_by_identity_like_tensorflows():
  assert tl.agreed(_set_scenario)[0][:2] == (3, [0, 1, 2])


def test_weak_containers_let_their_objects_go():
  """Ours drops a dead key; TensorFlow's dictionary fails to iterate then."""
  results = tl.by_impl(_weak_scenario)
  for impl in tl.IMPLS:
    assert results[impl]["before"] == (2, 2), impl
    assert results[impl]["set"] == (1, [0]), impl
    assert results[impl]["kept"] == (True, True, 1), impl
  assert results["ours"]["dictionary"] == (1, "ok", [(True, 1)])
  assert results["tf"]["dictionary"] == (2, "KeyError", None)
