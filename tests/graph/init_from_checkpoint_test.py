"""Graph-mode `init_from_checkpoint`: every assignment-map form, few ops.

Each form of TensorFlow's assignment map (scopes, names, variable objects,
partitions by name or as a list, "/" for the root, a list of pairs) gives
the same initializers and initial values with ours as with TensorFlow's,
for resource and reference variables; ours also takes a
`PartitionedVariable` and a `ShardedVariable`, which TensorFlow refuses.
Ours adds a few batched reads where TensorFlow adds a `RestoreV2` per
variable. Problems raise TensorFlow's error types before anything is
built, naming the variable, the key and the checkpoint; TensorFlow has
replaced the initializers of the entries before the bad one by then.

Covers: tf_objckpt.checkpoint_utils, tf_objckpt.v1.warm_start,
tf_objckpt.v1.assignment_maps.
"""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.distribute import sharded_variable
from tensorflow.python.ops import variables

import testlib as tl

# The checkpoint's values, by name.
_SAVED = {
    "old_scope_1/var1": np.arange(40, dtype=np.float32).reshape(20, 2),
    "old_scope_1/var1b": -np.arange(40, dtype=np.float32).reshape(20, 2),
    "old_scope_1/var2": np.arange(200, dtype=np.float32).reshape(50, 4),
    "old_scope_1/nested/var5": np.array([5.0, 6.0], np.float32),
    "old_scope_2/var3": np.arange(60, dtype=np.float32).reshape(10, 6),
    "var4": np.array([1, 2, 3], np.int64),
}
_FLOAT = tf.float32


@pytest.fixture(name="path", scope="module")
def _path(tmp_path_factory):
  return tl.write_with_saver("tf",
                             tmp_path_factory.mktemp("warm") / "model.ckpt",
                             _SAVED)


def _variables(use_resource):
  """The program's variables, zeros until initialized from the checkpoint."""

  def variable(name, shape, dtype=_FLOAT, **kwargs):
    return tf.compat.v1.get_variable(
        name,
        shape,
        dtype,
        initializer=tf.compat.v1.zeros_initializer(),
        use_resource=use_resource,
        **kwargs)

  made = {
      "new_scope_1/var1":
          variable("new_scope_1/var1", [20, 2]),
      "new_scope_1/var2":
          variable("new_scope_1/var2", [50, 4]),
      "new_scope_1/nested/var5":
          variable("new_scope_1/nested/var5", [2]),
      "new_scope_2/var3":
          variable("new_scope_2/var3", [10, 6],
                   partitioner=lambda shape, dtype: [3, 1]),
      "new_scope_2/var6":
          variable("new_scope_2/var6", [10, 6],
                   partitioner=lambda shape, dtype: [2, 1]),
      "new_scope_3/var4":
          variable("new_scope_3/var4", [3], tf.int64),
      "copies/var1":
          variable("copies/var1", [20, 2]),
      "untouched/var":
          variable("untouched/var", [2]),
  }
  if use_resource:
    made["shards"] = sharded_variable.ShardedVariable(
        [variable("shards/s0", [6, 6]),
         variable("shards/s1", [4, 6])])
  return made


def _parts(variable):
  """The variables holding `variable`'s value (its partitions, or itself)."""
  if isinstance(variable, variables.PartitionedVariable):
    return list(variable)
  if isinstance(variable, sharded_variable.ShardedVariable):
    return variable.variables
  return [variable]


# Each form: the assignment map, given the program's variables.
_FORMS = {
    "scope_to_scope":
        lambda v: {
            "old_scope_1/": "new_scope_1/"
        },
    "names":
        lambda v: {
            "old_scope_1/var1": "new_scope_1/var1",
            "old_scope_1/nested/var5": "new_scope_1/nested/var5"
        },
    "variables":
        lambda v: {
            "old_scope_1/var1": v["new_scope_1/var1"],
            "old_scope_1/var2": v["new_scope_1/var2"]
        },
    "partitioned_by_name":
        lambda v: {
            "old_scope_2/var3": "new_scope_2/var3"
        },
    "list_of_partitions":
        lambda v: {
            "old_scope_2/var3": v["new_scope_2/var3"]._get_variable_list()
        },  # pylint: disable=protected-access
    "root_to_scope":
        lambda v: {
            "/": "new_scope_3/"
        },
    "pairs_one_value_twice":
        lambda v: [("old_scope_1/var1", v["new_scope_1/var1"]),
                   ("old_scope_1/var1", "copies/var1")],
    # Two values for one variable: the last, by checkpoint name, wins.
    "pairs_last_wins":
        lambda v: [("old_scope_1/var1b", "copies/var1"),
                   ("old_scope_1/var1", "copies/var1")],
}
# Forms only ours takes.
_OURS_ONLY = {
    "partitioned_variable":
        lambda v: {
            "old_scope_2/var3": v["new_scope_2/var3"]
        },
    "sharded_variable":
        lambda v: {
            "old_scope_2/var3": v["shards"]
        },
}


