"""What the installed TensorFlow lacks fails as it does, naming the version.

These tests run on every TensorFlow we support (2.15 to 2.21, see
`scripts/test_tf_version.sh`) and compare with the installed TensorFlow:
where it has the sharding options of 2.16, ours accept them as it does;
where it lacks them (2.15), ours raise its `TypeError`, naming the option,
the version that added it and the installed version, never a crash later;
`tf_objckpt.ParallelShardsPolicy()` and the policies of
`tf_objckpt.sharding_policies` raise the same there.

Covers: tf_objckpt.engine.tf_compat, tf_objckpt.api.trackable_saver,
tf_objckpt.engine.sharding_policies, tf_objckpt.sharding_policies.
"""

import keras
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt
from tf_objckpt import sharding_policies
from tf_objckpt.engine import tf_compat

_OPTIONS_ADDED_IN_2_16 = {
    "experimental_sharding_callback":
        lambda: (tf.train.experimental.ShardByTaskPolicy()),
    "experimental_skip_slot_variables":
        lambda: True,
}

_TENSORFLOW_VERSION_WITH_KERAS_3 = (2, 16)


def _tensorflow_version():
  return tuple(int(part) for part in tf.__version__.split(".")[:2])


@pytest.mark.parametrize("name", sorted(_OPTIONS_ADDED_IN_2_16))
def test_options_added_in_2_16_behave_as_this_tensorflows(name):
  has_sharding = hasattr(tf.train.experimental, "ShardByTaskPolicy")
  value = _OPTIONS_ADDED_IN_2_16[name]() if has_sharding else None
  theirs = tl.outcome(tf.train.CheckpointOptions, **{name: value})
  ours = tl.outcome(tf_objckpt.CheckpointOptions, **{name: value})
  if _tensorflow_version() >= (2, 16):
    assert has_sharding and tf_compat.sharding_util is not None
    assert theirs.name == ours.name == "ok"
    assert getattr(theirs.result, name) is getattr(ours.result, name) is value
  else:
    assert not has_sharding and tf_compat.sharding_util is None
    assert theirs.name == ours.name == "TypeError"
    assert str(ours.error).startswith(str(theirs.error))
    assert (f"it needs TensorFlow 2.16 or newer, and this is TensorFlow "
            f"{tf.__version__}") in str(ours.error)


_OUR_POLICIES = {
    "ParallelShardsPolicy":
        lambda: tf_objckpt.ParallelShardsPolicy(min_shard_bytes=1),
    "ShardByTaskPolicy":
        sharding_policies.ShardByTaskPolicy,
    "MaxShardSizePolicy":
        lambda: sharding_policies.MaxShardSizePolicy(4),
}


@pytest.mark.parametrize("policy", _OUR_POLICIES)
def test_our_sharding_policies_need_sharding_callbacks(tmp_path, policy):
  """Made on 2.15, they raise the options' TypeError; from 2.16 they work."""
  made = tl.outcome(_OUR_POLICIES[policy])
  if _tensorflow_version() < (2, 16):
    assert made.name == "TypeError"
    assert str(made.error).startswith(f"{policy} is a checkpoint "
                                      "sharding callback")
    assert (f"it needs TensorFlow 2.16 or newer, and this is TensorFlow "
            f"{tf.__version__}") in str(made.error)
    return
  assert isinstance(made.result, tf.train.experimental.ShardingCallback)
  options = tf.train.CheckpointOptions(
      experimental_sharding_callback=made.result)
  path = tf_objckpt.Checkpoint(
      v=[tf.Variable(1.), tf.Variable(2.)]).write(str(tmp_path / "ckpt"),
                                                  options=options)
  assert tl.values(path)["v/1/.ATTRIBUTES/VARIABLE_VALUE"] == 2.


def test_options_of_every_version_pass_through(tmp_path):
  variable = tf.Variable(1.0)
  options = tf_objckpt.CheckpointOptions(
      experimental_io_device="/job:localhost", durable=True)
  path = tf_objckpt.Checkpoint(v=variable).write(str(tmp_path / "ckpt"),
                                                 options=options)
  assert tl.values(path)["v/.ATTRIBUTES/VARIABLE_VALUE"] == 1.0


def test_unknown_options_keep_tensorflows_error():
  theirs = tl.outcome(tf.train.CheckpointOptions, experimental_typo=1)
  ours = tl.outcome(tf_objckpt.CheckpointOptions, experimental_typo=1)
  assert theirs.name == ours.name == "TypeError"
  assert str(ours.error) == str(theirs.error)


def test_keras_is_keras_3_from_tensorflow_2_16():
  keras_3 = int(keras.__version__.split(".")[0]) >= 3
  assert keras_3 == (_TENSORFLOW_VERSION_WITH_KERAS_3 <= _tensorflow_version())
  assert tl.KERAS_3 == keras_3
  assert ("keras3" in tl.FLAVORS) == keras_3
