"""Differential tests of tf_objckpt.data_structures against TensorFlow.

Every scenario is a list of steps run once with TensorFlow's AutoTrackable
and data structures and once with ours, on the same variables. After each
step we record the exception the step raised (if any) and the dependency
tree of the root (child names in order, the wrapper classes, the variables
reached, and the exception `_trackable_children` raises for unsaveable
containers). The two recordings must be equal.

Covers: tf_objckpt.data_structures, tf_objckpt.objects.lists,
tf_objckpt.objects.dicts, tf_objckpt.objects.tuples,
tf_objckpt.objects.wrapping, tf_objckpt.objects.structure_base,
tf_objckpt.tracking, tf_objckpt.objects.auto_trackable.
"""

import collections
import copy

import pytest
import tensorflow as tf
from tensorflow.python.trackable import autotrackable as tf_autotrackable
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.trackable import data_structures as tf_ds

import testlib as tl
from tf_objckpt import data_structures as ds
from tf_objckpt import tracking

Point = collections.namedtuple("Point", ["x", "y"])


class OddTuple(collections.namedtuple("OddTuple", ["a", "b"])):
  """A namedtuple whose constructor does not take its fields."""

  def __new__(cls, pair):
    return super().__new__(cls, *pair)


_VARIABLES = [tf.Variable(float(i), name=f"v{i}") for i in range(5)]


class Env:
  """What a scenario step sees: one implementation and shared variables."""

  def __init__(self, impl):
    lib = tl.IMPLS[impl]
    self.AutoTrackable = lib.AutoTrackable  # pylint: disable=invalid-name
    self.ds = lib.data_structures
    self.v = _VARIABLES
    self.root = self.AutoTrackable()
    self.scratch = {}


def _label(value):
  """A label equal across implementations for the same leaf object."""
  for index, variable in enumerate(_VARIABLES):
    if value is variable:
      return f"v{index}"
  return type(value).__name__


def tree(obj, depth=0):
  """The ordered dependency tree below `obj`, or the error listing it."""
  assert depth < 20, "cycle"
  children = tl.outcome(obj._trackable_children)  # pylint: disable=protected-access
  if children.error is not None:
    return ("raises", children.name)
  described = []
  for name, child in children.result.items():
    if isinstance(child, tf.Variable):
      described.append((name, _label(child)))
    else:
      described.append((name, type(child).__name__, tree(child, depth + 1)))
  return described


def run(scenario, impl):
  """Runs the steps; returns per step (error raised, root's tree)."""
  env = Env(impl)
  observations = []
  for step in scenario:
    result, error = tl.outcome(step, env)
    if error is not None:
      error = (type(error).__name__, isinstance(error, ValueError),
               isinstance(error, TypeError))
    observations.append((error, _describe_result(result), tree(env.root)))
  return observations


def _describe_result(result):
  """Step results are compared by type name and builtin-type membership."""
  if result is None:
    return None
  if isinstance(result, (bool, int, str, float)):
    return result
  return (type(result).__name__, isinstance(result,
                                            list), isinstance(result, dict),
          isinstance(result, tuple), isinstance(result, tf_base.Trackable))


def _set(name, make):
  """A step assigning `make(env)` to `env.root.<name>`."""

  def step(env):
    setattr(env.root, name, make(env))

  return step


