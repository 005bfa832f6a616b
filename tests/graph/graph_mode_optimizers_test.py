"""More tf.compat.v1.train optimizers and nested templates, against TF.

`graph_mode_compat_test.py` covers Adam, Momentum and Adagrad; these cover
optimizers with more slots (centered RMSProp with momentum, Ftrl,
Adadelta), reference variables and variable scopes, restored into slots
created after `restore()`, and nested templates restored before their
variables exist.

Covers: tf_objckpt.checkpoint, tf_objckpt.restore,
tf_objckpt.saveable_object_util, tf_objckpt.api.object_checkpoints,
tf_objckpt.restoring.restore_walk, tf_objckpt.restoring.node_binding.
"""

import os
import types

import pytest
import tensorflow as tf
from tensorflow.python.ops import template as template_lib

import testlib as tl

_OPTIMIZERS = {
    "rmsprop":
        lambda: tf.compat.v1.train.RMSPropOptimizer(
            0.1, momentum=0.5, centered=True),
    "ftrl":
        lambda: tf.compat.v1.train.FtrlOptimizer(0.1),
    "adadelta":
        lambda: tf.compat.v1.train.AdadeltaOptimizer(0.1),
}


def _build(program, kind, optimizer):
  """A scoped model (one plain, one partitioned variable) and optimizer."""
  init = tf.compat.v1.random_uniform_initializer(seed=1)
  root = program.lib.AutoTrackable()
  with tf.compat.v1.variable_scope("scope"):
    root.w = tf.compat.v1.get_variable("w", [3, 2],
                                       initializer=init,
                                       use_resource=kind == "resource")
    root.p = list(
        tf.compat.v1.get_variable(
            "p", [4, 2],
            initializer=init,
            use_resource=kind == "resource",
            partitioner=tf.compat.v1.fixed_size_partitioner(2)))
  loss = tf.reduce_sum(tf.square(root.w)) + sum(
      tf.reduce_sum(tf.square(part)) for part in root.p)
  return root, _OPTIMIZERS[optimizer](), loss


def _graph_variable_values(program):
  """`{name: value}` of every variable of the program's graph."""
  variables = sorted(tf.compat.v1.global_variables(), key=lambda v: v.name)
  return dict(zip([v.name for v in variables], program.run(variables)))


def _train_and_save(impl, directory, kind, optimizer):
  with tl.GraphProgram(impl) as program:
    root, opt, loss = _build(program, kind, optimizer)
    checkpoint = program.lib.CheckpointV1(model=root, optimizer=opt)
    train_op = opt.minimize(loss)
    program.initialize()
    program.run(train_op)
    program.run(train_op)
    path = checkpoint.save(os.path.join(directory, impl, "ckpt"),
                           session=program.session)
    return path, _graph_variable_values(program)


def _restore_then_minimize(impl, kind, optimizer, path):
  with tl.GraphProgram(impl) as program:
    root, opt, loss = _build(program, kind, optimizer)
    status = program.lib.CheckpointV1(model=root, optimizer=opt).restore(path)
    opt.minimize(loss)  # Slots are created after restore().
    status.assert_consumed().initialize_or_restore(program.session)
    return _graph_variable_values(program)


@pytest.mark.parametrize("optimizer", sorted(_OPTIMIZERS))
@pytest.mark.parametrize("kind", ["resource", "reference"])
def test_more_optimizers_save_and_cross_restore(tmp_path, kind, optimizer):
  their_path, their_values = _train_and_save("tf", tmp_path, kind, optimizer)
  our_path, our_values = _train_and_save("ours", tmp_path, kind, optimizer)
  tl.assert_same_checkpoint(their_path, our_path, compare_values=False)
  for path, expected in ((their_path, their_values), (our_path, our_values)):
    for reader in tl.IMPLS:
      tl.assert_values_equal(
          expected, _restore_then_minimize(reader, kind, optimizer, path))


def _template_function():
  inner = tf.compat.v1.make_template(
      "inner", lambda: tf.compat.v1.get_variable(
          "k", [2], initializer=tf.compat.v1.ones_initializer()))
  with tf.compat.v1.variable_scope("dense"):
    w = tf.compat.v1.get_variable("w", [2],
                                  initializer=tf.compat.v1.ones_initializer())
  p = tf.compat.v1.get_variable(
      "p", [4, 2],
      initializer=tf.compat.v1.ones_initializer(),
      partitioner=tf.compat.v1.fixed_size_partitioner(2))
  return tf.reduce_sum(w) + tf.reduce_sum(inner()) + tf.reduce_sum(p)


@pytest.mark.parametrize("writer", ["tf", "ours"])
def test_nested_templates_restore_before_their_variables_exist(
    tmp_path, monkeypatch, writer):
  """Deferred restores reach variables of nested templates and partitions."""

  def run(impl, path=None):
    lib = tl.IMPLS[impl]
    monkeypatch.setattr(
        template_lib, "trackable_util",
        (lib.checkpoint if impl == "tf" else types.SimpleNamespace(
            capture_dependencies=lib.checkpoint.capture_dependencies)))
    with tl.GraphProgram(impl) as program:
      template = tf.compat.v1.make_template("outer", _template_function)
      checkpoint = lib.CheckpointV1(template=template)
      if path is None:
        total = template()
        program.initialize()
        program.run([
            v.assign(v * 3.)
            for v in tf.compat.v1.global_variables()
            if v.dtype.base_dtype == tf.float32
        ])
        return checkpoint.save(os.path.join(tmp_path, impl, "ckpt"),
                               session=program.session), program.run(total)
      status = checkpoint.restore(path)
      total = template()
      status.assert_consumed().run_restore_ops(program.session)
      return program.run(total)

  path, expected = run(writer)
  assert expected == 36.
  assert run("tf", path) == expected
  assert run("ours", path) == expected
