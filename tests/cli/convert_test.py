"""`tf-objckpt convert`, run as a process on TensorFlow's name-based checkpoints.

The converted checkpoint must be the one TensorFlow writes after restoring
the same name-based checkpoint by names into the same objects; Keras 3
models, which TensorFlow cannot restore by names, are matched by the shared
name matcher. Partial results and mismatched values write nothing.

Covers: tf_objckpt.tools.convert_checkpoint, tf_objckpt.tools.cli,
tf_objckpt.restoring.name_matching.
"""

import os
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl

_BUILDERS = textwrap.dedent("""
    import keras
    import tensorflow as tf

    def module():
      m = tf.Module()
      m.kernel = tf.Variable(tf.zeros((3, 2)), name="dense/kernel")
      m.bias = tf.Variable(tf.zeros((2,)), name="dense/bias")
      return {"model": m}

    def renamed():
      m = tf.Module()
      m.kernel = tf.Variable(tf.zeros((3, 2)), name="encoder/kernel")
      return m

    def keras3():
      return {"model": keras.Sequential(
          [keras.Input((3,)), keras.layers.Dense(2, name="dense")])}

    def wrong_shape():
      m = tf.Module()
      m.kernel = tf.Variable(tf.zeros((2, 3)), name="dense/kernel")
      return m
""")

KERNEL = np.arange(6, dtype=np.float32).reshape(3, 2)
BIAS = np.array([0.5, -0.5], np.float32)


@pytest.fixture(name="setup")
def _setup(tmp_path):
  """A TensorFlow name-based checkpoint, and a module of builders."""
  with tl.GraphProgram("tf") as program:
    tf.compat.v1.get_variable("dense/kernel", initializer=KERNEL)
    tf.compat.v1.get_variable("dense/bias", initializer=BIAS)
    program.session.run(tf.compat.v1.global_variables_initializer())
    path = tf.compat.v1.train.Saver().save(program.session,
                                           str(tmp_path / "names" / "model"))
  (tmp_path / "builders.py").write_text(_BUILDERS)
  return tmp_path, path


def _convert(setup, function, out, *flags):
  directory, path = setup
  return tl.run_cli("convert",
                    path,
                    directory / out,
                    "--objects",
                    f"builders:{function}",
                    *flags,
                    cwd=directory)


def test_converted_checkpoint_is_what_tensorflow_writes(setup):
  directory, path = setup
  result = _convert(setup, "module", "ours")
  assert result.returncode == 0, result.stdout + result.stderr
  assert "dense/kernel <- dense/kernel\n" in result.stdout
  module = tf.Module()
  module.kernel = tf.Variable(tf.zeros((3, 2)), name="dense/kernel")
  module.bias = tf.Variable(tf.zeros((2,)), name="dense/bias")
  checkpoint = tf.train.Checkpoint(model=module)
  checkpoint.restore(path).assert_consumed()
  expected = checkpoint.write(str(directory / "tf"))
  tl.assert_same_checkpoint(expected, str(directory / "ours"))


def test_keras3_variables_match_without_the_model_scope(setup):
  directory, _ = setup
  result = _convert(setup, "keras3", "keras3")
  assert result.returncode == 0, result.stdout + result.stderr
  assert "sequential/dense/kernel <- dense/kernel (without model name)" in (
      result.stdout)
  values = tl.values(str(directory / "keras3"))
  kernels = [
      value for key, value in values.items()
      if key.endswith("kernel/.ATTRIBUTES/VARIABLE_VALUE")
  ]
  np.testing.assert_array_equal(kernels, [KERNEL])


def test_partial_results_need_allow_partial_and_map(setup):
  directory, _ = setup
  refused = _convert(setup, "renamed", "refused")
  assert refused.returncode == 1
  assert "Not matched (variables without a value) (1):\n  encoder/kernel" in (
      refused.stdout)
  assert "Left over (checkpoint values nothing used) (2):" in refused.stdout
  assert not any(name.startswith("refused") for name in os.listdir(directory))

  mapped = _convert(setup, "renamed", "mapped", "--map",
                    "dense/kernel=encoder/kernel")
  assert mapped.returncode == 0, mapped.stdout + mapped.stderr
  assert "encoder/kernel <- dense/kernel (assignment map)" in mapped.stdout
  assert "  dense/bias" in mapped.stdout  # Left over, reported.
  np.testing.assert_array_equal(
      tl.values(str(directory / "mapped"))["kernel/.ATTRIBUTES/VARIABLE_VALUE"],
      KERNEL)


def test_mismatches_and_bad_arguments_write_nothing(setup):
  directory, _ = setup
  mismatch = _convert(setup, "wrong_shape", "mismatch")
  assert mismatch.returncode == 1
  assert "'dense/kernel'" in mismatch.stderr
  assert "(2, 3)" in mismatch.stderr and "(3, 2)" in mismatch.stderr
  assert not any(name.startswith("mismatch") for name in os.listdir(directory))
  assert _convert(setup, "no_such_function", "x").returncode == 2
  assert _convert(setup, "module", "x", "--map", "dense/=k").returncode == 2


def test_console_script_imports_from_the_working_directory_and_records(setup):
  """As installed, `tf-objckpt convert` finds the user's module in the
  current directory, and `inspect OUT_DIR` finds what it wrote."""
  directory, path = setup
  result = tl.run_cli("convert",
                      path,
                      os.path.join("migrated", "ckpt"),
                      "--objects",
                      "builders:module",
                      cwd=directory,
                      console_script=True)
  assert result.returncode == 0, result.stdout + result.stderr
  assert result.stderr == ""
  out_dir = str(directory / "migrated")
  assert tf.train.latest_checkpoint(out_dir) == os.path.join(out_dir, "ckpt")
  inspected = tl.run_cli("inspect", out_dir)
  assert inspected.returncode == 0, inspected.stderr
  assert (
      "  model\n    kernel: float32 (3, 2) 24 B\n    bias: float32 (2,) 8 B\n"
      in inspected.stdout)