SCENARIOS = {
    "nested_structures": [
        _set("a", lambda e: e.v[0]),
        _set(
            "l", lambda e:
            [e.v[1], [e.v[2], {
                "k": e.v[3]
            }], (e.v[4], 1), 5, None, [], {}]),
        _set(
            "d", lambda e: {
                "x": e.v[0],
                "y": [e.v[1]],
                "z": (e.v[2],),
                "n": 3,
                "e": []
            }),
        _set("t", lambda e: (e.v[0], (e.v[1],), [], (1, 2), "s")),
        _set("p", lambda e: Point(x=e.v[3], y=[e.v[4]])),
        _set("od", lambda e: collections.OrderedDict(b=e.v[1], a=e.v[2])),
        lambda e: type(e.root.l[1][1]).__name__,
        lambda e: e.root.l[2],
        lambda e: e.root.t[3],
        lambda e: e.root.p,
        lambda e: e.root.p.x is e.v[3],
    ],
    "plain_values_untracked": [
        _set("i", lambda e: 1),
        _set("s", lambda e: "text"),
        _set("t", lambda e: (1, (2, 3), "x")),
        _set("c", lambda e: collections.Counter(a=1)),
        lambda e: e.root.t,
        lambda e: e.root.c,
        _set("empty_tuple", lambda e: ()),
        lambda e: e.root.empty_tuple,
    ],
    "attribute_reassign_and_delete": [
        _set("x", lambda e: e.v[0]),
        _set("x", lambda e: e.v[1]),
        _set("y", lambda e: e.v[2]),
        _set("x", lambda e: 3),  # A non-trackable keeps the old dependency.
        lambda e: delattr(e.root, "y"),
        lambda e: delattr(e.root, "x"),
        lambda e: delattr(e.root, "missing"),
        _set("x", lambda e: [e.v[0]]),
        lambda e: setattr(e.root, "x", e.root.x),  # Self-assignment no-op.
        lambda e: e.root.x,
    ],
    "no_dependency": [
        _set("n", lambda e: e.ds.NoDependency(e.v[0])),
        _set("nl", lambda e: e.ds.NoDependency([e.v[1]])),
        _set("nd", lambda e: e.ds.NoDependency({"a": e.v[1]})),
        lambda e: e.root.nl,
        lambda e: e.root.nd,
        _set(
            "l", lambda e:
            [e.ds.NoDependency(e.v[0]), e.v[1],
             e.ds.NoDependency([e.v[2]])]),
        lambda e: e.root.l[2],
        _set("d", lambda e: {
            "a": e.ds.NoDependency(e.v[0]),
            "b": e.v[1]
        }),
        lambda e: e.root.d["a"] is e.v[0],
        _set("t", lambda e: (e.ds.NoDependency(e.v[0]), e.v[1])),
        lambda e: e.root.t[0] is e.v[0],
        _set("t2", lambda e: (e.ds.NoDependency(1), 2)),
        lambda e: e.root.t2,
        lambda e: e.root._no_dependency(e.v[0]).value is e.v[0],
    ],
    "setattr_tracking_disabled": [
        lambda e: setattr(e.root, "_setattr_tracking", False),
        _set("v", lambda e: e.v[0]),
        _set("l", lambda e: [e.v[1]]),
        lambda e: e.root.l,
        lambda e: setattr(e.root, "_setattr_tracking", True),
        _set("w", lambda e: e.v[2]),
    ],
    "list_append_only_ops": [
        _set("l", lambda e: [e.v[0]]),
        lambda e: e.root.l.append(e.v[1]),
        lambda e: e.root.l.extend([e.v[2], 7]),
        lambda e: e.root.l.__iadd__([e.v[3]]),
        lambda e: e.root.l.__imul__(2),
        lambda e: len(e.root.l),
        lambda e: e.root.l + [1],
        lambda e: [1] + e.root.l,
        lambda e: e.root.l * 2,
        lambda e: e.root.l == list(e.root.l),
        lambda e: e.root.l.index(e.v[2]),
        lambda e: e.root.l.count(7),
        lambda e: e.v[1] in e.root.l,
        lambda e: hash(e.root.l),
    ],
    "list_setitem_on_trackable": [
        _set("l", lambda e: [e.v[0], 1]),
        lambda e: e.root.l.__setitem__(0, e.v[1]),
    ],
    "list_setitem_on_plain_value": [
        _set("l", lambda e: [e.v[0], 1]),
        lambda e: e.root.l.__setitem__(1, e.v[1]),
        lambda e: e.root.l.__setitem__(1, [e.v[2]]),
    ],
    "list_negative_index_name": [
        _set("l", lambda e: [1, 2]),
        lambda e: e.root.l.__setitem__(-1, e.v[0]),
        lambda e: e.root.l.__setitem__(5, e.v[0]),
    ],
    "list_slice_assignment_plain": [
        _set("l", lambda e: [1, 2]),
        lambda e: e.root.l.__setitem__(slice(0, 1), [e.v[0]]),
        lambda e: e.root.l.__setitem__(slice(1, 3), [e.v[1], 3]),
        lambda e: e.root.l.__setitem__(slice(0, 3), [])
    ],
    "list_slice_assignment_shrinking_plain": [
        _set("l", lambda e: [1, 2, 3]),
        lambda e: e.root.l.__setitem__(slice(0, 2), [4]),
        lambda e: e.root.l.__setitem__(slice(0, 2), [[e.v[0]], 5]),
    ],
    "list_slice_assignment_trackable": [
        _set("l", lambda e: [e.v[0], 2]),
        lambda e: e.root.l.__setitem__(slice(0, 1), [e.v[1]]),
    ],
    "list_delete_trackable": [
        _set("l", lambda e: [e.v[0], e.v[1]]),
        lambda e: e.root.l.__delitem__(0),
    ],
    "list_delete_plain": [
        _set("l", lambda e: [1, 2, 3]),
        lambda e: e.root.l.__delitem__(0),
        lambda e: e.root.l.append(e.v[0]),
        lambda e: e.root.l.pop(0),
    ],
    "list_pop_trackable": [
        _set("l", lambda e: [e.v[0], 1]),
        lambda e: e.root.l.pop(),
    ],
    "list_remove_and_clear_plain": [
        _set("l", lambda e: [1, 2, 3]),
        lambda e: e.root.l.remove(2),
        lambda e: e.root.l.clear(),
        lambda e: e.root.l.append(e.v[0]),
    ],
    "list_clear_trackable": [
        _set("l", lambda e: [e.v[0], 1]),
        lambda e: e.root.l.clear(),
    ],
    "list_insert_plain": [
        _set("l", lambda e: [1]),
        lambda e: e.root.l.insert(0, 2),
        lambda e: e.root.l.insert(0, e.v[0]),
    ],
    "list_insert_before_trackable": [
        _set("l", lambda e: [e.v[0]]),
        lambda e: e.root.l.insert(0, 2),
    ],
    "list_sort_and_reverse": [
        _set("p", lambda e: [3, 1, 2]),
        lambda e: e.root.p.sort(),
        lambda e: e.root.p.reverse(),
        lambda e: list(e.root.p),
        _set("l", lambda e: [e.v[0], e.v[1]]),
        lambda e: e.root.l.reverse(),
    ],
    "list_imul_zero": [
        _set("p", lambda e: [1, 2]),
        lambda e: e.root.p.__imul__(0),
        _set("l", lambda e: [e.v[0]]),
        lambda e: e.root.l.__imul__(0),
    ],
    "list_external_modification": [
        lambda e: e.scratch.__setitem__("raw", [e.v[0]]),
        lambda e: setattr(e.root, "l", e.scratch["raw"]),
        lambda e: e.root.l._storage is e.scratch["raw"],
        lambda e: e.scratch["raw"].append(e.v[1]),
        lambda e: e.root.l.append(e.v[2]),
    ],
    "dict_string_keys": [
        _set("d", lambda e: {
            "a": e.v[0],
            "b": 1
        }),
        lambda e: e.root.d.__setitem__("c", e.v[1]),
        lambda e: e.root.d.__setitem__("a", e.v[2]),  # Overwrite is fine.
        lambda e: e.root.d.update({"u": e.v[3]}, w=[e.v[4]]),
        lambda e: e.root.d.__delitem__("c"),  # The dependency remains.
        lambda e: sorted(e.root.d.keys()),
        lambda e: e.root.d == dict(e.root.d),
        lambda e: e.root.d != {},
        lambda e: isinstance(e.root.d, dict),
        lambda e: hash(e.root.d),
        lambda e: e.root.d.get("b"),
        lambda e: len(e.root.d),
    ],
    "dict_non_string_key_in_constructor": [
        _set("d", lambda e: {
            1: e.v[0],
            "a": e.v[1]
        }),
        lambda e: e.root.d._checkpoint_dependencies[0].name,
    ],
    "dict_non_string_key_set_later": [
        _set("d", lambda e: {"a": e.v[0]}),
        lambda e: e.root.d.__setitem__(2, 3),
        lambda e: e.root.d.__setitem__(3, e.ds.NoDependency(e.v[1])),
        lambda e: e.root.d.__setitem__(4, e.v[1]),
        lambda e: e.root.d.__setitem__("b", e.v[2]),
    ],
    "dict_non_string_key_plain_values": [
        _set("d", lambda e: {
            1: 2,
            (3, 4): "x",
            "a": e.v[0]
        }),
        _set("e", lambda e: {1: e.ds.NoDependency(e.v[1])}),
        _set("f", lambda e: {1: []}),  # A list becomes a trackable wrapper.
    ],
    "dict_mutation_through_forwarded_methods": [
        _set("d", lambda e: {
            "a": e.v[0],
            "b": 1
        }),
        _set("d2", lambda e: {"a": 1}),
        _set("d3", lambda e: {"a": 1}),
        lambda e: e.root.d.pop("b"),
        lambda e: e.root.d2.setdefault("z", e.v[1]),
        lambda e: e.root.d3.__ior__({"q": e.v[2]}),
    ],
    "dict_external_modification": [
        lambda e: e.scratch.__setitem__("raw", {"a": e.v[0]}),
        lambda e: setattr(e.root, "d", e.scratch["raw"]),
        lambda e: e.scratch["raw"].__setitem__("b", e.v[1]),
    ],
    "dict_from_pairs_and_empty": [
        lambda e: setattr(e.root, "d",
                          type(e.ds.wrap_or_unwrap({}))([("a", e.v[0])])),
        lambda e: setattr(e.root, "e",
                          type(e.ds.wrap_or_unwrap({}))()),
        lambda e: dict(e.root.d),
    ],
    "tuple_variants": [
        _set("t", lambda e: (e.v[0], 1, (e.v[1], (2,)), [e.v[2]])),
        _set("p", lambda e: Point(e.v[0], (1, e.v[1]))),
        _set("q", lambda e: Point(1, 2)),  # Nothing to track: stays a tuple.
        _set("deep", lambda e: (1, (2, [e.v[3]]))),  # Only nested content.
        _set("deep_empty", lambda e: (1, (2, ((3, []),)))),
        lambda e: e.root.deep_empty[1],
        lambda e: e.root.p.x,
        lambda e: e.root.p._fields,
        lambda e: e.root.p == Point(e.v[0], (1, e.v[1])),
        lambda e: hash(e.root.t) == hash(e.root.t),
        lambda e: e.root.t + (1,),
        lambda e: e.root.t * 2,
        lambda e: e.root.t.count(1),
        lambda e: isinstance(e.root.t, tuple),
        lambda e: isinstance(e.root.p, Point),
    ],
    "tuple_inplace_operators_rebind": [
        _set("t", lambda e: (e.v[0],)),
        lambda e: setattr(e.root, "t", e.root.t + (e.v[1],)),
        lambda e: setattr(e.root, "u", (e.v[2],)),
        lambda e: e.root.u.__iadd__((e.v[3],)),
        lambda e: e.root.u.__imul__(2),
    ],
    "namedtuple_not_constructable": [
        _set("o", lambda e: OddTuple((e.v[0], 1))),
        lambda e: e.root.o.a is e.v[0],
    ],
    "nested_autotrackables": [
        _set("child", lambda e: e.AutoTrackable()),
        lambda e: setattr(e.root.child, "v", e.v[0]),
        _set("l", lambda e: [e.root.child, e.AutoTrackable()]),
        lambda e: setattr(e.root.l[1], "w", [e.v[1], {
            "z": e.v[2]
        }]),
        _set("m", lambda e: tf.Module()),
        lambda e: setattr(e.root.m, "v", e.v[3]),
        _set("ml", lambda e: {"mod": e.root.m}),
    ],
    "strict_list": [
        lambda e: setattr(e.root, "sl", e.ds.List([e.v[0]])),
        lambda e: e.root.sl.append(e.v[1]),
        lambda e: e.root.sl.append(1),
        lambda e: e.root.sl.append([e.v[2]]),
        lambda e: e.root.sl.__imul__(0),
        lambda e: e.root.sl.__imul__(2),
        lambda e: e.ds.List([1]),
        lambda e: len(e.root.sl),
        lambda e: hash(e.root.sl) == id(e.root.sl),
        lambda e: e.root.sl == e.root.sl.copy(),
        lambda e: type(e.root.sl.copy()).__name__,
    ],
    "strict_mapping": [
        lambda e: setattr(e.root, "sm", e.ds.Mapping(a=e.v[0])),
        lambda e: e.root.sm.__setitem__("b", e.v[1]),
        lambda e: e.root.sm.__setitem__("b", e.v[1]),  # Same object: fine.
        lambda e: e.root.sm.__setitem__("b", e.v[2]),
        lambda e: e.root.sm.__setitem__(1, e.v[2]),
        lambda e: e.root.sm.__setitem__("c", 1),
        lambda e: e.root.sm.update(d=[e.v[3]]),
        lambda e: e.ds.Mapping({2: e.v[0]}),
        lambda e: sorted(e.root.sm),
        lambda e: isinstance(e.root.sm, dict),
    ],
    "wrap_or_unwrap_and_sticky": [
        lambda e: e.ds.wrap_or_unwrap([1]),
        lambda e: e.ds.wrap_or_unwrap({"a": 1}),
        lambda e: e.ds.wrap_or_unwrap((1,)),
        lambda e: e.ds.wrap_or_unwrap((e.v[0],)),
        lambda e: e.ds.wrap_or_unwrap(e.ds.NoDependency([1])),
        lambda e: e.ds.wrap_or_unwrap(e.v[0]) is e.v[0],
        lambda e: e.ds.sticky_attribute_assignment(e.root, "s", [e.v[1]]),
        lambda e: e.ds.sticky_attribute_assignment(e.root, "n",
                                                   e.ds.NoDependency(e.v[2])),
        lambda e: e.ds.sticky_attribute_assignment(e.root, "i", 4),
        lambda e: e.ds.sticky_attribute_assignment(e.root, "s", e.v[3]),
    ],
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_same_dependencies_and_errors_as_tensorflow(name):
  expected = run(SCENARIOS[name], "tf")
  actual = run(SCENARIOS[name], "ours")
  for index, (want, got) in enumerate(zip(expected, actual)):
    assert got == want, f"{name}: step {index} differs"
  assert len(actual) == len(expected)


def test_scenarios_are_not_vacuous():
  """The recordings include dependencies, save errors and step errors."""
  recorded = [run(steps, "tf") for steps in SCENARIOS.values()]
  flat = [obs for rec in recorded for obs in rec]
  assert any(obs[0] is not None for obs in flat)
  assert any(obs[2] == [] or "raises" in repr(obs[2]) for obs in flat)
  assert any(("raises", "ValueError") in _subtrees(obs[2]) for obs in flat)


def _subtrees(described):
  """All subtrees of a `tree()` result (for the vacuity check)."""
  if isinstance(described, tuple) and described[:1] == ("raises",):
    return [described]
  found = []
  for entry in described:
    if len(entry) == 3:
      found.append(entry[2])
      if isinstance(entry[2], list):
        found += _subtrees(entry[2])
  return found


def _wrappers(module):
  """One wrapper of each kind, built by `module`, around a variable."""
  v = _VARIABLES[0]
  return {
      "list": module.wrap_or_unwrap([v, 1]),
      "dict": module.wrap_or_unwrap({
          "a": v,
          "b": 1
      }),
      "tuple": module.wrap_or_unwrap((v, 1)),
  }


@pytest.mark.parametrize("kind", ["list", "dict", "tuple"])
def test_wrappers_pass_builtin_type_checks_like_tensorflow(kind):
  theirs, ours = _wrappers(tf_ds)[kind], _wrappers(ds)[kind]
  for cls in (list, dict, tuple, collections.abc.Sequence,
              collections.abc.MutableSequence, collections.abc.Mapping,
              collections.abc.MutableMapping, tf_base.Trackable):
    assert isinstance(ours, cls) == isinstance(theirs, cls), cls
  assert isinstance(ours, ds.TrackableDataStructure)
  assert type(ours).__name__ == type(theirs).__name__
  assert repr(ours) == repr(theirs).replace(
      "tensorflow.python.trackable.data_structures", "tf_objckpt"
      ".data_structures")


@pytest.mark.parametrize("kind", ["list", "dict", "tuple"])
def test_copies_keep_contents_and_type(kind):
  """A shallow copy shares the elements, a deep copy copies the variable.

  Each is a container of its own: changing it leaves the original as it was.
  """
  observed = {}
  for impl, lib in tl.IMPLS.items():
    original = _wrappers(lib.data_structures)[kind]
    before = repr(original)
    shallow, deep = copy.copy(original), copy.deepcopy(original)
    keys = sorted(original) if kind == "dict" else range(len(original))
    variable_key = "a" if kind == "dict" else 0
    observed[impl] = {
        "types": [type(c) is type(original) for c in (shallow, deep)],
        "shallow shares": [shallow[k] is original[k] for k in keys],
        "deep": [(type(deep[k]).__name__, _label(deep[k])) for k in keys],
        "deep variable": float(deep[variable_key].numpy()),
    }
    if kind != "tuple":
      for copied in (shallow, deep):
        copied[variable_key] = 7
      observed[impl]["original after"] = repr(original) == before
  assert observed["ours"] == observed["tf"]
  assert observed["ours"]["types"] == [True, True]
  assert observed["ours"]["shallow shares"] == [True, True]
  # The deep copy's variable is a new one (no `v0` label) with v0's value.
  assert observed["ours"]["deep"] == [("ResourceVariable", "ResourceVariable"),
                                      ("int", "int")]
  assert observed["ours"]["deep variable"] == 0.
  assert observed["ours"].get("original after", True)


def test_copied_list_wrapper_keeps_unsaveable_flag():
  results = {}
  for impl, lib in tl.IMPLS.items():
    wrapper = lib.data_structures.wrap_or_unwrap([_VARIABLES[0]])
    wrapper[0] = _VARIABLES[1]
    copies = (wrapper, copy.copy(wrapper), copy.deepcopy(wrapper))
    results[impl] = [tl.outcome(c._trackable_children).name for c in copies]  # pylint: disable=protected-access
  assert results["ours"] == results["tf"] == ["ValueError"] * 3


def test_copied_dict_wrapper_keeps_unsaveable_flag():
  results = {}
  for impl, lib in tl.IMPLS.items():
    wrapper = lib.data_structures.wrap_or_unwrap({"a": 1})
    wrapper[1] = _VARIABLES[1]
    copies = (wrapper, copy.copy(wrapper))
    results[impl] = [tl.outcome(c._trackable_children).name for c in copies]  # pylint: disable=protected-access
  assert results["ours"] == results["tf"] == ["ValueError"] * 2


def test_tf_nest_treats_wrappers_like_tensorflows():
  for kind in ("list", "dict", "tuple"):
    theirs, ours = _wrappers(tf_ds)[kind], _wrappers(ds)[kind]
    assert len(tf.nest.flatten(ours)) == len(tf.nest.flatten(theirs))
    packed = tf.nest.map_structure(lambda x: x, ours)
    packed_theirs = tf.nest.map_structure(lambda x: x, theirs)
    assert type(packed).__name__ == type(packed_theirs).__name__
    assert tf.nest.flatten(packed) == tf.nest.flatten(ours)


def test_slice_assignment_growing_the_list_tracks_new_positions():
  """Known divergence: TensorFlow 2.21 crashes here, we track by index.

  TensorFlow compares each new element with the old one at its position
  using `!=`; past the old end the old value is None, and `variable != None`
  raises a tensor-conversion ValueError. We compare trackables by identity.
  """
  with pytest.raises(ValueError, match="None"):
    holder = tf_autotrackable.AutoTrackable()
    holder.l = [1]
    holder.l[5:5] = [_VARIABLES[1]]
  holder = tracking.AutoTrackable()
  holder.l = [1]
  holder.l[5:5] = [_VARIABLES[1], 2]
  assert list(holder.l) == [1, _VARIABLES[1], 2]
  children = holder.l._trackable_children()  # pylint: disable=protected-access
  assert list(children) == ["1"] and children["1"] is _VARIABLES[1]


def test_untrackable_error_is_a_value_error():
  with pytest.raises(ValueError, match="Trackable"):
    ds.List([1])


def test_layer_collections_of_containers():
  """Keras-style variable collections over container contents."""
  results = {}
  for key, module in (("tf", tf_ds), ("ours", ds)):
    inner = tf.Module()
    inner.w = tf.Variable(1.0, name="w")
    frozen = tf.Variable(2.0, trainable=False, name="frozen")
    lst = module.List([inner, frozen, _VARIABLES[1]])
    names = lambda vs: [v.name for v in vs]  # pylint: disable=cell-var-from-loop
    row = [
        names(lst.trainable_weights),
        names(lst.non_trainable_weights),
        names(lst.variables)
    ]
    lst.trainable = False
    row += [names(lst.trainable_weights), names(lst.non_trainable_weights)]
    results[key] = row
  assert results["ours"] == results["tf"]
  assert results["ours"][0]  # Non-trivial.


def test_tensorflow_autotrackable_tracks_our_wrappers_as_is():
  """A wrapper of ours assigned to a TensorFlow object is not re-wrapped."""
  ours = ds.wrap_or_unwrap([_VARIABLES[0]])
  holder = tf_autotrackable.AutoTrackable()
  holder.l = ours
  assert holder.l is ours
  assert holder._trackable_children()["l"] is ours  # pylint: disable=protected-access


def test_our_autotrackable_keeps_tensorflow_wrappers_as_is():
  theirs = tf_ds.wrap_or_unwrap({"a": _VARIABLES[0]})
  holder = tracking.AutoTrackable()
  holder.d = theirs
  assert holder.d is theirs
  assert holder._trackable_children()["d"] is theirs  # pylint: disable=protected-access
