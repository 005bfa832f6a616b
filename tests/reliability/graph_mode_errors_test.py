"""Graph-mode restores of checkpoints that do not fit the program.

Values that do not fit their variable (another shape or dtype) or are
missing: restored into existing variables, into a variable created after
`restore()` (a deferred restore), and through restore ops cached by an
earlier restore. TensorFlow fails when the restore ops run for a wrong
dtype or a missing key, and reshapes a resource variable to a checkpointed
shape; we fail in `restore()` in all three cases, naming the key and the
object path, and assign nothing.

Covers: tf_objckpt.engine.read_plan, tf_objckpt.engine.multi_device_saver,
tf_objckpt.restore.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl

_KEY = "root/b/.ATTRIBUTES/VARIABLE_VALUE"


def _bad_b(problem):
  return {"missing": 40., "dtype": 40, "shape": [40., 41.]}[problem]


def _write_with_problem(impl, prefix, problem=None, **initial_values):
  """`tl.write_in_graph`, then drops `b`'s value if `problem` is "missing"."""
  path = tl.write_in_graph(impl, prefix, **initial_values)
  if problem == "missing":
    tl.rewrite_without(path, _KEY)
  return path


def _bad_checkpoint_restore(program, directory, problem):
  """Restores a checkpoint whose value for `root.b` does not fit.

  Returns:
    (the exception raised or None, the values of `root.a` and `root.b`
    before and after).
  """
  path = _write_with_problem(program.impl,
                             os.path.join(directory, "ckpt"),
                             problem,
                             a=10.,
                             b=[20., 21.] if problem == "shape" else 20.)
  root = program.lib.AutoTrackable()
  root.a = program.variable("a", 1.)
  root.b = program.variable("b", 2 if problem == "dtype" else 2.)
  checkpoint = program.lib.CheckpointV1(root=root)
  checkpoint.restore(None).initialize_or_restore(program.session)
  before = program.run([root.a, root.b])
  restored = tl.outcome(
      lambda: checkpoint.restore(path).run_restore_ops(program.session))
  return restored.error, before, program.run([root.a, root.b])


@pytest.mark.parametrize("problem", ["shape", "dtype", "missing"])
def test_bad_checkpoints_name_the_key_and_leave_variables_untouched(
    tmp_path, problem):
  """A mismatched or missing value fails the restore; nothing is assigned."""
  results = {}
  for impl in tl.IMPLS:
    with tl.GraphProgram(impl) as program:
      results[impl] = _bad_checkpoint_restore(program,
                                              os.path.join(tmp_path, impl),
                                              problem)
  error, before, after = results["ours"]
  assert f"'{_KEY}'" in str(error)
  assert "'root/b'" in str(error)
  np.testing.assert_equal(after, before)
  their_error, their_before, their_after = results["tf"]
  if problem == "shape":
    assert their_error is None
    np.testing.assert_equal(their_after, [10., [20., 21.]])
  elif problem == "missing":
    # The object graph names a value the checkpoint lacks: damaged, to us.
    assert isinstance(their_error, tf.errors.NotFoundError)
    assert isinstance(error, tf.errors.DataLossError)
    np.testing.assert_equal(their_after, their_before)
  else:
    assert type(their_error) is type(error)  # pylint: disable=unidiomatic-typecheck
    np.testing.assert_equal(their_after, their_before)


