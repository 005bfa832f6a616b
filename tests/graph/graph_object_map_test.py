"""Object maps when graph building: `CheckpointV1` with a session.

A checkpoint of a v1 model and its v1 Adam (slot variables) restores its
encoder into a new model's backbone with `object_map`, through the restore
ops a session runs with the path fed (`run_restore_ops`,
`initialize_or_restore`), as TensorFlow's `CheckpointV1` does with the old
structure rebuilt around the new objects: the same values and slots, the
new head's slots initialized; variables created after the restore get
their values from its ops. Restoring a second checkpoint reuses the
ops; a mismatch raises before any op runs; a missing path fails naming it.

Covers: tf_objckpt.restoring.object_maps, tf_objckpt.api.load_status.
"""

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl

_MAP = {"model/backbone": "model/encoder", "optimizer": "optimizer"}


def _dense(program, name, shape, value=None):
  init = tf.compat.v1.random_uniform_initializer(seed=len(name))
  if value is not None:
    init = tf.compat.v1.constant_initializer(value)
  return tf.compat.v1.get_variable(name, shape, initializer=init)


def _module(program, scope, head_units, value=None):
  """A root with `<encoder or backbone>` (w, b) and a head, trained by Adam."""
  lib = program.lib
  with tf.compat.v1.variable_scope(scope):
    inner = lib.AutoTrackable()
    inner.w = _dense(program, "w", [3, 2], value)
    inner.b = _dense(program, "b", [2], value)
    head = _dense(program, "head", [2, head_units], value)
  x = tf.constant([[1., 2., 3.]])
  loss = tf.reduce_sum(tf.matmul(tf.matmul(x, inner.w) + inner.b, head))
  optimizer = tf.compat.v1.train.AdamOptimizer(0.1)
  train_op = optimizer.minimize(loss)
  return inner, head, optimizer, train_op


def _pretrained(tmp_path):
  with tl.GraphProgram("tf") as program:
    encoder, head, optimizer, train_op = _module(program, "old", 3)
    root = program.lib.AutoTrackable()
    root.encoder, root.head = encoder, head
    program.initialize()
    for _ in range(2):
      program.run(train_op)
    path = program.lib.CheckpointV1(model=root, optimizer=optimizer).save(
        str(tmp_path / "pretrained" / "ckpt"), session=program.session)
    slots = {
        name:
            program.run(
                [optimizer.get_slot(v, name) for v in (encoder.w, encoder.b)])
        for name in ("m", "v")
    }
    return path, program.run([encoder.w, encoder.b]), slots


def _restored(impl, path, mapped=True):
  """The new model's values and slots after restoring `path`."""
  with tl.GraphProgram(impl) as program:
    backbone, head, optimizer, _ = _module(program, "new", 4, value=0.5)
    new = program.lib.AutoTrackable()
    new.backbone, new.classify = backbone, head
    program.initialize()  # TensorFlow's stand-in structure lacks the head.
    if impl == "ours":
      checkpoint = program.lib.CheckpointV1(model=new, optimizer=optimizer)
      status = checkpoint.restore(
          path,
          options=tl.IMPLS["ours"].checkpoint.CheckpointOptions(
              object_map=_MAP if mapped else {}))
    else:
      status = program.lib.CheckpointV1(
          model=program.lib.CheckpointV1(encoder=backbone),
          optimizer=optimizer).restore(path)
    status.initialize_or_restore(program.session)
    variables = [backbone.w, backbone.b, head]
    return {
        "values":
            program.run(variables),
        "slots":
            program.run(
                [optimizer.get_slot(v, n) for v in variables for n in "mv"]),
        "status":
            status,
        "ops":
            program.num_ops(),
    }


def test_mapped_restore_matches_tensorflow_rebuilt_structure(tmp_path):
  path, encoder_values, slots = _pretrained(tmp_path)
  ours, theirs = _restored("ours", path), _restored("tf", path)
  for mine, their in zip(ours["values"] + ours["slots"],
                         theirs["values"] + theirs["slots"]):
    np.testing.assert_array_equal(mine, their)
  np.testing.assert_array_equal(ours["values"][0], encoder_values[0])
  np.testing.assert_array_equal(ours["slots"][0], slots["m"][0])
  assert not np.any(ours["slots"][4])  # The new head's slots: untouched.
  # The head (and its slots) have no value; every mapped value restored.
  report = ours["status"].report()
  assert not report.unmatched, str(report)
  assert any("model/classify" in line for line in report.objects_without_values)


def test_second_restore_reuses_the_ops(tmp_path):
  path, _, _ = _pretrained(tmp_path)
  with tl.GraphProgram("ours") as program:
    backbone, head, optimizer, _ = _module(program, "new", 4, value=0.5)
    new = program.lib.AutoTrackable()
    new.backbone, new.classify = backbone, head
    checkpoint = program.lib.CheckpointV1(model=new, optimizer=optimizer)
    options = tl.IMPLS["ours"].checkpoint.CheckpointOptions(object_map=_MAP)
    zero = backbone.w.assign(tf.zeros([3, 2]))
    checkpoint.restore(path, options=options).run_restore_ops(program.session)
    ops = program.num_ops()
    program.run(zero)
    checkpoint.restore(path, options=options).run_restore_ops(program.session)
    assert program.num_ops() == ops
    assert np.any(program.run(backbone.w) != 0)


def test_missing_and_mismatched_paths(tmp_path):
  path, _, _ = _pretrained(tmp_path)
  with tl.GraphProgram("ours") as program:
    backbone, _, optimizer, _ = _module(program, "new", 4, value=0.5)
    checkpoint = program.lib.CheckpointV1(backbone=backbone,
                                          optimizer=optimizer)
    options = tl.IMPLS["ours"].checkpoint.CheckpointOptions
    with pytest.raises(tf.errors.NotFoundError, match="model/encodr"):
      checkpoint.restore(
          path, options=options(object_map={"backbone": "model/encodr"}))
    with pytest.raises(ValueError, match="'model/head'"):
      # A (2, 4) variable from the (2, 3) head: found before any op runs.
      checkpoint.restore(
          path, options=options(object_map={"backbone/w": "model/head"}))


def test_variables_created_after_the_restore(tmp_path):
  path, encoder_values, _ = _pretrained(tmp_path)
  with tl.GraphProgram("ours") as program:
    backbone = program.lib.AutoTrackable()
    status = program.lib.CheckpointV1(backbone=backbone).restore(
        path,
        options=tl.IMPLS["ours"].checkpoint.CheckpointOptions(
            object_map={"backbone": "model/encoder"}))
    with tf.compat.v1.variable_scope("late"):
      backbone.w = _dense(program, "w", [3, 2], value=0.5)
    status.initialize_or_restore(program.session)
    np.testing.assert_array_equal(program.run(backbone.w), encoder_values[0])
    with pytest.raises(AssertionError, match="model/encoder/b"):
      status.assert_consumed()
