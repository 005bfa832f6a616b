"""Which session graph-mode CheckpointV1 calls use when none is given.

With no `session` argument and no default session, TensorFlow's
`tf.compat.v1.train.Checkpoint` asks the session provider registered with
`tf.__internal__.tracking.register_session_provider` (tf_keras registers its
backend session, so Keras graph-mode programs save and restore without
passing a session). Without a provider, `write()` raises a RuntimeError
telling the user to create a session.

Covers: tf_objckpt.checkpoint, tf_objckpt.api.trackable_saver,
tf_objckpt.api.object_checkpoints, tf_objckpt.api.sessions.
"""

import os

import numpy as np
import tensorflow as tf
from tensorflow.python.checkpoint import checkpoint as tf_checkpoint_lib

import testlib as tl


def _save_and_restore_without_session(impl, directory):
  """Runs in a graph whose session only the session provider knows."""
  with tl.GraphProgram(impl) as program:
    tf.__internal__.tracking.register_session_provider(lambda: program.session)
    root = program.lib.AutoTrackable()
    root.v = tf.compat.v1.get_variable("v", initializer=1.)
    checkpoint = program.lib.CheckpointV1(root=root)
    init_status = checkpoint.restore(None)
    observed = [tl.outcome(init_status.initialize_or_restore).name]
    program.run(root.v.assign(5.))
    paths = []
    observed.append(
        tl.outcome(lambda: paths.append(
            checkpoint.save(os.path.join(directory, impl, "ckpt")))).name)
    observed.append(
        tl.outcome(lambda: paths.append(
            checkpoint.write(os.path.join(directory, impl, "written")))).name)
    program.run(root.v.assign(6.))
    if paths:
      status = checkpoint.restore(paths[0])
      for restore in (status.run_restore_ops, status.initialize_or_restore,
                      lambda: program.lib.checkpoint.streaming_restore(status)):
        observed.append(tl.outcome(restore).name)
    observed.append(program.run(root.v))
  return observed


def test_session_provider_is_used_without_a_default_session(
    tmp_path, monkeypatch):
  monkeypatch.setattr(tf_checkpoint_lib, "_SESSION_PROVIDER", None)
  theirs = _save_and_restore_without_session("tf", tmp_path)
  assert theirs == ["ok"] * 6 + [5.]
  ours = _save_and_restore_without_session("ours", tmp_path)
  np.testing.assert_equal(ours, theirs)


def test_write_without_any_session_raises_runtime_error(tmp_path, monkeypatch):
  monkeypatch.setattr(tf_checkpoint_lib, "_SESSION_PROVIDER", None)
  errors = {}
  for impl, lib in tl.IMPLS.items():
    with tf.Graph().as_default():
      checkpoint = lib.CheckpointV1(v=tf.compat.v1.get_variable("v", [1]))
      errors[impl] = tl.outcome(checkpoint.write,
                                os.path.join(tmp_path, impl, "ckpt")).error
  tl.assert_same_error_type(errors, RuntimeError)
  assert type(errors["tf"]) is RuntimeError  # pylint: disable=unidiomatic-typecheck
  assert "without a default session" in str(errors["ours"])
