"""One read plan per restore step: built once, checked once, executed.

Every restore step (an immediate restore, a restore-on-create batch, graph
restores reusing cached ops, a name-based restore, a v1 `Saver` restore)
builds one `read_plan.ReadPlan`, checks it once with `read_plan.check`, and
the engine executes that same plan. A value that does not fit is found
by the check, before anything is assigned; with the check skipped, the
same restore assigns values before failing (so these tests would fail).

Covers: tf_objckpt.engine.read_plan, tf_objckpt.restoring.restore_plan,
tf_objckpt.engine.multi_device_saver, tf_objckpt.restoring.name_based,
tf_objckpt.saver, tf_objckpt.v1.name_based_saver.
"""

import numpy as np
import pytest
import tensorflow as tf

import tf_objckpt
from tf_objckpt.engine import multi_device_saver
from tf_objckpt.engine import read_plan
from tf_objckpt import saver as saver_lib


@pytest.fixture(name="checks")
def _checks(monkeypatch):
  """The plans `read_plan.check` is called with, in order."""
  checked = []
  check = read_plan.check

  def spy(plan, *args, **kwargs):
    checked.append(plan)
    return check(plan, *args, **kwargs)

  monkeypatch.setattr(read_plan, "check", spy)
  return checked


@pytest.fixture(name="executed")
def _executed(monkeypatch):
  """The plans the engine executes (eagerly or graph building), in order."""
  plans = []
  for module, name in ((read_plan, "execute_eagerly"), (multi_device_saver,
                                                        "execute_plan")):
    original = getattr(module, name)

    def spy(plan, *args, original=original, **kwargs):
      plans.append(plan)
      return original(plan, *args, **kwargs)

    monkeypatch.setattr(module, name, spy)
  return plans


def _keys(plan):
  return sorted(value.key for value in plan.reads)


def _write(path, **variables):
  return tf_objckpt.Checkpoint(**variables).write(str(path))


def test_immediate_restore_checks_and_executes_one_plan(tmp_path, checks,
                                                        executed):
  counter = tf.Variable(7, dtype=tf.int64)
  path = _write(tmp_path / "ckpt",
                a=tf.Variable([1., 2.]),
                b=tf.Variable(3.),
                step=counter)
  a, b = tf.Variable([0., 0.]), tf.Variable(0.)
  step = tf.Variable(0, dtype=tf.int64)
  checks.clear()
  tf_objckpt.Checkpoint(a=a, b=b, step=step).read(path).assert_consumed()
  assert len(checks) == 1
  assert _keys(checks[0]) == [
      "a/.ATTRIBUTES/VARIABLE_VALUE", "b/.ATTRIBUTES/VARIABLE_VALUE",
      "step/.ATTRIBUTES/VARIABLE_VALUE"
  ]
  assert executed == checks  # The plan checked is the plan executed.
  assert all(
      isinstance(destination, read_plan.ToVariable)
      for destination in checks[0].destinations)
  np.testing.assert_array_equal(a.numpy(), [1., 2.])
  assert b.numpy() == 3. and step.numpy() == 7


def test_restore_on_create_batch_checks_one_plan(tmp_path, checks, executed):
  module = tf.Module()
  module.child = tf.Module()
  module.child.a = tf.Variable([1., 2.])
  module.child.b = tf.Variable(3.)
  path = _write(tmp_path / "ckpt", module=module)
  root = tf.Module()
  status = tf_objckpt.Checkpoint(module=root).read(path)
  checks.clear()
  executed.clear()
  child = tf.Module()
  child.a = tf.Variable([0., 0.])
  child.b = tf.Variable(0.)
  root.child = child  # One batch: both variables, one plan.
  assert len(checks) == 1 and executed == checks
  assert _keys(checks[0]) == [
      "module/child/a/.ATTRIBUTES/VARIABLE_VALUE",
      "module/child/b/.ATTRIBUTES/VARIABLE_VALUE"
  ]
  status.assert_consumed()
  np.testing.assert_array_equal(child.a.numpy(), [1., 2.])


def _restore_mismatch(path):
  """Restores `path` into variables, one of the wrong shape.

  Returns:
    The value of the variable that fits, and the error message (None if
    the restore did not fail).
  """
  a, b = tf.Variable([0., 0.]), tf.Variable([0., 0., 0.])
  try:
    tf_objckpt.Checkpoint(a=a, b=b).read(path)
  except (ValueError, tf.errors.InvalidArgumentError) as e:
    return a.numpy(), str(e)
  return a.numpy(), None


