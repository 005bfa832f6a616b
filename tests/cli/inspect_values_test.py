"""`tf-objckpt inspect --values`: every name `inspect` shows, either order.

A value reachable by several object paths is shown once in the tree, under
its shortest path; its other paths are alias lines ("kernel ->
optimizer/vars/0"). Each of those paths names the value for `--values`,
and an unknown name suggests the paths the tree shows, aliases included.
`--values KEY... PATH` (the order the usage line allows) works as `PATH
--values KEY...`. A name spelled like none suggests the values at paths
ending alike, with their dtypes and shapes (Keras 3 saves `dense/kernel`
by the layer's position), and `load_variable` says once what it did not
find. The real command runs; TensorFlow's reader gives the values
expected, written by TensorFlow and by us alike.

Covers: tf_objckpt.tools.inspect_checkpoint,
tf_objckpt.inspection.checkpoint_listing,
tf_objckpt.inspection.checkpoint_reader.
"""

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl

_KERNEL_ALIAS = "model/body/layer/kernel"
_KERNEL_PATH = "optimizer/vars/0"
_BIAS_PATH = "model/body/layer/bias"


def _objects():
  """A kernel shared by a deep model path and a shallow optimizer path.

  Like a Keras 3 model with its optimizer: the tree shows the kernel under
  the optimizer, and the model's path to it as an alias. The bias is the
  model's alone.
  """
  kernel = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
  layer = tf.Module()
  layer.kernel, layer.bias = kernel, tf.Variable([0.5, -0.5, 1.5])
  model = tf.Module()
  model.body = tf.Module()
  model.body.layer = layer
  optimizer = tf.Module()
  optimizer.vars = [kernel]
  return dict(model=model, optimizer=optimizer)


@pytest.fixture(scope="module", params=["tf", "ours"])
def prefix(request, tmp_path_factory):
  directory = tmp_path_factory.mktemp(request.param)
  return tl.IMPLS[request.param].Checkpoint(**_objects()).write(
      str(directory / "ckpt"))


def _value_key(prefix, object_path):
  return f"{object_path}/.ATTRIBUTES/VARIABLE_VALUE"


def test_the_tree_shows_the_alias(prefix):
  result = tl.run_cli("inspect", prefix)
  assert result.returncode == 0, result.stderr
  assert f"      kernel -> {_KERNEL_PATH}\n" in result.stdout


@pytest.mark.parametrize("name", [_KERNEL_ALIAS, _KERNEL_PATH])
def test_every_path_the_tree_shows_names_the_value(prefix, name):
  key = _value_key(prefix, _KERNEL_PATH)
  expected = tf.train.load_checkpoint(prefix).get_tensor(key)
  result = tl.run_cli("inspect", prefix, "--values", name)
  assert result.returncode == 0, result.stderr
  shown = np.array2string(expected, separator=", ").replace("\n", "\n  ")
  assert result.stdout == f"{key} float32 (2, 3) 24 B\n  {shown}\n"


def test_unknown_name_suggests_the_aliases_too(prefix):
  result = tl.run_cli("inspect", prefix, "--values", "model/body/layer/kernal")
  assert result.returncode == 2
  assert result.stdout == ""
  # The kernel's own path first, not the bias sharing most of it.
  assert result.stderr.startswith(
      f"tf-objckpt inspect: No value 'model/body/layer/kernal' in checkpoint "
      f"{prefix!r}. Closest: {_KERNEL_ALIAS}, {_BIAS_PATH}")


def test_values_may_come_before_the_path(prefix):
  after = tl.run_cli("inspect", prefix, "--values", _BIAS_PATH, _KERNEL_ALIAS)
  before = tl.run_cli("inspect", "--values", _BIAS_PATH, _KERNEL_ALIAS, prefix)
  assert before.returncode == after.returncode == 0, before.stderr
  assert before.stdout == after.stdout
  assert _value_key(prefix, _BIAS_PATH) in before.stdout
  assert _value_key(prefix, _KERNEL_PATH) in before.stdout