def _initialize(program):
  """Runs the initializers of the global variables.

  Graph building, a `ShardedVariable` adds a variable without an
  initializer among them (its shards have theirs).
  """
  program.run([
      variable.initializer
      for variable in tf.compat.v1.global_variables()
      if variable.initializer is not None
  ])


def _warm_start(program, path, form, use_resource):
  """Values and initial values after `form`'s warm start and initializers."""
  made = _variables(use_resource)
  program.lib.checkpoint_utils.init_from_checkpoint(path, form(made))
  _initialize(program)
  values, initial_values = {}, {}
  for name, variable in made.items():
    parts = _parts(variable)
    values[name] = program.run(parts)
    initial_values[name] = program.run([part.initial_value for part in parts])
  return values, initial_values


def _expected(values, assigned):
  """`values` with `assigned` ({name: full value}) in place, split as parts."""
  expected = dict(values)
  for name, value in assigned.items():
    splits = np.cumsum([len(part) for part in values[name]])[:-1]
    expected[name] = np.split(value, splits)
  return expected


@pytest.mark.parametrize("use_resource", [True, False],
                         ids=["resource", "reference"])
@pytest.mark.parametrize("form", sorted(_FORMS))
def test_each_form_initializes_as_tensorflow_does(path, form, use_resource):
  results = tl.in_graph_programs(
      lambda program: _warm_start(program, path, _FORMS[form], use_resource))
  tl.assert_agree(results)
  values, initial_values = results["ours"]
  # Something was initialized from the checkpoint, and only that.
  assert not values["untouched/var"][0].any()
  assert any(np.asarray(value[0]).any() for value in values.values())
  # Initial values are the checkpoint's too.
  assert initial_values["new_scope_2/var3"] is not None


@pytest.mark.parametrize("use_resource", [True, False],
                         ids=["resource", "reference"])
@pytest.mark.parametrize("form", sorted(_OURS_ONLY))
def test_partitioned_and_sharded_variable_objects(path, form, use_resource):
  if form == "sharded_variable" and not use_resource:
    pytest.skip("a ShardedVariable holds resource variables")
  with tl.GraphProgram("ours") as program:
    values, initial_values = _warm_start(program, path, _OURS_ONLY[form],
                                         use_resource)
  name = "shards" if form == "sharded_variable" else "new_scope_2/var3"
  np.testing.assert_equal(
      values[name],
      _expected(values, {name: _SAVED["old_scope_2/var3"]})[name])
  np.testing.assert_equal(initial_values[name], values[name])
  # TensorFlow takes neither object (it fails on a PartitionedVariable
  # with a TypeError, on a ShardedVariable with an AttributeError).
  with tl.GraphProgram("tf") as program:
    made = _variables(use_resource)
    error = tl.outcome(program.lib.checkpoint_utils.init_from_checkpoint, path,
                       _OURS_ONLY[form](made)).error
  assert isinstance(error, (TypeError, AttributeError))


def test_values_are_the_checkpoints(path):
  with tl.GraphProgram("ours") as program:
    values, _ = _warm_start(
        program, path, lambda v: [("old_scope_1/", "new_scope_1/"),
                                  ("old_scope_2/var3", "new_scope_2/var3"),
                                  ("/", "new_scope_3/"),
                                  ("old_scope_1/var1", "copies/var1")], True)
  assert_equal = np.testing.assert_array_equal
  assert_equal(values["new_scope_1/var2"][0], _SAVED["old_scope_1/var2"])
  assert_equal(values["new_scope_1/nested/var5"][0],
               _SAVED["old_scope_1/nested/var5"])
  assert_equal(values["copies/var1"][0], _SAVED["old_scope_1/var1"])
  assert_equal(np.concatenate(values["new_scope_2/var3"]),
               _SAVED["old_scope_2/var3"])
  assert_equal(values["new_scope_3/var4"][0], _SAVED["var4"])


@pytest.mark.parametrize("use_resource", [True, False],
                         ids=["resource", "reference"])
