"""Eager `init_from_checkpoint`: every assignment-map form assigns at once.

Eagerly, variables have no initializer to replace: both libraries assign
the checkpoint's values at the call. Names and scopes resolve in a v1
variable store (`EagerVariableStore`, as `track_tf1_style_variables` uses);
without one, a scope names nothing, silently in TensorFlow, with a warning
here. Ours also assigns partitioned variables (their slices, a
`PartitionedVariable`, a `ShardedVariable`), which TensorFlow cannot. A
problem raises before anything is assigned; TensorFlow has assigned the
entries before the bad one by then. Under a distribution strategy both
assign from the cross-replica context, also when called in a replica.

Covers: tf_objckpt.checkpoint_utils, tf_objckpt.v1.warm_start,
tf_objckpt.v1.assignment_maps.
"""

import contextlib
import logging

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.distribute import sharded_variable
from tensorflow.python.ops import variable_scope
from tensorflow.python.ops import variables

import testlib as tl

_SAVED = {
    "old/a": np.arange(12, dtype=np.float32).reshape(6, 2),
    "old/inner/b": np.array([7, 8, 9], np.int64),
    "old/table": np.arange(20, dtype=np.float32).reshape(10, 2),
    "root_value": np.array(2.5, np.float32),
}


@pytest.fixture(name="path", scope="module")
def _path(tmp_path_factory):
  return tl.write_with_saver("tf",
                             tmp_path_factory.mktemp("warm") / "ckpt",
                             _SAVED,
                             eager=True)


def _zeros(shape, dtype=tf.float32):
  return tf.Variable(tf.zeros(shape, dtype))


def _slices(full_name, full_shape, rows):
  """Variables holding `rows` rows each of a partitioned variable."""
  parts, offset = [], 0
  for count in rows:
    part = _zeros([count] + full_shape[1:])
    part._set_save_slice_info(
        variables.Variable.SaveSliceInfo(  # pylint: disable=protected-access
            full_name, full_shape, [offset] + [0] * (len(full_shape) - 1),
            part.shape.as_list()))
    parts.append(part)
    offset += count
  return parts


def _in_store(scenario):
  """Runs `scenario(store_variables)` with v1 variables in an eager store."""
  store = variable_scope.EagerVariableStore()
  with store.as_default():
    with tf.compat.v1.variable_scope("new"):
      made = {
          "a":
              tf.compat.v1.get_variable("a", [6, 2],
                                        initializer=tf.zeros_initializer()),
          "b":
              tf.compat.v1.get_variable("inner/b", [3],
                                        tf.int64,
                                        initializer=tf.zeros_initializer())
      }
    made["root_value"] = tf.compat.v1.get_variable(
        "top/root_value", [], initializer=tf.zeros_initializer())
    made["table"] = tf.compat.v1.get_variable(
        "parts/table", [10, 2],
        initializer=tf.zeros_initializer(),
        partitioner=lambda shape, dtype: [3, 1])
    return scenario(made)


def _numpy(value):
  if isinstance(
      value,
      (variables.PartitionedVariable, sharded_variable.ShardedVariable, list)):
    return np.concatenate([part.numpy() for part in value])
  return value.numpy()


def _warm_started(impl, path, assignment_map_of, in_store=False):
  """The values of the variables after `impl`'s warm start."""

  def scenario(made):
    tl.IMPLS[impl].checkpoint_utils.init_from_checkpoint(
        path, assignment_map_of(made))
    return {name: _numpy(value) for name, value in made.items()}

  if in_store:
    return _in_store(scenario)
  return scenario({
      "a": _zeros([6, 2]),
      "a_copy": _zeros([6, 2]),
      "b": _zeros([3], tf.int64),
      "slices": _slices("table", [10, 2], [4, 6])
  })


# Each form: (assignment map of the variables, whether they are a store's).
_FORMS = {
    "variables": (lambda v: {
        "old/a": v["a"],
        "old/inner/b": v["b"]
    }, False),
    "pairs_one_value_twice": (lambda v: [("old/a", v["a"]),
                                         ("old/a", v["a_copy"])], False),
    "scope_to_scope": (lambda v: {
        "old/": "new/"
    }, True),
    "names": (lambda v: {
        "old/a": "new/a",
        "old/inner/b": "new/inner/b"
    }, True),
    "root_to_scope": (lambda v: {
        "/": "top/"
    }, True),
}
# Forms of partitioned variables: TensorFlow cannot assign slices eagerly.
_OURS_ONLY = {
    "list_of_slices": (lambda v: {
        "old/table": v["slices"]
    }, False),
    "partitioned_by_name": (lambda v: {
        "old/table": "parts/table"
    }, True),
}
_KEYS = {
    "a": "old/a",
    "a_copy": "old/a",
    "b": "old/inner/b",
    "root_value": "root_value",
    "table": "old/table",
    "slices": "old/table"
}