def test_mismatch_found_before_anything_is_assigned(tmp_path, checks):
  path = _write(tmp_path / "ckpt",
                a=tf.Variable([1., 2.]),
                b=tf.Variable([1., 2.]))
  checks.clear()
  a_value, message = _restore_mismatch(path)
  assert len(checks) == 1
  np.testing.assert_array_equal(a_value, [0., 0.])  # Nothing assigned.
  assert "checkpoint key 'b/.ATTRIBUTES/VARIABLE_VALUE'" in message


def test_without_the_check_values_are_assigned(tmp_path, monkeypatch):
  """Shows that the test above fails if the plan is not checked."""
  path = _write(tmp_path / "ckpt",
                a=tf.Variable([1., 2.]),
                b=tf.Variable([1., 2.]))
  monkeypatch.setattr(read_plan, "check", lambda *args, **kwargs: None)
  a_value, message = _restore_mismatch(path)
  np.testing.assert_array_equal(a_value, [1., 2.])  # Assigned.
  assert message is None  # The mismatch went unnoticed.


def test_graph_restores_check_one_plan_each_and_reuse_ops(
    tmp_path, checks, executed):
  path = _write(tmp_path / "ckpt", a=tf.Variable([1., 2.]), b=tf.Variable(3.))
  with tf.Graph().as_default() as graph, tf.compat.v1.Session() as sess:
    a = tf.compat.v1.get_variable("a", initializer=[0., 0.])
    b = tf.compat.v1.get_variable("b", initializer=0.)
    checkpoint = tf_objckpt.Checkpoint(a=a, b=b)
    checks.clear()
    checkpoint.read(path).run_restore_ops(sess)
    assert len(checks) == 1 and executed == checks
    ops_after_first = len(graph.get_operations())
    checkpoint.read(path).run_restore_ops(sess)
    assert len(checks) == 2 and executed == checks
    # The second plan reads through the first restore's ops.
    assert all(
        isinstance(destination, read_plan.ToRestoreOp)
        for destination in checks[1].destinations)
    assert _keys(checks[1]) == _keys(checks[0])
    assert len(graph.get_operations()) == ops_after_first
    np.testing.assert_array_equal(sess.run(a), [1., 2.])


def test_graph_mismatch_of_cached_ops_found_by_the_check(tmp_path, checks):
  good = _write(tmp_path / "good", a=tf.Variable([1., 2.]))
  bad = _write(tmp_path / "bad", a=tf.Variable([1., 2., 3.]))
  with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
    a = tf.compat.v1.get_variable("a", initializer=[0., 0.])
    checkpoint = tf_objckpt.Checkpoint(a=a)
    checkpoint.read(good).run_restore_ops(sess)
    checks.clear()
    with pytest.raises(ValueError, match="checkpoint key 'a/.ATTRIBUTES"):
      checkpoint.read(bad)
    assert len(checks) == 1


def _v1_checkpoint(path):
  with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
    tf.compat.v1.get_variable("x", initializer=[1., 2.])
    tf.compat.v1.get_variable("y", initializer=3.)
    sess.run(tf.compat.v1.global_variables_initializer())
    return tf.compat.v1.train.Saver().save(sess, str(path))


def test_name_based_restore_checks_one_plan(tmp_path, checks, executed):
  path = _v1_checkpoint(tmp_path / "v1")
  x, y = tf.Variable([0., 0.], name="x"), tf.Variable(0., name="y")
  checks.clear()
  tf_objckpt.Checkpoint(x=x,
                        y=y).restore(path).assert_existing_objects_matched()
  assert len(checks) == 1
  assert _keys(checks[0]) == ["x", "y"]
  # Each object's part of the checked plan is executed, nothing else.
  assert sorted(
      id(destination)
      for plan in executed
      for destination in plan.destinations) == sorted(
          id(destination) for destination in checks[0].destinations)
  np.testing.assert_array_equal(x.numpy(), [1., 2.])
  assert y.numpy() == 3.


def test_v1_saver_restore_checks_one_plan(tmp_path, checks):
  path = _v1_checkpoint(tmp_path / "v1")
  with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
    x = tf.compat.v1.get_variable("x", initializer=[0., 0.])
    tf.compat.v1.get_variable("y", initializer=[0., 0.])  # Wrong shape.
    sess.run(tf.compat.v1.global_variables_initializer())
    saver = saver_lib.Saver()
    checks.clear()
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="checkpoint key 'y'"):
      saver.restore(sess, path)
    assert len(checks) == 1 and _keys(checks[0]) == ["x", "y"]
    np.testing.assert_array_equal(sess.run(x), [0., 0.])  # Nothing assigned.