def test_few_reads_where_tensorflow_adds_one_per_variable(
    tmp_path, use_resource):
  count = 100
  saved = {
      f"layer_{i}/kernel": np.full([4], i, np.float32) for i in range(count)
  }
  path = tl.write_with_saver("tf", tmp_path / "many", saved)

  def warm_start(program):
    made = [
        tf.compat.v1.get_variable(f"model/layer_{i}/kernel", [4],
                                  initializer=tf.zeros_initializer(),
                                  use_resource=use_resource)
        for i in range(count)
    ]
    before = set(program.graph.get_operations())
    program.lib.checkpoint_utils.init_from_checkpoint(path, {"/": "model/"})
    added = [
        op.type for op in program.graph.get_operations() if op not in before
    ]
    program.initialize()
    last = saved[f"layer_{count - 1}/kernel"]
    np.testing.assert_array_equal(program.run(made[-1]), last)
    np.testing.assert_array_equal(program.run(made[-1].initial_value), last)
    reads = [
        op_type for op_type in added if op_type == "RestoreV2" or
        op_type.startswith("tf_objckpt_restore_variables")
    ]
    return len(reads), len(added)

  results = tl.in_graph_programs(warm_start)
  assert results["tf"][0] == count
  # Ours: reads for the initializers and for the initial values, a few of
  # each (64 values per RestoreV2; a batch of resource variables is one
  # call of a function that reads and assigns them). A reference variable
  # takes an assignment of its own.
  reads, added = results["ours"]
  assert reads <= 4, results
  assert added < (count + 20 if not use_resource else 20), results


def _outcome_in_program(impl, path, assignment_map_of):
  """What a failing warm start raised, the ops it added, values after."""
  with tl.GraphProgram(impl) as program:
    made = _variables(use_resource=True)
    made["wrong_shape"] = tf.compat.v1.get_variable(
        "wrong_shape", [3, 3], initializer=tf.zeros_initializer())
    made["wrong_dtype"] = tf.compat.v1.get_variable(
        "wrong_dtype", [20, 2], tf.float64, initializer=tf.zeros_initializer())
    operations = len(program.graph.get_operations())
    error = tl.outcome(program.lib.checkpoint_utils.init_from_checkpoint, path,
                       assignment_map_of(made)).error
    added = len(program.graph.get_operations()) - operations
    run_error = tl.outcome(_initialize, program).error
    var1 = program.run(made["new_scope_1/var1"]) if run_error is None else None
    return error, added, run_error, var1


@pytest.mark.parametrize("problem", ["missing_key", "wrong_shape"])
def test_mismatch_raises_before_anything_is_built(path, problem):
  bad = {
      "missing_key": ("old_scope_1/var9", "new_scope_1/var2"),
      "wrong_shape": ("old_scope_1/var2", "wrong_shape")
  }[problem]
  # The good entry sorts first: TensorFlow has replaced its initializer.
  results = tl.by_impl(
      _outcome_in_program, path, lambda v: {
          "old_scope_1/var1": "new_scope_1/var1",
          bad[0]: bad[1]
      })
  tl.assert_same_error_type({
      impl: result[0] for impl, result in results.items()
  }, ValueError)
  error, added, run_error, var1 = results["ours"]
  for name in (path, bad[0], bad[1]):
    assert name in str(error)
  assert "nothing was initialized" in str(error)
  assert added == 0 and run_error is None
  assert not var1.any()
  np.testing.assert_array_equal(results["tf"][3], _SAVED["old_scope_1/var1"])


def test_dtype_mismatch_raises_at_once_where_tensorflow_fails_to_run(path):
  results = tl.by_impl(_outcome_in_program, path,
                       lambda v: {"old_scope_1/var1": "wrong_dtype"})
  error, added, _, _ = results["ours"]
  assert isinstance(error, tf.errors.InvalidArgumentError)
  assert "wrong_dtype" in str(error) and "old_scope_1/var1" in str(error)
  assert "float32" in str(error) and "float64" in str(error)
  assert added == 0
  # TensorFlow's error comes from RestoreV2 when the initializers run.
  tf_error, _, tf_run_error, _ = results["tf"]
  assert tf_error is None
  assert isinstance(tf_run_error, tf.errors.InvalidArgumentError)


@pytest.mark.parametrize(
    "assignment_map_of, error_type",
    [
        # A name that is no variable, mapped from a name that is no scope.
        (lambda v: {
            "old_scope_1/var1": "no/such/var"
        }, ValueError),
        # Slices of two different partitioned variables.
        (
            lambda v: {
                "old_scope_2/var3": [
                    v["new_scope_2/var3"]._get_variable_list()[0],  # pylint: disable=protected-access
                    v["new_scope_2/var6"]._get_variable_list()[1]
                ]
            },
            ValueError),  # pylint: disable=protected-access
        # Neither a name nor variables.
        (lambda v: {
            "old_scope_1/var1": 3
        }, TypeError),
    ],
    ids=["name_that_is_no_variable", "slices_of_two_variables", "not_a_target"])
def test_bad_assignment_maps_raise_tensorflows_types(path, assignment_map_of,
                                                     error_type):
  errors = {
      impl: result[0] for impl, result in tl.by_impl(_outcome_in_program, path,
                                                    assignment_map_of).items()
  }
  tl.assert_same_error_type(errors, error_type)
