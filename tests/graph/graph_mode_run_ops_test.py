"""Ops added by running restore ops, and the frozen saver's API, against TF.

TensorFlow's `restore()` builds the restore ops; running them
(`run_restore_ops`, `initialize_or_restore`, `streaming_restore`) adds no op
to the graph. No step of ours may add more ops than the same step adds with
`tf.compat.v1.train.Checkpoint`.
"""

import os

import pytest
import tensorflow as tf
from tensorflow.python.checkpoint import checkpoint as tf_checkpoint_lib
from tensorflow.python.trackable import autotrackable as tf_autotrackable

import tf_objckpt

_IMPLS = {"tf": (tf_autotrackable.AutoTrackable, tf.compat.v1.train.Checkpoint,
                 tf_checkpoint_lib),
          "ours": (tf_objckpt.AutoTrackable, tf_objckpt.CheckpointV1,
                   tf_objckpt)}


def _growth_of_running(impl, directory, run):
  """Ops added by `run(status, session)` after a restore() with ops built."""
  autotrackable, checkpoint_cls, module = _IMPLS[impl]
  with tf.Graph().as_default() as graph, tf.compat.v1.Session() as session:
    root = autotrackable()
    root.a = tf.compat.v1.get_variable("a", initializer=1.)
    checkpoint = checkpoint_cls(root=root)
    checkpoint.restore(None).initialize_or_restore(session)
    path = checkpoint.save(os.path.join(directory, impl, "ckpt"),
                           session=session)
    status = checkpoint.restore(path)
    before = len(graph.get_operations())
    run(module, status, session)
    return len(graph.get_operations()) - before


_RUNS = {
    "run_restore_ops": lambda _, status, session: status.run_restore_ops(
        session),
    "initialize_or_restore": (
        lambda _, status, session: status.initialize_or_restore(session)),
    "streaming_restore": (
        lambda module, status, session: module.streaming_restore(
            status, session)),
}


@pytest.mark.parametrize("run", sorted(_RUNS))
def test_running_restore_ops_adds_no_ops(tmp_path, run):
  theirs = _growth_of_running("tf", tmp_path, _RUNS[run])
  assert theirs == 0
  assert _growth_of_running("ours", tmp_path, _RUNS[run]) <= theirs


def test_running_deferred_restores_adds_no_ops(tmp_path):
  """Restore ops created after restore() run without adding ops either."""
  growth = {}
  for impl, (autotrackable, checkpoint_cls, _) in _IMPLS.items():
    with tf.Graph().as_default() as graph, tf.compat.v1.Session() as session:
      saved = autotrackable()
      saved.a = tf.compat.v1.get_variable("saved_a", initializer=5.)
      session.run(saved.a.initializer)
      path = checkpoint_cls(root=saved).write(
          os.path.join(tmp_path, impl, "ckpt"), session=session)
      root = autotrackable()
      status = checkpoint_cls(root=root).restore(path)
      growth[impl] = []
      before = len(graph.get_operations())
      status.run_restore_ops(session)  # Nothing to restore yet.
      growth[impl].append(len(graph.get_operations()) - before)
      root.a = tf.compat.v1.get_variable("a", initializer=1.)
      before = len(graph.get_operations())
      status.run_restore_ops(session)
      growth[impl].append(len(graph.get_operations()) - before)
      assert session.run(root.a) == 5.
  assert growth["tf"] == [0, 0]
  assert growth["ours"] == growth["tf"]


def test_frozen_saver_api_matches_tensorflows(tmp_path):
  """save()/restore() take `options`; save() gives an op, as TF's does."""
  observed = {}
  for impl, (autotrackable, checkpoint_cls, module) in _IMPLS.items():
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
      root = autotrackable()
      root.v = tf.compat.v1.get_variable("v", initializer=1.)
      session.run(root.v.initializer)
      saver = module.frozen_saver(checkpoint_cls(root=root))
      prefix = os.path.join(tmp_path, impl)
      options = tf.train.CheckpointOptions()
      save = saver.save(prefix, options=options)
      result = session.run(save)
      restored = saver.restore(prefix, options=options)
      observed[impl] = (type(save).__name__, result, sorted(restored))
  assert observed["tf"][:2] == ("Operation", None)
  assert observed["ours"] == observed["tf"]
