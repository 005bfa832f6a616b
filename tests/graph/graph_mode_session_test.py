"""Which session graph-mode CheckpointV1 calls use when none is given.

With no `session` argument and no default session, TensorFlow's
`tf.compat.v1.train.Checkpoint` asks the session provider registered with
`tf.__internal__.tracking.register_session_provider` (tf_keras registers its
backend session, so Keras graph-mode programs save and restore without
passing a session). Without a provider, `write()` raises a RuntimeError
telling the user to create a session.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.checkpoint import checkpoint as tf_checkpoint_lib
from tensorflow.python.trackable import autotrackable as tf_autotrackable

import tf_objckpt

_IMPLS = {"tf": (tf_autotrackable.AutoTrackable, tf.compat.v1.train.Checkpoint),
          "ours": (tf_objckpt.AutoTrackable, tf_objckpt.CheckpointV1)}


def _outcome(fn):
  try:
    fn()
    return "ok"
  except Exception as e:  # pylint: disable=broad-except
    return type(e).__name__


def _save_and_restore_without_session(impl, directory):
  """Runs in a graph whose session only the session provider knows."""
  autotrackable, checkpoint_cls = _IMPLS[impl]
  graph = tf.Graph()
  session = tf.compat.v1.Session(graph=graph)
  tf.__internal__.tracking.register_session_provider(lambda: session)
  try:
    with graph.as_default():
      root = autotrackable()
      root.v = tf.compat.v1.get_variable("v", initializer=1.)
      checkpoint = checkpoint_cls(root=root)
      init_status = checkpoint.restore(None)
      observed = [_outcome(init_status.initialize_or_restore)]
      session.run(root.v.assign(5.))
      paths = []
      observed.append(_outcome(lambda: paths.append(
          checkpoint.save(os.path.join(directory, impl, "ckpt")))))
      observed.append(_outcome(lambda: paths.append(
          checkpoint.write(os.path.join(directory, impl, "written")))))
      session.run(root.v.assign(6.))
      if paths:
        status = checkpoint.restore(paths[0])
        observed.append(_outcome(status.run_restore_ops))
        observed.append(_outcome(status.initialize_or_restore))
        observed.append(_outcome(
            lambda: tf_objckpt.streaming_restore(status) if impl == "ours"
            else tf_checkpoint_lib.streaming_restore(status)))
      observed.append(session.run(root.v))
  finally:
    session.close()
  return observed


def test_session_provider_is_used_without_a_default_session(
    tmp_path, monkeypatch):
  monkeypatch.setattr(tf_checkpoint_lib, "_SESSION_PROVIDER", None)
  theirs = _save_and_restore_without_session("tf", tmp_path)
  assert theirs == ["ok"] * 6 + [5.]
  ours = _save_and_restore_without_session("ours", tmp_path)
  np.testing.assert_equal(ours, theirs)


def test_write_without_any_session_raises_runtime_error(tmp_path,
                                                        monkeypatch):
  monkeypatch.setattr(tf_checkpoint_lib, "_SESSION_PROVIDER", None)
  errors = {}
  for impl, (_, checkpoint_cls) in _IMPLS.items():
    with tf.Graph().as_default():
      checkpoint = checkpoint_cls(v=tf.compat.v1.get_variable("v", [1]))
      prefix = os.path.join(tmp_path, impl, "ckpt")
      with pytest.raises(Exception) as raised:
        checkpoint.write(prefix)
      errors[impl] = raised.value
  assert type(errors["tf"]) is RuntimeError  # pylint: disable=unidiomatic-typecheck
  assert type(errors["ours"]) is RuntimeError  # pylint: disable=unidiomatic-typecheck
  assert "without a default session" in str(errors["ours"])