def _assign_mismatched_after_restore(impl, directory, problem):
  """Restores `root.b` of shape (2,), then assigns a variable that differs.

  Returns:
    What each step did: whether assigning `b` (and assigning it again)
    raised, the dependencies of `root`, whether `initialize_or_restore`
    raised (if so, `b` is initialized by hand) and what it left
    uninitialized.
  """
  path = _write_with_problem(impl,
                             os.path.join(directory, impl),
                             a=1.,
                             b=[1., 2.])
  with tl.GraphProgram(impl) as program:
    root = program.lib.AutoTrackable()
    status = program.lib.CheckpointV1(root=root).restore(path)
    root.a = program.variable("a", 3.)
    b = program.variable("b", [1., 2., 3.] if problem == "shape" else [1, 2])
    observed = {
        "assign": tl.outcome(setattr, root, "b", b).name,
        "dependencies": [name for name, _ in root._checkpoint_dependencies]
    }  # pylint: disable=protected-access
    restored = tl.outcome(status.initialize_or_restore, program.session)
    if restored.error is not None:
      program.run(b.initializer)
    observed["initialize_or_restore"] = restored.name
    observed["uninitialized"] = program.uninitialized()
    # Assigning again must not track a second `b`.
    observed["assign_again"] = tl.outcome(setattr, root, "b", b).name
    observed["dependencies_after"] = [
        name for name, _ in root._checkpoint_dependencies
    ]  # pylint: disable=protected-access
  return observed


@pytest.mark.parametrize("problem", ["shape", "dtype"])
def test_mismatched_variable_created_after_restore_is_tracked(
    tmp_path, problem):
  """A deferred restore that cannot apply still leaves `root.b` tracked.

  Assigning the variable raises in neither, and tracks `b` once. Then
  TensorFlow's `initialize_or_restore` fails (dtype), having restored `a`,
  or reshapes `b` (shape); ours fails for both and restores nothing.
  """
  theirs = _assign_mismatched_after_restore("tf", tmp_path, problem)
  assert theirs == {
      "assign": "ok",
      "dependencies": ["a", "b"],
      "initialize_or_restore":
          ("ok" if problem == "shape" else "InvalidArgumentError"),
      "uninitialized": [] if problem == "shape" else [b"save_counter"],
      "assign_again": "ok",
      "dependencies_after": ["a", "b"]
  }
  ours = _assign_mismatched_after_restore("ours", tmp_path, problem)
  assert ours == dict(theirs,
                      uninitialized=[b"a", b"save_counter"],
                      initialize_or_restore=("ValueError" if problem == "shape"
                                             else "InvalidArgumentError"))


def _restore_bad_after_good(directory, problem, restore_good_first):
  """Restores a good checkpoint (or none), then one that does not fit `b`."""
  good = _write_with_problem("ours",
                             os.path.join(directory, "good"),
                             a=10.,
                             b=20.)
  bad = _write_with_problem("ours",
                            os.path.join(directory, "bad"),
                            problem,
                            a=30.,
                            b=_bad_b(problem))
  with tl.GraphProgram("ours") as program:
    root = program.lib.AutoTrackable()
    checkpoint = program.lib.CheckpointV1(root=root)
    root.a = program.variable("a", 1.)
    status = checkpoint.restore(good if restore_good_first else None)
    root.b = program.variable("b", 2.)  # Restored by a deferred restore op.
    status.initialize_or_restore(program.session)
    before = program.run([root.a, root.b])
    restored = tl.outcome(
        lambda: checkpoint.restore(bad).run_restore_ops(program.session))
    return restored.error, before, program.run([root.a, root.b])


@pytest.mark.parametrize("restore_good_first", [False, True],
                         ids=["fresh", "after_another_restore"])
@pytest.mark.parametrize("problem", ["missing", "dtype", "shape"])
def test_bad_checkpoint_fails_whole_even_with_cached_restore_ops(
    tmp_path, problem, restore_good_first):
  """The all-or-nothing rule holds when restore ops come from the cache.

  An error names the key and object path; the variables are untouched.
  """
  error, before, after = _restore_bad_after_good(tmp_path, problem,
                                                 restore_good_first)
  assert isinstance(error, (ValueError, tf.errors.OpError)), error
  assert repr(_KEY) in str(error)
  assert "'root/b'" in str(error)
  for value_before, value_after in zip(before, after):
    np.testing.assert_array_equal(value_after, value_before)
