"""`tf-objckpt inspect PATH --objects MODULE:FUNCTION --map NEW=CHECKPOINT`.

A dry run of a mapped restore, run as a process: what would go where, in
object paths, for the objects a function of the user's builds, with
nothing written; exit code 0 when every value of the mapped paths has its
object and fits, 1 when not (a shape that differs, a value or an object
left over), 2 for usage errors and paths missing in the checkpoint. The
preview agrees with the restore that follows it.

Covers: tf_objckpt.tools.cli, tf_objckpt.restoring.map_preview.
"""

import textwrap

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt

_BUILDERS = textwrap.dedent("""
    import tensorflow as tf

    def _backbone(kernel_shape):
      backbone = tf.Module()
      backbone.dense = tf.Module()
      backbone.dense.kernel = tf.Variable(tf.zeros(kernel_shape))
      return backbone

    def classifier():
      return {"backbone": _backbone((2, 3))}

    def wrong_shape():
      return {"backbone": _backbone((3, 3))}
""")


@pytest.fixture(name="setup")
def _setup(tmp_path):
  """A TensorFlow checkpoint of `model/encoder`, and a module of builders."""
  model = tf.Module()
  model.encoder = tf.Module()
  model.encoder.dense = tf.Module()
  model.encoder.dense.kernel = tf.Variable(np.ones((2, 3), np.float32))
  model.encoder.dense_1 = tf.Module()
  model.encoder.dense_1.kernel = tf.Variable(np.ones((3,), np.float32))
  path = tf.train.Checkpoint(model=model).write(str(tmp_path / "pre" / "ckpt"))
  (tmp_path / "map_builders.py").write_text(_BUILDERS)
  return tmp_path, path


def _inspect(setup, function, *maps):
  directory, path = setup
  flags = [flag for pair in maps for flag in ("--map", pair)]
  return tl.run_cli("inspect",
                    path,
                    "--objects",
                    f"map_builders:{function}",
                    *flags,
                    cwd=directory)


def test_preview_lists_what_would_go_where(setup):
  result = _inspect(setup, "classifier", "backbone=model/encoder")
  assert result.returncode == 1, result.stderr
  assert ("backbone/dense/kernel <- model/encoder/dense/kernel (2, 3) "
          "float32") in result.stdout
  assert ("model/encoder/dense_1/kernel (3,) float32: no object at "
          "backbone/dense_1/kernel") in result.stdout


def test_preview_agrees_with_the_restore(setup):
  _, path = setup
  backbone = tf.Module()
  backbone.dense = tf.Module()
  backbone.dense.kernel = tf.Variable(tf.zeros((2, 3)))
  checkpoint = tf_objckpt.Checkpoint(backbone=backbone)
  options = tf_objckpt.CheckpointOptions(
      object_map={"backbone/dense": "model/encoder/dense"})
  assert checkpoint.preview_restore(path, options).complete
  checkpoint.read(path, options=options).assert_consumed()
  result = _inspect(setup, "classifier", "backbone/dense=model/encoder/dense")
  assert result.returncode == 0, result.stdout + result.stderr
  assert "1 value would restore" in result.stdout


def test_preview_of_a_mismatch_exits_1(setup):
  result = _inspect(setup, "wrong_shape", "backbone=model/encoder")
  assert result.returncode == 1
  assert "the object's shape is (3, 3)" in result.stdout


_OBJECTS = ["--objects", "map_builders:classifier"]


@pytest.mark.parametrize("flags,words", [
    (_OBJECTS + ["--map", "backbone=model/encodr"], "Closest: model/encoder"),
    (_OBJECTS + ["--map", "backbone"], "NEW=CHECKPOINT"),
    (["--map", "backbone=model/encoder"], "--map needs --objects"),
    (_OBJECTS + ["--keys"], "without --keys"),
])
def test_usage_errors_exit_2(setup, flags, words):
  directory, path = setup
  result = tl.run_cli("inspect", path, *flags, cwd=directory)
  assert result.returncode == 2
  assert words in result.stderr
