"""`Checkpoint(root=obj)`: obj itself is the root, other arguments attached.

Covers: tf_objckpt.checkpoint, tf_objckpt.api.object_checkpoints.
"""

import pytest
import tensorflow as tf

import testlib as tl


def _objects(v_value=1.0, w_value=2.0):
  model = tf.Module()
  model.v = tf.Variable(v_value)
  other = tf.Module()
  other.w = tf.Variable(w_value)
  return model, other


@pytest.mark.parametrize("writer", tl.IMPLS)
def test_root_checkpoints_match_and_cross_restore(tmp_path, writer):
  model, other = _objects()
  paths = {
      impl:
          lib.Checkpoint(root=model,
                         other=other).save(str(tmp_path / impl / "ckpt"))
      for impl, lib in tl.IMPLS.items()
  }
  tl.assert_same_checkpoint(paths["tf"], paths["ours"])

  new_model, new_other = _objects(0.0, 0.0)
  checkpoint = tl.IMPLS[tl.other(writer)].Checkpoint(root=new_model,
                                                     other=new_other)
  checkpoint.restore(paths[writer]).assert_consumed()
  assert new_model.v.numpy() == 1.0
  assert new_other.w.numpy() == 2.0
  assert checkpoint.save_counter.numpy() == 1


def test_root_conflicting_argument_raises_like_tensorflow():
  model, other = _objects()
  model.other = tf.Module()
  for lib in tl.IMPLS.values():
    with pytest.raises(ValueError, match="root.other already exists"):
      lib.Checkpoint(root=model, other=other)
