"""Graph-mode behaviour of tf_objckpt.CheckpointV1 and its load statuses.

Scenarios run in a `tf.Graph` with a `tf.compat.v1.Session`. Where
TensorFlow has the behaviour, the scenario runs once with
`tf.compat.v1.train.Checkpoint` and TensorFlow's AutoTrackable and once with
ours, and what it observes (values, uninitialized variables, which
assertions pass, exception types) must be equal.

Covers: tf_objckpt.checkpoint, tf_objckpt.api.load_status,
tf_objckpt.api.trackable_saver, tf_objckpt.restore,
tf_objckpt.api.object_checkpoints, tf_objckpt.restoring.checkpoint_position.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt
from tf_objckpt.api import trackable_saver


def _train_and_save(program, prefix, steps):
  """The documented CheckpointV1 loop, resuming from the latest checkpoint."""
  root = program.lib.AutoTrackable()
  root.w = program.variable("w", [[1., 2.], [3., 4.]])
  root.b = program.variable("b", [0.5, -0.5])
  loss = tf.reduce_sum(tf.square(tf.matmul([[1., 1.]], root.w) + root.b))
  optimizer = tf.compat.v1.train.AdamOptimizer(0.1)
  checkpoint = program.lib.CheckpointV1(optimizer=optimizer, model=root)
  status = checkpoint.restore(
      tf_objckpt.latest_checkpoint(os.path.dirname(prefix)))
  train_op = optimizer.minimize(loss)
  observed = [type(status).__name__]
  status.initialize_or_restore(program.session)
  paths = []
  for _ in range(steps):
    program.run(train_op)
    paths.append(
        os.path.basename(
            checkpoint.save(file_prefix=prefix, session=program.session)))
  observed += [
      paths,
      program.run([root.w, root.b, checkpoint.save_counter] +
                  optimizer.variables())
  ]
  return observed


def test_documented_training_loop_resumes_like_tensorflow(tmp_path):

  def scenario(program):
    prefix = os.path.join(tmp_path, program.impl, "ckpt")
    first = _train_and_save(program, prefix, steps=2)
    with tl.GraphProgram(program.impl) as resumed:  # The program runs again.
      second = _train_and_save(resumed, prefix, steps=3)
    return first, second

  results = tl.in_graph_programs(scenario)
  tl.assert_agree(results)
  first, second = results["ours"]
  assert first[:2] == ["InitializationOnlyStatus", ["ckpt-1", "ckpt-2"]]
  assert second[:2] == ["CheckpointLoadStatus", ["ckpt-3", "ckpt-4", "ckpt-5"]]


def _three_variables(program):
  """A root with `a`, `b` and `c`; returns (root, checkpoint)."""
  root = program.lib.AutoTrackable()
  root.a = program.variable("a", 1.)
  root.b = program.variable("b", 2.)
  root.c = program.variable("c", 3.)
  return root, program.lib.CheckpointV1(root=root)


def test_initialize_or_restore_respects_later_restores(tmp_path):
  """Objects a later restore() covers are left for it, not initialized."""

  def scenario(program):
    directory = os.path.join(tmp_path, program.impl)
    first = tl.write_in_graph(program.impl,
                              os.path.join(directory, "first"),
                              a=10.)
    second = tl.write_in_graph(program.impl,
                               os.path.join(directory, "second"),
                               a=20.,
                               b=30.)
    root, checkpoint = _three_variables(program)
    first_status = checkpoint.restore(first)
    second_status = checkpoint.restore(second)
    first_status.expect_partial().initialize_or_restore(program.session)
    observed = [program.uninitialized(), program.run([root.a, root.c])]
    second_status.expect_partial().initialize_or_restore(program.session)
    observed.append(program.run([root.a, root.b, root.c]))
    return observed

  results = tl.in_graph_programs(scenario)
  tl.assert_agree(results)
  assert results["ours"][0] == [b"b"]
  np.testing.assert_equal(results["ours"][1:], [[10., 3.], [20., 30., 3.]])


def test_initialization_only_status_initializes(tmp_path):

  def scenario(program):
    path = tl.write_in_graph(program.impl,
                             os.path.join(tmp_path, program.impl, "ckpt"),
                             a=10.)
    root, checkpoint = _three_variables(program)
    nothing = checkpoint.restore(None)
    observed = [type(nothing).__name__] + tl.assertion_outcomes(
        nothing, tl.STATUS_ASSERTIONS + ("run_restore_ops",))
    later = checkpoint.restore(path).expect_partial()
    nothing.initialize_or_restore(program.session)
    observed.append(program.uninitialized())  # `a` waits for `later`.
    later.run_restore_ops(program.session)
    observed.append(program.run([root.a, root.b, root.c]))
    return observed

  results = tl.in_graph_programs(scenario)
  tl.assert_agree(results)
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


def _model_and_optimizer(program,
                         with_model=True,
                         with_optimizer=True,
                         minimize=True):
  """Attaches `model` and `optimizer` dependencies as the scenario asks."""
  model = program.lib.AutoTrackable()
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
  return model, optimizer, train_op, program.lib.CheckpointV1(**kwargs)


def _saved_momentum(program, directory):
  """Trains the Momentum model two steps in a graph of its own; saves it."""
  with tl.GraphProgram(program.impl) as saving:
    model, optimizer, train_op, checkpoint = _model_and_optimizer(saving)
    saving.initialize()
    saving.run([train_op])
    saving.run([train_op])
    expected = saving.run([model.w, optimizer.get_slot(model.w, "momentum")])
    return checkpoint.save(os.path.join(directory, "ckpt"),
                           saving.session), expected


def test_assertions_in_graph_mode(tmp_path):

  def scenario(program):
    path, _ = _saved_momentum(program, os.path.join(tmp_path, program.impl))
    model, optimizer, _, checkpoint = _model_and_optimizer(program,
                                                           with_model=False,
                                                           with_optimizer=False,
                                                           minimize=False)
    status = checkpoint.restore(path)
    observed = [tl.assertion_outcomes(status)]
    checkpoint.model = model
    observed.append(tl.assertion_outcomes(status))
    checkpoint.optimizer = optimizer
    observed.append(tl.assertion_outcomes(status))
    optimizer.minimize(tf.reduce_sum(model.w))  # Creates the slots.
    observed.append(tl.assertion_outcomes(status))
    checkpoint.extra = program.variable("extra", 1.)  # Not in the checkpoint.
    observed.append(tl.assertion_outcomes(status))
    return observed

  results = tl.in_graph_programs(scenario)
  tl.assert_agree(results)
  assert results["ours"][3] == ["ok", "ok", "ok"]
  assert results["ours"][4][:2] == ["AssertionError", "AssertionError"]


@pytest.mark.parametrize("created_first", ["model", "optimizer", "slots"])
def test_slot_variables_restore_whatever_is_created_first(
    tmp_path, created_first):
  """Deferred restores: dependencies added after restore() get restore ops."""

  def scenario(program):
    path, expected = _saved_momentum(program,
                                     os.path.join(tmp_path, program.impl))
    model, optimizer, _, checkpoint = _model_and_optimizer(
        program,
        with_model=created_first != "optimizer",
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

  tl.assert_agree(tl.in_graph_programs(scenario))


def test_deferred_dependencies_of_nested_objects(tmp_path):

  def scenario(program):
    path = tl.write_in_graph(program.impl,
                             os.path.join(tmp_path, program.impl, "ckpt"),
                             a=10.,
                             b=20.)
    checkpoint = program.lib.CheckpointV1()
    status = checkpoint.restore(path)
    checkpoint.root = program.lib.AutoTrackable()
    checkpoint.root.a = program.variable("a", 1.)
    observed = [len(status._checkpoint.restore_ops)]  # pylint: disable=protected-access
    checkpoint.root.b = program.variable("b", 2.)
    observed.append(len(status._checkpoint.restore_ops))  # pylint: disable=protected-access
    # The checkpoint, written by write(), has no save counter.
    observed.append(tl.assertion_outcomes(status))
    status.run_restore_ops(program.session)
    observed.append(program.run([checkpoint.root.a, checkpoint.root.b]))
    return observed

  results = tl.in_graph_programs(scenario)
  tl.assert_agree(results)
  assert results["ours"][3] == [10., 20.]


def test_streaming_restore_runs_restore_ops_as_they_are_created(tmp_path):

  def scenario(program):
    streaming_restore = program.lib.checkpoint.streaming_restore
    directory = os.path.join(tmp_path, program.impl)
    path = tl.write_in_graph(program.impl,
                             os.path.join(directory, "ckpt"),
                             a=10.,
                             b=20.)
    checkpoint = program.lib.CheckpointV1()
    status = checkpoint.restore(path)
    checkpoint.root = program.lib.AutoTrackable()
    checkpoint.root.a = program.variable("a", 1.)
    streaming_restore(status, program.session)  # Runs `a`'s restore op.
    observed = [program.run(checkpoint.root.a)]
    checkpoint.root.b = program.variable("b", 2.)  # Restored when tracked.
    observed.append(program.run(checkpoint.root.b))
    name_based = tf.compat.v1.train.Saver([checkpoint.root.a]).save(
        program.session, os.path.join(directory, "name_based"))
    observed.append(
        tl.outcome(lambda: streaming_restore(checkpoint.restore(name_based),
                                             program.session)).name)
    return observed

  results = tl.in_graph_programs(scenario)
  tl.assert_agree(results)
  assert results["ours"] == [10., 20., "NotImplementedError"]


def test_streaming_restore_does_nothing_eagerly(tmp_path):
  """Eagerly, restores already stream: the call changes nothing.

  Values assigned since the restore stay, a variable created afterwards is
  still restored when it is created, and the status passes its assertions.
  """

  def scenario(impl):
    lib = tl.IMPLS[impl]
    saved = lib.AutoTrackable()
    saved.v, saved.later = tf.Variable(1.), tf.Variable(2.)
    path = lib.CheckpointV1(root=saved).save(os.path.join(tmp_path, impl))
    root = lib.AutoTrackable()
    root.v = tf.Variable(0.)
    status = lib.CheckpointV1(root=root).restore(path)
    restored = root.v.numpy()
    root.v.assign(5.)
    returned = lib.checkpoint.streaming_restore(status)
    root.later = tf.Variable(0.)
    return (returned, restored, root.v.numpy(), root.later.numpy(),
            tl.outcome(status.assert_consumed).name)

  observed = {impl: scenario(impl) for impl in tl.IMPLS}
  assert observed["ours"] == observed["tf"] == (None, 1., 5., 2., "ok")


def test_list_objects_and_gather_initializers(tmp_path):
  del tmp_path

  def scenario(program):
    model, optimizer, _, checkpoint = _model_and_optimizer(program)
    del model, optimizer
    objects = program.lib.checkpoint.list_objects(checkpoint)
    initializers = program.lib.checkpoint.gather_initializers(checkpoint)
    return ([type(obj).__name__ for obj in objects
            ], [getattr(obj, "name", None) for obj in objects],
            [op.name for op in initializers])

  results = tl.in_graph_programs(scenario)
  assert results["ours"][2] == ["w/Assign", "w/Momentum/Assign"]
  tl.assert_agree(results)


def test_python_state_is_fed_at_save_time(tmp_path):
  """Each save writes the current state; the cached save op is reused."""
  key = "state/.ATTRIBUTES/py_state"

  def scenario(program):
    state = tl.StringState() if program.impl == "ours" else tl.TfStringState()
    checkpoint = program.lib.CheckpointV1(state=state)
    saved = []
    for value in ("first", "second"):
      state.state = value
      path = checkpoint.save(os.path.join(tmp_path, program.impl, "ckpt"),
                             session=program.session)
      saved.append(tf.train.load_checkpoint(path).get_tensor(key))
    checkpoint.restore(path[:-len("-2")] + "-1")
    return saved, state.restored

  results = tl.in_graph_programs(scenario)
  tl.assert_agree(results)
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

  results = tl.in_graph_programs(scenario)
  tl.assert_agree(results)
  assert results["ours"] == ("ckpt-1", "ckpt_written", 5., [5., 1])


def test_save_counter_is_incremented_by_a_cached_op(tmp_path):

  def scenario(program):
    _, checkpoint = _three_variables(program)
    checkpoint.restore(None).initialize_or_restore(program.session)
    prefix = os.path.join(tmp_path, program.impl, "ckpt")
    checkpoint.save(prefix, session=program.session)
    before = len(program.graph.get_operations())
    paths = [checkpoint.save(prefix, session=program.session) for _ in range(3)]
    return ([os.path.basename(p) for p in paths],
            len(program.graph.get_operations()) - before,
            os.path.basename(
                tf_objckpt.latest_checkpoint(os.path.dirname(prefix))))

  results = tl.in_graph_programs(scenario)
  tl.assert_agree(results)
  assert results["ours"] == (["ckpt-2", "ckpt-3", "ckpt-4"], 0, "ckpt-4")


def test_a_first_save_failing_after_its_ops_are_built_saves_later_objects(
    tmp_path):
  """A first save whose directory cannot be made fails after its count and
  its ops; an object added before the next save is in that save's file,
  and the counts go on from the failed save, as in TensorFlow."""

  def scenario(program):
    root, checkpoint = _three_variables(program)
    checkpoint.restore(None).initialize_or_restore(program.session)
    directory = os.path.join(tmp_path, program.impl)
    os.makedirs(directory)
    blocker = os.path.join(directory, "a_file")
    with open(blocker, "w") as f:
      f.write("not a directory")
    with pytest.raises(Exception) as raised:
      checkpoint.save(os.path.join(blocker, "ckpt"), session=program.session)
    root.d = program.variable("d", 4.)
    program.run(root.d.initializer)
    path = checkpoint.save(os.path.join(directory, "ckpt"),
                           session=program.session)
    keys = sorted(
        key for key in tf.train.list_variables(path) if "OBJECT" not in key[0])
    return (raised.type.__name__, os.path.basename(path), keys,
            tf.train.load_variable(path, "root/d/.ATTRIBUTES/VARIABLE_VALUE"))

  results = tl.in_graph_programs(scenario)
  tl.assert_agree(results)
  assert results["ours"][1:] == ("ckpt-2", [
      ("root/a/.ATTRIBUTES/VARIABLE_VALUE", []),
      ("root/b/.ATTRIBUTES/VARIABLE_VALUE", []),
      ("root/c/.ATTRIBUTES/VARIABLE_VALUE", []),
      ("root/d/.ATTRIBUTES/VARIABLE_VALUE", []),
      ("save_counter/.ATTRIBUTES/VARIABLE_VALUE", [])
  ], 4.)


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
    observed.append(
        len(program.graph.get_operations()) - ops_after_first_restore)
    return observed

  results = tl.in_graph_programs(scenario)
  tl.assert_agree(results)
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

  results = tl.in_graph_programs(scenario)
  tl.assert_agree(results)
  assert results["ours"] == ("ckpt-2", 2)


def test_save_inside_a_function_raises(tmp_path):
  """write() works inside a tf.function; save() raises as the spec says."""
  for impl, lib in tl.IMPLS.items():
    checkpoint = lib.CheckpointV1(v=tf.Variable(1.))
    prefix = os.path.join(tmp_path, impl, "ckpt")

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
      save_counter = tf.compat.v1.get_variable("save_counter",
                                               initializer=tf.constant(
                                                   3, tf.int64))
      session.run(tf.compat.v1.global_variables_initializer())
      path = tf.compat.v1.train.Saver([a, b, save_counter]).save(
          session, os.path.join(tmp_path, program.impl, "names"))
    root = program.lib.AutoTrackable()
    root.a = program.variable("a", 1.)
    root.b = program.variable("b", 2.)
    checkpoint = program.lib.CheckpointV1(root=root)
    status = checkpoint.restore(path)
    observed = [type(status).__name__, tl.outcome(status.assert_consumed).name]
    status.initialize_or_restore(program.session)
    observed += [
        tl.outcome(status.assert_consumed).name,
        program.run([root.a, root.b, checkpoint.save_counter])
    ]
    return observed

  results = tl.in_graph_programs(scenario)
  tl.assert_agree(results)
  assert results["ours"][1:] == ["AssertionError", "ok", [10., 20., 3]]


def test_session_with_feed_dict_additions():
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    x = tf.compat.v1.placeholder(tf.float32)
    y = tf.compat.v1.placeholder(tf.float32)
    wrapped = trackable_saver._FeedingSession(session, {x: 2.})  # pylint: disable=protected-access
    assert wrapped.run(x * 3.) == 6.
    feed = {y: 5.}
    assert wrapped.run(x + y, feed_dict=feed) == 7.
    assert feed == {y: 5.}  # The caller's feed dict is not modified.
