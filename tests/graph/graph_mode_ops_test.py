"""Graph growth of graph-mode save and restore, against TensorFlow's.

Each scenario is a list of steps (save, write, restore and run its ops,
...) run once with `tf.compat.v1.train.Checkpoint` and once with
`tf_objckpt.CheckpointV1`, counting `len(graph.get_operations())` after
every step. Repeating a step adds no op, and no step adds more ops than the
same step adds in TensorFlow. Saves through cached ops still save the
current state, and restores through cached ops restore the values of the
checkpoint they are given: the model trains away from them first, and new
checkpoints come between restores.

Covers: tf_objckpt.api.trackable_saver, tf_objckpt.engine.multi_device_saver,
tf_objckpt.checkpoint, tf_objckpt.checkpoint_management,
tf_objckpt.api.object_checkpoints, tf_objckpt.api.checkpoint_manager.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt


def _saved_values(model):
  """`{path: labelled values}` of the checkpoints saved for `model`."""
  if not hasattr(model, "saved_values"):
    model.saved_values = {}
  return model.saved_values


def _step_save(model, prefix):
  """Saves a checkpoint, and remembers the values it holds."""
  _saved_values(model)[model.save(prefix)] = model.labelled_values()


def _step_train_and_save(model, prefix):
  """A checkpoint of new values."""
  model.train(1)
  _step_save(model, prefix)


def _step_write(model, prefix):
  model.checkpoint.write(prefix, session=model.session)


def _assert_restored(model, path):
  tl.assert_values_equal(_saved_values(model)[path], model.labelled_values())


def _restore_step(run="run_restore_ops", which="newest"):
  """A step that restores a checkpoint and checks what it restored.

  The model trains first, so every value differs from the checkpoint's;
  then `restore()` of the newest checkpoint under the prefix, or of the
  first one saved, and its status's `run`.
  """

  def step(model, prefix):
    model.train()
    if which == "newest":
      path = tf_objckpt.latest_checkpoint(os.path.dirname(prefix))
    else:
      path = next(iter(_saved_values(model)))
    getattr(model.checkpoint.restore(path), run)(model.session)
    _assert_restored(model, path)

  return step


_step_restore = _restore_step()


def _step_restore_or_initialize(model, prefix):
  """A restarting job: its manager restores, then the restore ops run."""
  model.train()
  manager = tl.IMPLS[model.impl].CheckpointManager(
      model.checkpoint,
      os.path.dirname(prefix),
      max_to_keep=5,
      checkpoint_name=os.path.basename(prefix))
  path = manager.restore_or_initialize()
  model.checkpoint.restore(path).run_restore_ops(model.session)
  _assert_restored(model, path)


def _step_grow(model, prefix):
  """Adds a dependency: the object graph changes, so the save op is rebuilt."""
  del prefix
  model.root.extra = tf.compat.v1.get_variable("extra", [5])
  model.run(model.root.extra.initializer)


def _op_growth(impl, kind, steps, directory, prepare=None):
  """Runs `steps` on a trained model; returns the ops each step added."""
  prefix = os.path.join(directory, impl, "ckpt")
  growth = []
  with tl.GraphModel(impl, kind) as model:
    model.initialize()
    model.train()
    if prepare is not None:
      prepare(model, prefix)
    for step in steps:
      before = model.num_ops()
      step(model, prefix)
      growth.append(model.num_ops() - before)
  return growth


def _assert_no_more_than_tensorflow(tmp_path, kind, steps, prepare=None):
  theirs = _op_growth("tf", kind, steps, tmp_path, prepare)
  ours = _op_growth("ours", kind, steps, tmp_path, prepare)
  assert all(o <= t for o, t in zip(ours, theirs)), (
      f"ops added by each step: ours {ours}, TensorFlow's {theirs}")
  return ours


@pytest.mark.parametrize("kind", tl.VARIABLE_KINDS)
def test_repeated_saves_and_writes_add_no_ops(tmp_path, kind):
  ours = _assert_no_more_than_tensorflow(tmp_path, kind,
                                         [_step_save] * 10 + [_step_write] * 3)
  assert ours[0] > 0
  assert ours[1:] == [0] * 12


@pytest.mark.parametrize("kind", tl.VARIABLE_KINDS)
def test_repeated_restores_add_no_ops(tmp_path, kind):
  """Restore ops are cached by key, shared by every restore of the objects.

  Each restore restores its own checkpoint's values: new checkpoints come
  between the restores, and some restores go back to the first.
  """
  first = _restore_step(which="first")
  initialize_newest = _restore_step("initialize_or_restore")
  initialize_first = _restore_step("initialize_or_restore", "first")
  ours = _assert_no_more_than_tensorflow(
      tmp_path,
      kind, [
          _step_restore, _step_train_and_save, _step_restore, first,
          initialize_newest, _step_train_and_save, initialize_first, first,
          _step_train_and_save, _step_restore
      ],
      prepare=_step_save)
  assert ours[0] > 0  # The first restore builds the restore ops.
  assert ours[1:] == [0] * 9


@pytest.mark.parametrize("kind", tl.VARIABLE_KINDS)
def test_repeated_restore_or_initialize_adds_no_ops(tmp_path, kind):
  """Checking every value first reads eagerly: it adds no op either."""
  ours = _assert_no_more_than_tensorflow(
      tmp_path,
      kind, [
          _step_restore_or_initialize, _step_train_and_save,
          _step_restore_or_initialize, _step_train_and_save,
          _step_restore_or_initialize,
          _restore_step(which="first")
      ],
      prepare=_step_save)
  assert ours[0] > 0
  assert ours[1:] == [0] * 5


def _saved_by_another_program(model, prefix):
  with tl.GraphModel(model.impl, model.kind) as other:
    other.initialize()
    _saved_values(model)[other.save(prefix)] = other.labelled_values()


@pytest.mark.parametrize("kind", tl.VARIABLE_KINDS)
def test_restore_first_then_save(tmp_path, kind):
  """Saves reuse the saveables restores made."""
  ours = _assert_no_more_than_tensorflow(
      tmp_path,
      kind, [_step_restore, _step_save, _step_save, _step_restore, _step_save],
      prepare=_saved_by_another_program)
  assert ours[0] > 0 and ours[1] > 0
  assert ours[2:] == [0, 0, 0]


def test_changes_to_the_object_graph_rebuild_the_save_op_once(tmp_path):
  ours = _assert_no_more_than_tensorflow(tmp_path, "resource", [
      _step_save, _step_save, _step_grow, _step_save, _step_save, _step_restore,
      _step_restore
  ])
  assert ours[1] == 0 and ours[4] == 0 and ours[6] == 0
  assert ours[3] > 0


def test_op_counts_after_one_two_and_ten_saves(tmp_path):
  """The issue's table: total ops added after 1, 2 and 10 saves."""
  totals = {}
  for impl in tl.IMPLS:
    growth = _op_growth(impl, "resource", [_step_save] * 10, tmp_path)
    totals[impl] = [sum(growth[:n]) for n in (1, 2, 10)]
  ours, theirs = totals["ours"], totals["tf"]
  assert ours[0] == ours[1] == ours[2] < theirs[0]


