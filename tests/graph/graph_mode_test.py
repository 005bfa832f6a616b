"""Graph-mode behaviour of tf_objckpt.CheckpointV1 and its load statuses.

Scenarios run in a `tf.Graph` with a `tf.compat.v1.Session`. Where
TensorFlow has the behaviour, the scenario runs once with
`tf.compat.v1.train.Checkpoint` and TensorFlow's AutoTrackable and once with
ours, and what it observes (values, uninitialized variables, which
assertions pass, exception types) must be equal.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.checkpoint import checkpoint as tf_checkpoint
from tensorflow.python.trackable import autotrackable as tf_autotrackable

import compat_util
from graph_mode_testlib import StringState
from graph_mode_testlib import TfStringState
import tf_objckpt
from tf_objckpt import util

IMPLS = ("tf", "ours")
_AUTOTRACKABLE = {"tf": tf_autotrackable.AutoTrackable,
                  "ours": tf_objckpt.AutoTrackable}
_CHECKPOINT = {"tf": tf.compat.v1.train.Checkpoint,
               "ours": tf_objckpt.CheckpointV1}
_LIST_OBJECTS = {"tf": tf_checkpoint.list_objects,
                 "ours": tf_objckpt.list_objects}
_GATHER_INITIALIZERS = {"tf": tf_checkpoint.gather_initializers,
                        "ours": tf_objckpt.gather_initializers}
_STREAMING_RESTORE = {"tf": tf_checkpoint.streaming_restore,
                      "ours": tf_objckpt.streaming_restore}


class Program:
  """One run of a graph-mode program: a graph, a session and `impl`'s classes.

  The graph is the default graph until `close()`.
  """

  def __init__(self, impl):
    self.impl = impl
    self.graph = tf.Graph()
    self.session = tf.compat.v1.Session(graph=self.graph)
    self._context = self.graph.as_default()
    self._context.__enter__()

  def autotrackable(self):
    return _AUTOTRACKABLE[self.impl]()

  def checkpoint(self, **kwargs):
    return _CHECKPOINT[self.impl](**kwargs)

  def variable(self, name, value, **kwargs):
    return tf.compat.v1.get_variable(
        name, initializer=tf.constant(value, tf.float32), **kwargs)

  def run(self, fetches):
    return self.session.run(fetches)

  def uninitialized(self):
    return sorted(self.session.run(
        tf.compat.v1.report_uninitialized_variables()).tolist())

  def close(self):
    self._context.__exit__(None, None, None)
    self.session.close()


def _run_both(scenario, *args):
  """Runs `scenario(program, *args)` for TF and ours; returns both results."""
  results = {}
  for impl in IMPLS:
    program = Program(impl)
    try:
      results[impl] = scenario(program, *args)
    finally:
      program.close()
  return results


def _assert_same(results):
  """The observations of TensorFlow and ours are equal (numpy-aware)."""
  np.testing.assert_equal(results["ours"], results["tf"])


def _train_and_save(program, prefix, steps):
  """The documented CheckpointV1 loop, resuming from the latest checkpoint."""
  root = program.autotrackable()
  root.w = program.variable("w", [[1., 2.], [3., 4.]])
  root.b = program.variable("b", [0.5, -0.5])
  loss = tf.reduce_sum(tf.square(tf.matmul([[1., 1.]], root.w) + root.b))
  optimizer = tf.compat.v1.train.AdamOptimizer(0.1)
  checkpoint = program.checkpoint(optimizer=optimizer, model=root)
  status = checkpoint.restore(
      tf_objckpt.latest_checkpoint(os.path.dirname(prefix)))
  train_op = optimizer.minimize(loss)
  observed = [type(status).__name__]
  status.initialize_or_restore(program.session)
  paths = []
  for _ in range(steps):
    program.run(train_op)
    paths.append(os.path.basename(
        checkpoint.save(file_prefix=prefix, session=program.session)))
  observed += [paths, program.run([root.w, root.b, checkpoint.save_counter] +
                                  optimizer.variables())]
  return observed


def test_documented_training_loop_resumes_like_tensorflow(tmp_path):
  def scenario(program):
    prefix = os.path.join(tmp_path, program.impl, "ckpt")
    first = _train_and_save(program, prefix, steps=2)
    resumed = Program(program.impl)  # The program runs again.
    second = _train_and_save(resumed, prefix, steps=3)
    resumed.close()
    return first, second

  results = _run_both(scenario)
  _assert_same(results)
  first, second = results["ours"]
  assert first[:2] == ["InitializationOnlyStatus", ["ckpt-1", "ckpt-2"]]
  assert second[:2] == ["CheckpointLoadStatus", ["ckpt-3", "ckpt-4", "ckpt-5"]]


def _three_variables(program):
  """A root with `a`, `b` and `c`; returns (root, checkpoint)."""
  root = program.autotrackable()
  root.a = program.variable("a", 1.)
  root.b = program.variable("b", 2.)
  root.c = program.variable("c", 3.)
  return root, program.checkpoint(root=root)


def _write(program, prefix, **values):
  """Writes a checkpoint of a root holding `values`, from another graph."""
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    root = program.autotrackable()
    for name, value in values.items():
      setattr(root, name, program.variable(name, value))
    session.run(tf.compat.v1.global_variables_initializer())
    return program.checkpoint(root=root).write(prefix, session=session)


def test_initialize_or_restore_respects_later_restores(tmp_path):
  """Objects a later restore() covers are left for it, not initialized."""

  def scenario(program):
    directory = os.path.join(tmp_path, program.impl)
    first = _write(program, os.path.join(directory, "first"), a=10.)
    second = _write(program, os.path.join(directory, "second"), a=20., b=30.)
    root, checkpoint = _three_variables(program)
    first_status = checkpoint.restore(first)
    second_status = checkpoint.restore(second)
    first_status.expect_partial().initialize_or_restore(program.session)
    observed = [program.uninitialized(), program.run([root.a, root.c])]
    second_status.expect_partial().initialize_or_restore(program.session)
    observed.append(program.run([root.a, root.b, root.c]))
    return observed

  results = _run_both(scenario)
  _assert_same(results)
  assert results["ours"][0] == [b"b"]
  np.testing.assert_equal(results["ours"][1:], [[10., 3.], [20., 30., 3.]])


def test_initialization_only_status_initializes(tmp_path):
  def scenario(program):
    path = _write(program, os.path.join(tmp_path, program.impl, "ckpt"),
                  a=10.)
    root, checkpoint = _three_variables(program)
    nothing = checkpoint.restore(None)
    observed = [type(nothing).__name__]
    for assertion in (nothing.assert_consumed,
                      nothing.assert_existing_objects_matched,
                      nothing.assert_nontrivial_match,
                      nothing.run_restore_ops):
      observed.append(compat_util.outcome(assertion))
    later = checkpoint.restore(path).expect_partial()
    nothing.initialize_or_restore(program.session)
    observed.append(program.uninitialized())  # `a` waits for `later`.
    later.run_restore_ops(program.session)
    observed.append(program.run([root.a, root.b, root.c]))
    return observed

  results = _run_both(scenario)
  _assert_same(results)
  assert results["ours"][-2:] == [[b"a"], [10., 2., 3.]]


def test_initialization_only_status_messages():
  with tf.Graph().as_default():
    status = tf_objckpt.CheckpointV1().restore(None)
    with pytest.raises(AssertionError) as raised:
      status.run_restore_ops()
    assert str(raised.value) == (
        "No checkpoint specified, so no restore ops are available "
        "(save_path=None to Saver.restore).")
    with pytest.raises(AssertionError, match=r"save_path=None\); nothing is "):
      status.assert_consumed()


def _model_and_optimizer(program, with_model=True, with_optimizer=True,
                         minimize=True):
  """Attaches `model` and `optimizer` dependencies as the scenario asks."""
  model = program.autotrackable()
  model.w = program.variable("w", [1., 2.])
  optimizer = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9)
  train_op = None
  if minimize:
    train_op = optimizer.minimize(tf.reduce_sum(tf.square(model.w)))
  kwargs = {}
  if with_model:
    kwargs["model"] = model
  if with_optimizer:
    kwargs["optimizer"] = optimizer
  return model, optimizer, train_op, program.checkpoint(**kwargs)


def _saved_momentum(program, directory):
  """Trains the Momentum model two steps in a graph of its own; saves it."""
  saving = Program(program.impl)
  model, optimizer, train_op, checkpoint = _model_and_optimizer(saving)
  saving.run(tf.compat.v1.global_variables_initializer())
  saving.run([train_op])
  saving.run([train_op])
  expected = saving.run([model.w, optimizer.get_slot(model.w, "momentum")])
  path = checkpoint.save(os.path.join(directory, "ckpt"), saving.session)
  saving.close()
  return path, expected


ASSERTIONS = ("assert_consumed", "assert_existing_objects_matched",
              "assert_nontrivial_match")


def _assertion_outcomes(status):
  return [compat_util.outcome(getattr(status, name)) for name in ASSERTIONS]


def test_assertions_in_graph_mode(tmp_path):
  def scenario(program):
    path, _ = _saved_momentum(program, os.path.join(tmp_path, program.impl))
    model, optimizer, _, checkpoint = _model_and_optimizer(
        program, with_model=False, with_optimizer=False, minimize=False)
    status = checkpoint.restore(path)
    observed = [_assertion_outcomes(status)]
    checkpoint.model = model
    observed.append(_assertion_outcomes(status))
    checkpoint.optimizer = optimizer
    observed.append(_assertion_outcomes(status))
    optimizer.minimize(tf.reduce_sum(model.w))  # Creates the slots.
    observed.append(_assertion_outcomes(status))
    checkpoint.extra = program.variable("extra", 1.)  # Not in the checkpoint.
    observed.append(_assertion_outcomes(status))
    return observed

  results = _run_both(scenario)
  _assert_same(results)
  assert results["ours"][3] == ["ok", "ok", "ok"]
  assert results["ours"][4][:2] == ["AssertionError", "AssertionError"]


@pytest.mark.parametrize("created_first", ["model", "optimizer", "slots"])
def test_slot_variables_restore_whatever_is_created_first(tmp_path,
                                                          created_first):
  """Deferred restores: dependencies added after restore() get restore ops."""

  def scenario(program):
    path, expected = _saved_momentum(program,
                                     os.path.join(tmp_path, program.impl))
    model, optimizer, _, checkpoint = _model_and_optimizer(
        program, with_model=created_first != "optimizer",
        with_optimizer=created_first != "model",
        minimize=created_first == "slots")
    status = checkpoint.restore(path)
    if created_first != "slots":
      checkpoint.model = model
      checkpoint.optimizer = optimizer
      optimizer.minimize(tf.reduce_sum(model.w))
    status.assert_consumed().run_restore_ops(program.session)
    restored = program.run([model.w, optimizer.get_slot(model.w, "momentum")])
    np.testing.assert_equal(restored, expected)
    return restored

  _assert_same(_run_both(scenario))


def test_deferred_dependencies_of_nested_objects(tmp_path):
  def scenario(program):
    path = _write(program, os.path.join(tmp_path, program.impl, "ckpt"),
                  a=10., b=20.)
    checkpoint = program.checkpoint()
    status = checkpoint.restore(path)
    checkpoint.root = program.autotrackable()
    checkpoint.root.a = program.variable("a", 1.)
    observed = [len(status._checkpoint.restore_ops)]  # pylint: disable=protected-access
    checkpoint.root.b = program.variable("b", 2.)
    observed.append(len(status._checkpoint.restore_ops))  # pylint: disable=protected-access
    # The checkpoint, written by write(), has no save counter.
    observed.append(_assertion_outcomes(status))
    status.run_restore_ops(program.session)
    observed.append(program.run([checkpoint.root.a, checkpoint.root.b]))
    return observed

  results = _run_both(scenario)
  _assert_same(results)
  assert results["ours"][3] == [10., 20.]


def test_streaming_restore_runs_restore_ops_as_they_are_created(tmp_path):
  def scenario(program):
    streaming_restore = _STREAMING_RESTORE[program.impl]
    directory = os.path.join(tmp_path, program.impl)
    path = _write(program, os.path.join(directory, "ckpt"), a=10., b=20.)
    checkpoint = program.checkpoint()
    status = checkpoint.restore(path)
    checkpoint.root = program.autotrackable()
    checkpoint.root.a = program.variable("a", 1.)
    streaming_restore(status, program.session)  # Runs `a`'s restore op.
    observed = [program.run(checkpoint.root.a)]
    checkpoint.root.b = program.variable("b", 2.)  # Restored when tracked.
    observed.append(program.run(checkpoint.root.b))
    name_based = tf.compat.v1.train.Saver([checkpoint.root.a]).save(
        program.session, os.path.join(directory, "name_based"))
    observed.append(compat_util.outcome(lambda: streaming_restore(
        checkpoint.restore(name_based), program.session)))
    return observed

  results = _run_both(scenario)
  _assert_same(results)
  assert results["ours"] == [10., 20., "NotImplementedError"]


def test_streaming_restore_does_nothing_eagerly(tmp_path):
  root = tf_objckpt.AutoTrackable()
  root.v = tf.Variable(1.)
  checkpoint = tf_objckpt.CheckpointV1(root=root)
  path = checkpoint.save(os.path.join(tmp_path, "ckpt"))
  assert util.streaming_restore(checkpoint.restore(path)) is None


def test_list_objects_and_gather_initializers(tmp_path):
  del tmp_path

  def scenario(program):
    model, optimizer, _, checkpoint = _model_and_optimizer(program)
    del model, optimizer
    objects = _LIST_OBJECTS[program.impl](checkpoint)
    initializers = _GATHER_INITIALIZERS[program.impl](checkpoint)
    return ([type(obj).__name__ for obj in objects],
            [getattr(obj, "name", None) for obj in objects],
            [op.name for op in initializers])

  results = _run_both(scenario)
  assert results["ours"][2] == ["w/Assign", "w/Momentum/Assign"]
  _assert_same(results)


def test_python_state_is_fed_at_save_time(tmp_path):
  """Each save writes the current state; the cached save op is reused."""
  key = "state/.ATTRIBUTES/py_state"

  def scenario(program):
    state = StringState() if program.impl == "ours" else TfStringState()
    checkpoint = program.checkpoint(state=state)
    saved = []
    for value in ("first", "second"):
      state.state = value
      path = checkpoint.save(os.path.join(tmp_path, program.impl, "ckpt"),
                             session=program.session)
      saved.append(tf.train.load_checkpoint(path).get_tensor(key))
    checkpoint.restore(path[:-len("-2")] + "-1")
    return saved, state.restored

  results = _run_both(scenario)
  _assert_same(results)
  assert results["ours"] == ([b"first", b"second"], ["first"])


def test_session_defaults_to_the_default_session(tmp_path):
  def scenario(program):
    root, checkpoint = _three_variables(program)
    prefix = os.path.join(tmp_path, program.impl, "ckpt")
    with program.session.as_default():
      checkpoint.restore(None).initialize_or_restore()
      program.run(root.a.assign(5.))
      path = checkpoint.save(prefix)
      written = checkpoint.write(prefix + "_written")
      program.run(root.a.assign(6.))
      checkpoint.restore(path).run_restore_ops()
      first = program.run(root.a)
      program.run(root.a.assign(7.))
      checkpoint.restore(written).initialize_or_restore()
      return (os.path.basename(path), os.path.basename(written), first,
              program.run([root.a, checkpoint.save_counter]))

  results = _run_both(scenario)
  _assert_same(results)
  assert results["ours"] == ("ckpt-1", "ckpt_written", 5., [5., 1])


def test_save_counter_is_incremented_by_a_cached_op(tmp_path):
  def scenario(program):
    _, checkpoint = _three_variables(program)
    checkpoint.restore(None).initialize_or_restore(program.session)
    prefix = os.path.join(tmp_path, program.impl, "ckpt")
    checkpoint.save(prefix, session=program.session)
    before = len(program.graph.get_operations())
    paths = [checkpoint.save(prefix, session=program.session)
             for _ in range(3)]
    return ([os.path.basename(p) for p in paths],
            len(program.graph.get_operations()) - before,
            os.path.basename(tf_objckpt.latest_checkpoint(
                os.path.dirname(prefix))))

  results = _run_both(scenario)
  _assert_same(results)
  assert results["ours"] == (["ckpt-2", "ckpt-3", "ckpt-4"], 0, "ckpt-4")


def test_restores_of_other_checkpoints_reuse_the_restore_ops(tmp_path):
  """The file prefix is fed: one set of restore ops serves every path."""

  def scenario(program):
    root, checkpoint = _three_variables(program)
    checkpoint.restore(None).initialize_or_restore(program.session)
    prefix = os.path.join(tmp_path, program.impl, "ckpt")
    paths = []
    for value in (10., 20.):
      program.run(root.a.assign(value))
      paths.append(checkpoint.save(prefix, session=program.session))
    observed = []
    for path in paths + paths:
      checkpoint.restore(path).run_restore_ops(program.session)
      observed.append(program.run([root.a, checkpoint.save_counter]))
      if len(observed) == 1:
        ops_after_first_restore = len(program.graph.get_operations())
    observed.append(len(program.graph.get_operations()) -
                    ops_after_first_restore)
    return observed

  results = _run_both(scenario)
  _assert_same(results)
  assert results["ours"] == [[10., 1], [20., 2], [10., 1], [20., 2], 0]


def test_saves_and_restores_work_once_the_graph_is_finalized(tmp_path):
  """After the first save and restore, both run without adding ops."""

  def scenario(program):
    _, checkpoint = _three_variables(program)
    checkpoint.restore(None).initialize_or_restore(program.session)
    prefix = os.path.join(tmp_path, program.impl, "ckpt")
    first = checkpoint.save(prefix, session=program.session)
    status = checkpoint.restore(first)
    program.graph.finalize()
    status.run_restore_ops(program.session)
    second = checkpoint.save(prefix, session=program.session)
    checkpoint.restore(second).run_restore_ops(program.session)
    return os.path.basename(second), program.run(checkpoint.save_counter)

  results = _run_both(scenario)
  _assert_same(results)
  assert results["ours"] == ("ckpt-2", 2)


def test_save_inside_a_function_raises(tmp_path):
  """write() works inside a tf.function; save() raises as the spec says."""
  for checkpoint_cls in (tf.compat.v1.train.Checkpoint,
                         tf_objckpt.CheckpointV1):
    checkpoint = checkpoint_cls(v=tf.Variable(1.))
    prefix = os.path.join(tmp_path, checkpoint_cls.__module__, "ckpt")

    @tf.function
    def save(checkpoint=checkpoint, prefix=prefix):
      return checkpoint.save(prefix)

    with pytest.raises(NotImplementedError) as raised:
      save()
    assert "from a function is not supported" in str(raised.value)
    assert "tf.train.Checkpoint.write()" in str(raised.value)


def test_name_based_checkpoints_restore_with_run_restore_ops(tmp_path):
  def scenario(program):
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
      a = program.variable("a", 10.)
      b = program.variable("b", 20.)
      save_counter = tf.compat.v1.get_variable(
          "save_counter", initializer=tf.constant(3, tf.int64))
      session.run(tf.compat.v1.global_variables_initializer())
      path = tf.compat.v1.train.Saver([a, b, save_counter]).save(
          session, os.path.join(tmp_path, program.impl, "names"))
    root = program.autotrackable()
    root.a = program.variable("a", 1.)
    root.b = program.variable("b", 2.)
    checkpoint = program.checkpoint(root=root)
    status = checkpoint.restore(path)
    observed = [type(status).__name__,
                compat_util.outcome(status.assert_consumed)]
    status.initialize_or_restore(program.session)
    observed += [compat_util.outcome(status.assert_consumed),
                 program.run([root.a, root.b, checkpoint.save_counter])]
    return observed

  results = _run_both(scenario)
  _assert_same(results)
  assert results["ours"][1:] == ["AssertionError", "ok", [10., 20., 3]]


def test_session_with_feed_dict_additions():
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    x = tf.compat.v1.placeholder(tf.float32)
    y = tf.compat.v1.placeholder(tf.float32)
    wrapped = util._SessionWithFeedDictAdditions(session, {x: 2.})  # pylint: disable=protected-access
    assert wrapped.run(x * 3.) == 6.
    feed = {y: 5.}
    assert wrapped.run(x + y, feed_dict=feed) == 7.
    assert feed == {y: 5.}  # The caller's feed dict is not modified.


def _bad_checkpoint_restore(program, directory, problem):
  """Restores a checkpoint whose value for `root.b` does not fit.

  Returns:
    (the exception raised or None, the values of `root.a` and `root.b`
    before and after).
  """
  key = "root/b/.ATTRIBUTES/VARIABLE_VALUE"
  path = _write(program, os.path.join(directory, "ckpt"), a=10.,
                b=[20., 21.] if problem == "shape" else 20.)
  if problem == "missing":  # Rewrite the checkpoint without `b`'s value.
    reader = tf.train.load_checkpoint(path)
    keys = [k for k in reader.get_variable_to_shape_map() if k != key]
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
      session.run(tf.raw_ops.SaveV2(
          prefix=path, tensor_names=keys, shape_and_slices=[""] * len(keys),
          tensors=[reader.get_tensor(k) for k in keys]))
  root = program.autotrackable()
  root.a = program.variable("a", 1.)
  if problem == "dtype":
    root.b = tf.compat.v1.get_variable("b", initializer=tf.constant(2))
  else:
    root.b = program.variable("b", 2.)
  checkpoint = program.checkpoint(root=root)
  checkpoint.restore(None).initialize_or_restore(program.session)
  before = program.run([root.a, root.b])
  error = None
  try:
    checkpoint.restore(path).run_restore_ops(program.session)
  except (ValueError, tf.errors.OpError) as e:
    error = e
  return error, before, program.run([root.a, root.b])


@pytest.mark.parametrize("problem", ["shape", "dtype", "missing"])
def test_bad_checkpoints_name_the_key_and_leave_variables_untouched(
    tmp_path, problem):
  """A mismatched or missing value fails the restore; nothing is assigned.

  TensorFlow fails at `run_restore_ops` for a wrong dtype or a missing key
  but silently reshapes a resource variable to a checkpointed shape; we
  fail in `restore()`, before building any restore op, in all three cases.
  """
  results = {}
  for impl in IMPLS:
    program = Program(impl)
    results[impl] = _bad_checkpoint_restore(
        program, os.path.join(tmp_path, impl), problem)
    program.close()
  error, before, after = results["ours"]
  assert "'root/b/.ATTRIBUTES/VARIABLE_VALUE'" in str(error)
  assert "'root/b'" in str(error)
  np.testing.assert_equal(after, before)
  their_error, their_before, their_after = results["tf"]
  if problem == "shape":
    assert their_error is None
    np.testing.assert_equal(their_after, [10., [20., 21.]])
  else:
    assert type(their_error) is type(error)  # pylint: disable=unidiomatic-typecheck
    np.testing.assert_equal(their_after, their_before)