@pytest.mark.parametrize("args", [["--values"], ["--values", _BIAS_PATH], []])
def test_a_missing_path_is_a_usage_error(args):
  result = tl.run_cli("inspect", *args)
  assert result.returncode == 2
  assert result.stderr.startswith(
      "usage: tf-objckpt inspect [-h] [--verbose]\n"
      "                          [--keys | --json | --values KEY [KEY ...]]\n"
      "                          [--objects MODULE:FUNCTION [--map "
      "NEW=CHECKPOINT ...]]\n"
      "                          PATH\n")
  if args != ["--values"]:
    assert result.stderr.endswith(
        "tf-objckpt inspect: error: the following arguments are required: "
        "PATH\n")


def _keras3_dense_checkpoint(directory):
  """A Keras 3 model's checkpoint: its layer "dense" is saved by position."""
  import keras  # pylint: disable=g-import-not-at-top
  model = keras.Sequential([
      keras.Input((3,)),
      keras.layers.Dense(4, name="dense"),
      keras.layers.Dense(2, name="out")
  ])
  return tl.IMPLS["ours"].Checkpoint(model=model).write(str(directory / "ckpt"))


_KERAS3_KERNELS = (
    "model/_functional/_operations/1/_kernel (float32, shape (3, 4)), "
    "model/_functional/_operations/2/_kernel (float32, shape (4, 2)).")


def test_a_layer_path_of_keras3_suggests_values_ending_alike(tmp_path):
  """Nothing is spelled like `dense/kernel`: the kernels are suggested."""
  path = _keras3_dense_checkpoint(tmp_path)
  result = tl.run_cli("inspect", path, "--values", "dense/kernel")
  assert result.returncode == 2
  assert result.stderr == (
      f"tf-objckpt inspect: No value 'dense/kernel' in checkpoint {path!r}. "
      f"Values at paths ending in 'kernel': {_KERAS3_KERNELS}\n")


def _keras3_shaped_checkpoint(directory):
  """Keras 3's paths to the two kernels, built of `tf.Module`s (any version)."""
  operations = [tf.Module(), tf.Module(), tf.Module()]
  operations[1]._kernel = tf.Variable(tf.zeros([3, 4]))
  operations[2]._kernel = tf.Variable(tf.zeros([4, 2]))
  model = tf.Module()
  model._functional = tf.Module()
  model._functional._operations = operations
  return tl.IMPLS["ours"].Checkpoint(model=model).write(str(directory / "ckpt"))


def test_a_path_spelled_like_none_suggests_values_ending_alike(tmp_path):
  path = _keras3_shaped_checkpoint(tmp_path)
  result = tl.run_cli("inspect", path, "--values", "dense/kernel")
  assert result.returncode == 2
  assert result.stderr == (
      f"tf-objckpt inspect: No value 'dense/kernel' in checkpoint {path!r}. "
      f"Values at paths ending in 'kernel': {_KERAS3_KERNELS}\n")


@pytest.mark.parametrize("make_checkpoint",
                         [_keras3_shaped_checkpoint, _keras3_dense_checkpoint],
                         ids=["modules", "keras3"])
def test_load_variable_of_a_missing_path_says_once_it_is_missing(
    tmp_path, make_checkpoint):
  path = make_checkpoint(tmp_path)
  error = tl.outcome(tl.IMPLS["ours"].checkpoint_utils.load_variable, path,
                     "dense/kernel").error
  assert isinstance(error, tf.errors.NotFoundError)
  assert str(error) == (
      f"Key dense/kernel not found in checkpoint {path!r}. Values at paths "
      f"ending in 'kernel': {_KERAS3_KERNELS}")
  # TensorFlow's words start it.
  theirs = tl.outcome(tf.train.load_variable, path, "dense/kernel").error
  assert str(theirs).startswith("Key dense/kernel not found in checkpoint")
