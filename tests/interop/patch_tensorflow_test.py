"""The switch: `patch_tensorflow()` and `unpatch_tensorflow()`.

After the patch TensorFlow's public names and the attributes its own code
looks its classes up by are ours; after the unpatch they are TensorFlow's
again. Patching twice, from several threads, or over an attribute that
does not hold TensorFlow's object (another library's patch, unknown
TensorFlow internals) behaves as documented, with real module attributes
changed. Last, the other callers the patched attributes reach (tf.data's
save op, the v1 SavedModel builder and loader, TensorFlow's own name-based
restore) work with our classes.

Covers: tf_objckpt.tools.patching.
"""

import contextlib
import importlib
import os
import sys
import threading

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt
from tf_objckpt.tools import patching

_TF = tl.IMPLS["tf"]
# Public names: (TensorFlow's object, ours).
_PUBLIC = {
    "train.Checkpoint": (_TF.Checkpoint, tf_objckpt.Checkpoint),
    "train.CheckpointManager":
        (_TF.CheckpointManager, tf_objckpt.CheckpointManager),
    "compat.v1.train.Checkpoint": (_TF.CheckpointV1, tf_objckpt.CheckpointV1),
    "compat.v1.train.CheckpointManager":
        (_TF.CheckpointManager, tf_objckpt.CheckpointManager),
    "compat.v1.train.Saver": (_TF.Saver, tl.IMPLS["ours"].Saver),
    "compat.v2.train.Checkpoint": (_TF.Checkpoint, tf_objckpt.Checkpoint),
    "compat.v2.train.CheckpointManager":
        (_TF.CheckpointManager, tf_objckpt.CheckpointManager),
}


def _public(name):
  value = tf
  for part in name.split("."):
    value = getattr(value, part)
  return value


def _target_values():
  """What every patched attribute holds now."""
  return [
      getattr(patching._module(t.module), t.attribute)  # pylint: disable=protected-access
      for t in patching._TARGETS
  ]  # pylint: disable=protected-access


def _ours():
  return [t.role.ours for t in patching._TARGETS]  # pylint: disable=protected-access


def _assert_tensorflows():
  """No target holds ours, and the public names are TensorFlow's."""
  assert not set(map(id, _target_values())) & set(map(id, _ours()))
  for name, (tensorflows, _) in _PUBLIC.items():
    assert _public(name) is tensorflows, name


@contextlib.contextmanager
def _replaced(target, value):
  """Sets a target attribute to `value` (or deletes it, for None)."""
  module = patching._module(target.module)  # pylint: disable=protected-access
  original = getattr(module, target.attribute)
  if value is None:
    delattr(module, target.attribute)
  else:
    setattr(module, target.attribute, value)
  try:
    yield
  finally:
    setattr(module, target.attribute, original)


def _foreign(original):
  """What another library's patch might put in place of `original`."""
  if isinstance(original, type):
    return type(original.__name__, (original,), {"__module__": "other_lib"})
  return lambda *args, **kwargs: original(*args, **kwargs)


def _target_id(target):
  return f"{target.module}.{target.attribute}"


# ----------------------------------------------------------------------------
# The switch.
# ----------------------------------------------------------------------------


def test_public_names_are_ours_while_patched_and_tensorflows_after():
  _assert_tensorflows()
  before = tf.train.Checkpoint(v=tf.Variable(1.))
  tf_objckpt.patch_tensorflow()
  try:
    assert patching.is_patched()
    for name, (_, ours) in _PUBLIC.items():
      assert _public(name) is ours, name
    during = tf.train.Checkpoint(v=tf.Variable(1.))
    assert type(during) is tf_objckpt.Checkpoint
    assert type(tf.compat.v1.train.Checkpoint()) is tf_objckpt.CheckpointV1
    # Objects made before the patch keep TensorFlow's class, so isinstance
    # checks against the patched names no longer accept them.
    assert not isinstance(before, tf.train.Checkpoint)
  finally:
    tf_objckpt.unpatch_tensorflow()
  assert not patching.is_patched()
  _assert_tensorflows()
  assert type(tf.train.Checkpoint()) is _TF.Checkpoint
  assert type(during) is tf_objckpt.Checkpoint  # Made while patched: ours.


