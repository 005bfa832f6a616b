"""`tf-objckpt inspect --values`: every name `inspect` shows, either order.

A value reachable by several object paths is shown once in the tree, under
its shortest path; its other paths are alias lines ("kernel ->
optimizer/vars/0"). Each of those paths names the value for `--values`,
and an unknown name suggests the paths the tree shows, aliases included.
`--values KEY... PATH` (the order the usage line allows) works as `PATH
--values KEY...`. The real command runs; TensorFlow's reader gives the
values expected, written by TensorFlow and by us alike.

Covers: tf_objckpt.tools.inspect_checkpoint,
tf_objckpt.inspection.checkpoint_listing.
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
      "                          PATH\n")
  if args != ["--values"]:
    assert result.stderr.endswith(
        "tf-objckpt inspect: error: the following arguments are required: "
        "PATH\n")