def _assert_from_checkpoint(values):
  """Each value is zero or the checkpoint's, and some are the checkpoint's."""
  assert any(np.asarray(value).any() for value in values.values())
  for name, value in values.items():
    if np.asarray(value).any():
      np.testing.assert_array_equal(value, _SAVED[_KEYS[name]])


@pytest.mark.parametrize("form", sorted(_FORMS))
def test_each_form_assigns_as_tensorflow_does(path, form):
  _assert_from_checkpoint(tl.agreed(_warm_started, path, *_FORMS[form]))


@pytest.mark.parametrize("form", sorted(_OURS_ONLY))
def test_slices_are_assigned_where_tensorflow_fails(path, form):
  _assert_from_checkpoint(_warm_started("ours", path, *_OURS_ONLY[form]))
  error = tl.outcome(_warm_started, "tf", path, *_OURS_ONLY[form]).error
  assert isinstance(error, AttributeError)


def test_partitioned_and_sharded_variables(path):

  def assignment_map_of(made):
    made["partitioned"] = variables.PartitionedVariable(
        "table", [10, 2], tf.float32, _slices("table", [10, 2], [5, 5]), [2, 1])
    made["sharded"] = sharded_variable.ShardedVariable(
        [_zeros([3, 2]), _zeros([7, 2])])
    return [("old/table", made["partitioned"]), ("old/table", made["sharded"])]

  values = _warm_started("ours", path, assignment_map_of)
  np.testing.assert_array_equal(values["partitioned"], _SAVED["old/table"])
  np.testing.assert_array_equal(values["sharded"], _SAVED["old/table"])
  # TensorFlow takes neither.
  for target in (variables.PartitionedVariable("t", [10, 2], tf.float32,
                                               _slices("t", [10, 2], [5, 5]),
                                               [2, 1]),
                 sharded_variable.ShardedVariable([_zeros([10, 2])])):
    assert tl.outcome(tl.IMPLS["tf"].checkpoint_utils.init_from_checkpoint,
                      path, {
                          "old/table": target
                      }).error is not None


def test_a_scope_without_a_variable_store_names_nothing(path):
  with tl.captured_logs(logging.WARNING) as messages:
    values = tl.agreed(_warm_started, path, lambda v: {"old/": "new/"})
  assert not any(np.asarray(value).any() for value in values.values())
  assert any("'old/': 'new/'" in message and "names no variable" in message
             for message in messages), messages


@pytest.mark.parametrize("problem",
                         ["missing_key", "wrong_shape", "wrong_dtype"])
def test_a_problem_assigns_nothing(path, problem):
  # The good entry sorts first: TensorFlow has assigned it.
  def scenario(impl):
    good, bad = _zeros([6, 2]), {
        "missing_key": _zeros([3]),
        "wrong_shape": _zeros([4]),
        "wrong_dtype": _zeros([3], tf.int32)
    }[problem]
    key = "old/inner/b" if problem != "missing_key" else "old/nothing"
    error = tl.outcome(tl.IMPLS[impl].checkpoint_utils.init_from_checkpoint,
                       path, {
                           "old/a": good,
                           key: bad
                       }).error
    return error, good.numpy()

  results = tl.by_impl(scenario)
  expected_type = (tf.errors.InvalidArgumentError
                   if problem == "wrong_dtype" else ValueError)
  tl.assert_same_error_type(
      {
          impl: error for impl, (error, _) in results.items()
      }, expected_type)
  error, good = results["ours"]
  assert "nothing was initialized" in str(error) and path in str(error)
  assert not good.any()
  np.testing.assert_array_equal(results["tf"][1], _SAVED["old/a"])


@pytest.mark.parametrize("context", ["cross_replica", "replica"])
def test_under_a_distribution_strategy(path, context):
  strategy = tf.distribute.MirroredStrategy(["/cpu:0"])

  def scenario(impl):
    with strategy.scope():
      variable = _zeros([6, 2])

    def warm_start():
      tl.IMPLS[impl].checkpoint_utils.init_from_checkpoint(
          path, {"old/a": variable})

    with strategy.scope() if context == "cross_replica" else (
        contextlib.nullcontext()):
      if context == "replica":
        strategy.run(warm_start)
      else:
        warm_start()
    return [
        value.numpy() for value in strategy.experimental_local_results(variable)
    ]

  values = tl.agreed(scenario)
  np.testing.assert_array_equal(values[0], _SAVED["old/a"])
