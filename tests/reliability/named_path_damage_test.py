"""A damaged checkpoint the user names: no fallback, a pointer to one.

`checkpoint.restore(manager.latest_checkpoint)`, `read(...)`, graph-mode
restore ops and `saver.restore(sess, tf.train.latest_checkpoint(d))` (of a
name-based or an object-based checkpoint) restore the path they are given. With real damage on the newest of three
checkpoints, each raises TensorFlow's error type (as TensorFlow does for
the same call) and assigns nothing; our message then names the newest
intact checkpoint the state file lists, which `restore_or_initialize()`
would have restored. No intact one listed, or an error that is not damage
(a shape mismatch): no such line.

Covers: tf_objckpt.api.named_restores.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl

_SIZE = 64
_HINT = ("The state file of {directory!r} lists an older intact checkpoint, "
         "{path!r}: CheckpointManager.restore_or_initialize() would have "
         "restored it, skipping damaged ones. A restore of a path you name "
         "never falls back.")


def _saved(directory, impl):
  """ckpt-1 .. ckpt-3 of a manager, each holding its number."""
  model = tf.Module()
  model.v = tf.Variable(np.zeros([_SIZE], np.float32), name="v")
  manager = tl.IMPLS[impl].CheckpointManager(
      tl.IMPLS[impl].Checkpoint(model=model), directory, max_to_keep=3)
  for number in (1, 2, 3):
    model.v.assign(np.full([_SIZE], number, np.float32))
    manager.save()
  return directory


def _saved_by_saver(directory, impl):
  """model-1 .. model-3 of a v1 `Saver`, each holding its number."""
  os.makedirs(directory)
  with tl.GraphProgram(impl) as program:
    v = tf.compat.v1.get_variable("v",
                                  initializer=np.zeros([_SIZE], np.float32))
    number = tf.compat.v1.placeholder(tf.float32, [])
    assign = v.assign(tf.fill([_SIZE], number))
    saver = tl.IMPLS[impl].Saver(max_to_keep=3)
    for step in (1, 2, 3):
      program.session.run(assign, {number: step})
      saver.save(program.session,
                 os.path.join(directory, "model"),
                 global_step=step)
  return directory


def _restore_eagerly(impl, path, method, size=_SIZE):
  model = tf.Module()
  model.v = tf.Variable(np.zeros([size], np.float32))
  checkpoint = tl.IMPLS[impl].Checkpoint(model=model)
  error = tl.outcome(getattr(checkpoint, method), path).error
  return error, model.v.numpy()


def _restore_in_graph(impl, path):
  with tl.GraphProgram(impl) as program:
    model = tf.Module()
    model.v = tf.compat.v1.get_variable("v",
                                        initializer=np.zeros([_SIZE],
                                                             np.float32))
    program.session.run(model.v.initializer)
    checkpoint = tl.IMPLS[impl].CheckpointV1(model=model)
    error = tl.outcome(
        lambda: checkpoint.restore(path).run_restore_ops(program.session)).error
    return error, program.session.run(model.v)


def _restore_with_saver(impl, path):
  with tl.GraphProgram(impl) as program:
    v = tf.compat.v1.get_variable("v",
                                  initializer=np.zeros([_SIZE], np.float32))
    program.session.run(v.initializer)
    error = tl.outcome(tl.IMPLS[impl].Saver().restore, program.session,
                       path).error
    return error, program.session.run(v)


_WAYS = {
    "restore": (_saved, "ckpt",
                lambda impl, path: _restore_eagerly(impl, path, "restore")),
    "read": (_saved, "ckpt",
             lambda impl, path: _restore_eagerly(impl, path, "read")),
    "graph": (_saved, "ckpt", _restore_in_graph),
    "saver": (_saved_by_saver, "model", _restore_with_saver),
    # Through the names the object graph records.
    "saver_object_based": (_saved, "ckpt", _restore_with_saver),
}


def _damaged(tmp_path, way, impl, how, numbers):
  """The checkpoints saved `way`, those of `numbers` damaged `how`."""
  save, name, _ = _WAYS[way]
  directory = save(str(tmp_path / impl), impl)
  key = "v" if way == "saver" else "model/v/.ATTRIBUTES/VARIABLE_VALUE"
  for number in numbers:
    tl.damage(os.path.join(directory, f"{name}-{number}"), how, key)
  return directory, name


def _latest(directory):
  """The newest checkpoint its state file lists, as
  `manager.latest_checkpoint` gives it (`tf.train.latest_checkpoint` gives
  None when its `.index` is missing)."""
  return tf.train.get_checkpoint_state(directory).model_checkpoint_path


@pytest.mark.parametrize("how", sorted(tl.DAMAGE))
@pytest.mark.parametrize("way", sorted(_WAYS))
def test_the_error_names_the_intact_checkpoint(tmp_path, way, how):
  results = {}
  for impl in tl.IMPLS:
    directory, name = _damaged(tmp_path, way, impl, how, [3])
    latest = _latest(directory)
    assert latest == os.path.join(directory, f"{name}-3")
    results[impl] = _WAYS[way][2](impl, latest)
  (tf_error, _), (error, value) = results["tf"], results["ours"]
  if how == "truncated":  # TensorFlow: IndexError, OutOfRangeError (API.md).
    assert isinstance(error, tf.errors.DataLossError), error
    assert isinstance(tf_error, (IndexError, tf.errors.OutOfRangeError))
  else:
    assert type(error) is type(tf_error), (error, tf_error)  # pylint: disable=unidiomatic-typecheck
  np.testing.assert_array_equal(value, 0.)  # Nothing restored.
  directory = str(tmp_path / "ours")
  assert str(error).count("The state file of") == 1
  assert _HINT.format(directory=directory,
                      path=os.path.join(directory,
                                        f"{name}-2")) in str(error), str(error)


@pytest.mark.parametrize("way", sorted(_WAYS))
def test_damaged_ones_are_passed_over(tmp_path, way):
  directory, name = _damaged(tmp_path, way, "ours", "flipped", [3, 2])
  error, _ = _WAYS[way][2]("ours", _latest(directory))
  assert _HINT.format(directory=directory,
                      path=os.path.join(directory,
                                        f"{name}-1")) in str(error), str(error)


@pytest.mark.parametrize("way", sorted(_WAYS))
def test_no_intact_checkpoint_no_pointer(tmp_path, way):
  directory, _ = _damaged(tmp_path, way, "ours", "truncated", [1, 2, 3])
  error, _ = _WAYS[way][2]("ours", _latest(directory))
  assert isinstance(error, tf.errors.DataLossError), error
  assert "The state file of" not in str(error)


def test_an_error_that_is_no_damage_has_no_pointer(tmp_path):
  directory, _ = _damaged(tmp_path, "restore", "ours", "truncated", [])
  error, _ = _restore_eagerly("ours",
                              os.path.join(directory, "ckpt-3"),
                              "restore",
                              size=_SIZE + 1)
  assert isinstance(error, ValueError), error
  assert "The state file of" not in str(error)