def test_patching_twice_and_unpatching_twice_change_nothing_more():
  tf_objckpt.patch_tensorflow()
  try:
    tf_objckpt.patch_tensorflow()
    assert _target_values() == _ours()
  finally:
    tf_objckpt.unpatch_tensorflow()
  tf_objckpt.unpatch_tensorflow()
  _assert_tensorflows()


def test_patch_and_unpatch_from_many_threads_never_mix_the_state():
  errors = []
  barrier = threading.Barrier(8)

  def toggle(index):
    try:
      barrier.wait()
      for _ in range(50):
        if index % 2:
          tf_objckpt.patch_tensorflow()
        else:
          tf_objckpt.unpatch_tensorflow()
    except Exception as error:  # pylint: disable=broad-except
      errors.append(error)

  threads = [threading.Thread(target=toggle, args=(i,)) for i in range(8)]
  interval = sys.getswitchinterval()
  sys.setswitchinterval(1e-6)  # Switch threads often, mid-patch included.
  try:
    for thread in threads:
      thread.start()
    for thread in threads:
      thread.join()
    sys.setswitchinterval(interval)
    assert not errors
    values = _target_values()
    assert values == _ours() or not set(map(id, values)) & set(map(id, _ours()))
  finally:
    sys.setswitchinterval(interval)
    tf_objckpt.unpatch_tensorflow()
  _assert_tensorflows()


def test_a_patch_waits_for_the_one_in_progress():
  """One call at a time: a second waits while the lock is held."""
  thread = threading.Thread(target=tf_objckpt.patch_tensorflow)
  try:
    with patching._LOCK:  # pylint: disable=protected-access
      thread.start()
      thread.join(timeout=2)
      assert thread.is_alive()
      _assert_tensorflows()
    thread.join()
    assert patching.is_patched()
  finally:
    tf_objckpt.unpatch_tensorflow()


@pytest.mark.parametrize("target", patching._TARGETS, ids=_target_id)  # pylint: disable=protected-access
def test_a_foreign_object_anywhere_refuses_the_patch_and_changes_nothing(
    target):
  original = getattr(patching._module(target.module), target.attribute)  # pylint: disable=protected-access
  foreign = _foreign(original)
  with _replaced(target, foreign):
    before = _target_values()
    with pytest.raises(RuntimeError, match="Nothing was changed") as raised:
      tf_objckpt.patch_tensorflow()
    assert _target_id(target) in str(raised.value)
    assert _target_values() == before
    assert not patching.is_patched()
  tf_objckpt.patch_tensorflow()  # TensorFlow's objects back: it patches.
  tf_objckpt.unpatch_tensorflow()
  _assert_tensorflows()


def test_a_missing_attribute_refuses_the_patch_and_changes_nothing():
  target = patching._TARGETS[-1]  # pylint: disable=protected-access
  with _replaced(target, None):
    with pytest.raises(RuntimeError, match="not found. Nothing was changed"):
      tf_objckpt.patch_tensorflow()
  _assert_tensorflows()


def test_unpatch_refuses_when_someone_patched_over_ours(patched):
  del patched
  target = patching._TARGETS[0]  # pylint: disable=protected-access
  with _replaced(target, _foreign(target.role.ours)):
    before = _target_values()
    with pytest.raises(RuntimeError, match="changed since patch_tensorflow"):
      tf_objckpt.unpatch_tensorflow()
    assert _target_values() == before
  assert patching.is_patched()


def test_tensorflow_internals_look_up_our_classes(patched):
  del patched
  for module, name in [("tensorflow.python.training.saver", "Saver"),
                       ("tensorflow.python.checkpoint.checkpoint",
                        "Checkpoint"),
                       ("tensorflow.python.checkpoint.checkpoint_management",
                        "CheckpointManager")]:
    assert getattr(importlib.import_module(module),
                   name).__module__.startswith("tf_objckpt.")
  with tf.Graph().as_default():
    tf.compat.v1.get_variable("v", shape=[2])
    saver = tf.compat.v1.train.Scaffold().finalize().saver
  assert type(saver) is tl.IMPLS["ours"].Saver


