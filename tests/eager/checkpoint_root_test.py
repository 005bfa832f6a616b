"""`Checkpoint(root=obj)`: obj itself is the root, other arguments attached."""

import pytest
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

import tf_objckpt


def _objects(v_value=1.0, w_value=2.0):
  model = tf.Module()
  model.v = tf.Variable(v_value)
  other = tf.Module()
  other.w = tf.Variable(w_value)
  return model, other


def _keys_and_graph(path):
  reader = tf.train.load_checkpoint(path)
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
  return set(reader.get_variable_to_shape_map()), graph


@pytest.mark.parametrize("writer, reader", [
    (tf.train.Checkpoint, tf_objckpt.Checkpoint),
    (tf_objckpt.Checkpoint, tf.train.Checkpoint),
])
def test_root_checkpoints_match_and_cross_restore(tmp_path, writer, reader):
  model, other = _objects()
  ours = tf_objckpt.Checkpoint(root=model, other=other).save(
      str(tmp_path / "ours"))
  theirs = tf.train.Checkpoint(root=model, other=other).save(
      str(tmp_path / "theirs"))
  assert _keys_and_graph(ours) == _keys_and_graph(theirs)

  path = writer(root=model, other=other).save(str(tmp_path / "cross"))
  new_model, new_other = _objects(0.0, 0.0)
  checkpoint = reader(root=new_model, other=new_other)
  checkpoint.restore(path).assert_consumed()
  assert new_model.v.numpy() == 1.0
  assert new_other.w.numpy() == 2.0
  assert checkpoint.save_counter.numpy() == 1


def test_root_conflicting_argument_raises_like_tensorflow():
  model, other = _objects()
  model.other = tf.Module()
  for checkpoint_cls in (tf.train.Checkpoint, tf_objckpt.Checkpoint):
    with pytest.raises(ValueError, match="root.other already exists"):
      checkpoint_cls(root=model, other=other)
