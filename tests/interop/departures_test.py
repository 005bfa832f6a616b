"""Departures from TensorFlow listed in API.md that no other test pins.

Each test does the same thing with TensorFlow and with tf_objckpt and pins
both behaviours, so that a change on either side shows up here.

Covers: tf_objckpt.engine.sharding, tf_objckpt.engine.writes,
tf_objckpt.checkpoint, tf_objckpt.tracking, tf_objckpt.api.object_checkpoints,
tf_objckpt.objects.auto_trackable.
"""

import os

import pytest
import tensorflow as tf
from tensorflow.python.checkpoint import checkpoint as tf_checkpoint_lib

import testlib as tl


def _merge_ops_of_a_graph_mode_save(impl, directory):
  """How many MergeV2Checkpoints ops a CheckpointV1 save builds."""
  with tl.GraphProgram(impl) as program:
    checkpoint = program.lib.CheckpointV1(v=program.variable("v", 1.))
    program.initialize()
    checkpoint.save(os.path.join(directory, impl, "ckpt"),
                    session=program.session)
    return sum(op.type == "MergeV2Checkpoints"
               for op in program.graph.get_operations())


def test_single_shard_saves_are_written_in_place(tmp_path):
  """One host's values: one SaveV2 writes the prefix, with no merge."""
  assert _merge_ops_of_a_graph_mode_save("tf", str(tmp_path)) == 1
  assert _merge_ops_of_a_graph_mode_save("ours", str(tmp_path)) == 0
  tl.assert_same_files(tmp_path)


def test_sharding_callbacks_are_checked(tmp_path):
  """A callback that drops a key fails our save; TensorFlow writes without it."""

  class DropsTheFirstKey(tf.train.experimental.ShardingCallback):
    description = "Drops the first key."

    def __call__(self, shardable_tensors):
      return [{
          tensor.checkpoint_key: {
              tensor.slice_spec: tensor.tensor
          } for tensor in shardable_tensors[1:]
      }]

  options = tf.train.CheckpointOptions(
      experimental_sharding_callback=DropsTheFirstKey())
  outcomes = {}
  for impl, lib in tl.IMPLS.items():
    checkpoint = lib.Checkpoint(a=tf.Variable(1.), b=tf.Variable(2.))
    prefix = str(tmp_path / impl / "ckpt")
    outcomes[impl] = (tl.outcome(checkpoint.write, prefix,
                                 options=options), prefix)
  assert outcomes["tf"][0].error is None
  assert "a/.ATTRIBUTES/VARIABLE_VALUE" not in tl.signature(outcomes["tf"][1])
  error = outcomes["ours"][0].error
  assert isinstance(error, RuntimeError)
  assert "not found in the checkpoint shards" in str(error)
  assert "a/.ATTRIBUTES/VARIABLE_VALUE" in str(error)
  assert not os.path.exists(outcomes["ours"][1] + ".index")


def test_graph_mode_saves_apply_each_saves_sharding_callback(tmp_path):
  """TensorFlow reuses its first save op, whatever later options say."""
  num_shards = {}
  for impl in tl.IMPLS:
    with tl.GraphProgram(impl) as program:
      checkpoint = program.lib.CheckpointV1(v=program.variable("v", [1.] * 100))
      program.initialize()
      checkpoint.write(str(tmp_path / impl / "first"), session=program.session)
      path = checkpoint.write(
          str(tmp_path / impl / "second"),
          session=program.session,
          options=tf.train.CheckpointOptions(experimental_sharding_callback=(
              tf.train.experimental.MaxShardSizePolicy(100))))
      num_shards[impl] = tl.file_layout(path)["num_shards"]
  assert num_shards == {"tf": 1, "ours": 4}  # 400 bytes in 100-byte files.


class _WithFunction:
  """Mixes in a traced method, declared on the class."""

  @tf.function(input_signature=[])
  def f(self):
    return tf.constant(1.)


@pytest.mark.parametrize("impl", tl.IMPLS)
def test_saved_models_get_no_functions_of_auto_trackables(tmp_path, impl):
  """TensorFlow's AutoTrackable exports class-level tf.functions; ours not."""
  root = type("Root", (_WithFunction, tl.IMPLS[impl].AutoTrackable), {})()
  root.v = tf.Variable(2.)
  tf.saved_model.save(root, str(tmp_path))
  loaded = tf.saved_model.load(str(tmp_path))
  assert float(loaded.v.numpy()) == 2.
  assert hasattr(loaded, "f") == (impl == "tf")


def test_graph_mode_save_without_a_session_is_a_runtime_error(
    tmp_path, monkeypatch):
  """TensorFlow's `save()` fails calling `run` on None; `write()` raises."""
  monkeypatch.setattr(tf_checkpoint_lib, "_SESSION_PROVIDER", None)
  errors = {}
  for impl, lib in tl.IMPLS.items():
    with tf.Graph().as_default():
      checkpoint = lib.CheckpointV1(v=tf.compat.v1.get_variable("v", [1]))
      errors[impl] = tl.outcome(checkpoint.save,
                                os.path.join(tmp_path, impl, "ckpt")).error
  assert isinstance(errors["tf"], AttributeError), errors["tf"]
  assert isinstance(errors["ours"], RuntimeError), errors["ours"]
  assert str(errors["ours"]).startswith("Unable to save checkpoint to")
  assert "in graph mode without a default session" in str(errors["ours"])