def test_python_state_saves_add_no_ops(tmp_path):
  """Changing Python state is fed; the save op is not rebuilt."""
  growth = {}
  for state in (tl.TfStringState(), tl.StringState()):
    prefix = os.path.join(tmp_path, state.impl, "ckpt")
    with tl.GraphProgram(state.impl) as program:
      checkpoint = program.lib.CheckpointV1(state=state)
      growth[state.impl] = []
      for step in range(5):
        state.state = str(step)
        before = program.num_ops()
        path = checkpoint.save(prefix, session=program.session)
        growth[state.impl].append(program.num_ops() - before)
        assert tf.train.load_checkpoint(path).get_tensor(
            "state/.ATTRIBUTES/py_state") == str(step).encode()
  assert all(o <= t for o, t in zip(growth["ours"], growth["tf"])), growth
  assert growth["ours"][1:] == [0] * 4


def test_deferred_restore_ops_are_cached_too(tmp_path):
  """Restore ops made for dependencies added after restore() are reused.

  They restore each checkpoint's values: two checkpoints of different
  values, restored in turn into a model trained away from both.
  """
  with tl.GraphModel("ours") as saved:
    saved.initialize()
    checkpoints = {}
    for _ in range(2):
      saved.train(1)
      checkpoints[saved.save(os.path.join(tmp_path,
                                          "ckpt"))] = (saved.labelled_values())
  first, second = checkpoints
  with tl.GraphModel("ours", create_optimizer=False) as model:
    status = model.checkpoint.restore(first)
    model.create_slots()  # Slot restore ops are created here.
    status.assert_consumed().run_restore_ops(model.session)
    tl.assert_values_equal(checkpoints[first], model.labelled_values())
    before = model.num_ops()
    for path in (second, first, second):
      model.train()
      model.checkpoint.restore(path).assert_consumed().run_restore_ops(
          model.session)
      tl.assert_values_equal(checkpoints[path], model.labelled_values())
    assert model.num_ops() == before


@pytest.mark.parametrize("grow", [False, True])
def test_saves_through_cached_ops_follow_the_state(tmp_path, grow):
  """In a session, variables and Python state are read at every save."""
  results = {}
  for impl in tl.IMPLS:
    with tl.GraphProgram(impl) as program:
      program.track(
          tf.compat.v1.get_variable(f"v{i}", initializer=0.) for i in range(20))
      program.root.counter = tl.Counter()
      paths = []
      for step in range(3):
        program.run(program.variables[step].assign(10.0 + step))
        program.root.counter.count = step
        if grow and step == 1:
          program.root.extra = program.variable("extra", 5.)
          program.run(program.root.extra.initializer)
        paths.append(
            program.checkpoint.write(os.fspath(tmp_path / f"{impl}{step}"),
                                     session=program.session))
    results[impl] = paths
  for theirs, ours in zip(results["tf"], results["ours"]):
    tl.assert_same_checkpoint(theirs, ours)
  assert tl.values(
      results["ours"]
      [-1])["root/variables/2/.ATTRIBUTES/VARIABLE_VALUE"] == np.float32(12.0)