# ----------------------------------------------------------------------------
# Other callers the patched attributes reach.
# ----------------------------------------------------------------------------


def _saved_lines(messages):
  return [m for m in messages if m.startswith("Saved checkpoint ")]


def _save_dataset(directory):
  """tf.data's save op, checkpointing its progress; returns the latest."""
  dataset = tf.data.Dataset.range(6)
  checkpoints = os.path.join(directory, "progress")
  dataset.save(os.path.join(directory, "data"),
               checkpoint_args={
                   "directory": checkpoints,
                   "max_to_keep": 2
               })
  return tf.train.latest_checkpoint(checkpoints)


def test_tf_data_save_op_checkpoints_through_ours(tmp_path, patched):
  del patched
  with tl.captured_logs(level="INFO") as messages:
    ours = _save_dataset(str(tmp_path / "ours"))
  assert any(ours in line for line in _saved_lines(messages))
  tf_objckpt.unpatch_tensorflow()
  reference = _save_dataset(str(tmp_path / "tf"))
  assert os.path.basename(ours) == os.path.basename(reference)
  assert tl.signature(ours) == tl.signature(reference)


def test_v1_saved_model_builder_and_loader_use_our_saver(tmp_path, patched):
  del patched
  export_dir = str(tmp_path / "model")
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    variable = tf.compat.v1.get_variable("v", initializer=[1., 2.])
    session.run(variable.initializer)
    builder = tf.compat.v1.saved_model.Builder(export_dir)
    with tl.captured_logs(level="INFO") as messages:
      builder.add_meta_graph_and_variables(session, ["serve"])
    builder.save()
  assert _saved_lines(messages)
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    with tl.captured_logs(level="INFO") as messages:
      tf.compat.v1.saved_model.load(session, ["serve"], export_dir)
    assert any(m.startswith("Restored checkpoint ") for m in messages)
    np.testing.assert_array_equal(
        session.run(tf.compat.v1.global_variables()[0]), [1., 2.])
  tf_objckpt.unpatch_tensorflow()
  loaded = tf.saved_model.load(export_dir)  # TensorFlow reads it.
  np.testing.assert_array_equal(loaded.variables[0].numpy(), [1., 2.])


def test_tensorflows_name_based_restore_runs_our_saver(tmp_path, patched):
  del patched
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    variable = tf.compat.v1.get_variable("w", initializer=[3., 4.])
    session.run(variable.initializer)
    prefix = tf.compat.v1.train.Saver([variable
                                      ]).save(session,
                                              str(tmp_path / "name_based"))
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    variable = tf.compat.v1.get_variable("w", initializer=[0., 0.])
    # TensorFlow's checkpoint (made with TensorFlow's class): its
    # name-based status builds the patched module's Saver.
    status = _TF.Checkpoint(w=variable).read(prefix)
    with tl.captured_logs(level="INFO") as messages:
      status.run_restore_ops(session)
    assert any(m.startswith(f"Restored checkpoint {prefix}") for m in messages)
    np.testing.assert_array_equal(session.run(variable), [3., 4.])


def test_scaffold_turns_our_checkpoint_into_our_saver(tmp_path, patched):
  del patched
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    weight = tf.Variable(2., name="weight")
    initialize = tf.compat.v1.global_variables_initializer()
    # A Checkpoint given as the saver: Scaffold recognises ours and builds
    # the patched Saver from its saveables.
    scaffold = tf.compat.v1.train.Scaffold(
        saver=tf.train.Checkpoint(step=step, weight=weight)).finalize()
    assert type(scaffold.saver) is tl.IMPLS["ours"].Saver
    with tf.compat.v1.Session() as session:
      session.run(initialize)
      prefix = scaffold.saver.save(session, str(tmp_path / "ckpt"))
  assert tf.train.load_checkpoint(prefix).get_tensor(
      "weight/.ATTRIBUTES/VARIABLE_VALUE") == 2.
  assert "step/.ATTRIBUTES/VARIABLE_VALUE" in tl.signature(prefix)
