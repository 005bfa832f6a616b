"""More tf.compat.v1.train optimizers and nested templates, against TF.

`graph_mode_compat_test.py` covers Adam, Momentum and Adagrad; these cover
optimizers with more slots (centered RMSProp with momentum, Ftrl,
Adadelta), reference variables and variable scopes, restored into slots
created after `restore()`, and nested templates restored before their
variables exist.
"""

import os
import types

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.checkpoint import checkpoint as tf_checkpoint_lib
from tensorflow.python.ops import template as template_lib
from tensorflow.python.trackable import autotrackable as tf_autotrackable

import compat_util
import tf_objckpt

_IMPLS = {"tf": (tf_autotrackable.AutoTrackable, tf.compat.v1.train.Checkpoint),
          "ours": (tf_objckpt.AutoTrackable, tf_objckpt.CheckpointV1)}
_OPTIMIZERS = {
    "rmsprop": lambda: tf.compat.v1.train.RMSPropOptimizer(
        0.1, momentum=0.5, centered=True),
    "ftrl": lambda: tf.compat.v1.train.FtrlOptimizer(0.1),
    "adadelta": lambda: tf.compat.v1.train.AdadeltaOptimizer(0.1),
}


def _build(impl, kind, optimizer):
  """A scoped model (one plain, one partitioned variable) and optimizer."""
  init = tf.compat.v1.random_uniform_initializer(seed=1)
  root = _IMPLS[impl][0]()
  with tf.compat.v1.variable_scope("scope"):
    root.w = tf.compat.v1.get_variable(
        "w", [3, 2], initializer=init, use_resource=kind == "resource")
    root.p = list(tf.compat.v1.get_variable(
        "p", [4, 2], initializer=init, use_resource=kind == "resource",
        partitioner=tf.compat.v1.fixed_size_partitioner(2)))
  loss = tf.reduce_sum(tf.square(root.w)) + sum(
      tf.reduce_sum(tf.square(part)) for part in root.p)
  return root, _OPTIMIZERS[optimizer](), loss


def _values(session):
  variables = sorted(tf.compat.v1.global_variables(), key=lambda v: v.name)
  return dict(zip([v.name for v in variables], session.run(variables)))


def _train_and_save(impl, directory, kind, optimizer):
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    root, opt, loss = _build(impl, kind, optimizer)
    checkpoint = _IMPLS[impl][1](model=root, optimizer=opt)
    train_op = opt.minimize(loss)
    session.run(tf.compat.v1.global_variables_initializer())
    session.run(train_op)
    session.run(train_op)
    return (checkpoint.save(os.path.join(directory, impl, "ckpt"),
                            session=session), _values(session))


def _restore_then_minimize(impl, kind, optimizer, path):
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    root, opt, loss = _build(impl, kind, optimizer)
    status = _IMPLS[impl][1](model=root, optimizer=opt).restore(path)
    opt.minimize(loss)  # Slots are created after restore().
    status.assert_consumed().initialize_or_restore(session)
    return _values(session)


@pytest.mark.parametrize("optimizer", sorted(_OPTIMIZERS))
@pytest.mark.parametrize("kind", ["resource", "reference"])
def test_more_optimizers_save_and_cross_restore(tmp_path, kind, optimizer):
  their_path, their_values = _train_and_save("tf", tmp_path, kind, optimizer)
  our_path, our_values = _train_and_save("ours", tmp_path, kind, optimizer)
  compat_util.assert_same_checkpoint(their_path, our_path,
                                     compare_values=False)
  for writer, path, expected in (("tf", their_path, their_values),
                                 ("ours", our_path, our_values)):
    for reader in _IMPLS:
      restored = _restore_then_minimize(reader, kind, optimizer, path)
      assert sorted(restored) == sorted(expected), (writer, reader)
      for name in expected:
        np.testing.assert_allclose(restored[name], expected[name], rtol=1e-6,
                                   err_msg=f"{writer}->{reader}: {name}")


def _template_function():
  inner = tf.compat.v1.make_template(
      "inner", lambda: tf.compat.v1.get_variable(
          "k", [2], initializer=tf.compat.v1.ones_initializer()))
  with tf.compat.v1.variable_scope("dense"):
    w = tf.compat.v1.get_variable("w", [2],
                                  initializer=tf.compat.v1.ones_initializer())
  p = tf.compat.v1.get_variable(
      "p", [4, 2], initializer=tf.compat.v1.ones_initializer(),
      partitioner=tf.compat.v1.fixed_size_partitioner(2))
  return tf.reduce_sum(w) + tf.reduce_sum(inner()) + tf.reduce_sum(p)


@pytest.mark.parametrize("writer", ["tf", "ours"])
def test_nested_templates_restore_before_their_variables_exist(
    tmp_path, monkeypatch, writer):
  """Deferred restores reach variables of nested templates and partitions."""

  def run(impl, path=None):
    monkeypatch.setattr(template_lib, "trackable_util", (
        tf_checkpoint_lib if impl == "tf" else types.SimpleNamespace(
            capture_dependencies=tf_objckpt.capture_dependencies)))
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
      template = tf.compat.v1.make_template("outer", _template_function)
      checkpoint = _IMPLS[impl][1](template=template)
      if path is None:
        total = template()
        session.run(tf.compat.v1.global_variables_initializer())
        session.run([v.assign(v * 3.) for v in tf.compat.v1.global_variables()
                     if v.dtype.base_dtype == tf.float32])
        return checkpoint.save(os.path.join(tmp_path, impl, "ckpt"),
                               session=session), session.run(total)
      status = checkpoint.restore(path)
      total = template()
      status.assert_consumed().run_restore_ops(session)
      return session.run(total)

  path, expected = run(writer)
  assert expected == 36.
  assert run("tf", path) == expected
  assert run("ours", path) == expected
