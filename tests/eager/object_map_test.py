"""`CheckpointOptions(object_map=...)`: a checkpoint's sub-tree into another
object, eagerly.

Each restore is compared with TensorFlow's way to do the same, rebuilding
the checkpoint's structure around the new objects
(`tf.train.Checkpoint(model=tf.train.Checkpoint(encoder=new.backbone))`):
the same values land in the same objects, and for a checkpoint the map
covers whole, the same assertions pass. Also: several pairs, nested pairs
(the inner pair wins its sub-tree), the load status asking only about the
mapped paths and naming both sides' paths, paths missing on either side
(errors naming them and near names), mismatches found before anything is
assigned, `CheckpointManager.restore_or_initialize(options=...)`, the dry
run (`preview_restore`), and checkpoints written after a mapped restore
restoring in TensorFlow with the new structure.

Covers: tf_objckpt.restoring.object_maps, tf_objckpt.restoring.map_preview,
tf_objckpt.restoring.restore_walk, tf_objckpt.api.load_status,
tf_objckpt.api.checkpoint_manager.
"""

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt

_MAP = {"backbone": "model/encoder"}


def _encoder(scale, extra=False):
  """A tf.Module with two dense-like sub-modules (and an extra variable)."""
  encoder = tf.Module()
  encoder.dense = tf.Module()
  encoder.dense.kernel = tf.Variable(np.full((2, 3), scale, np.float32))
  encoder.dense.bias = tf.Variable(np.full((3,), scale + 1, np.float32))
  encoder.dense_1 = tf.Module()
  encoder.dense_1.kernel = tf.Variable(np.full((3,), scale + 2, np.float32))
  if extra:
    encoder.extra = tf.Variable(scale + 3)
  return encoder


def _pretrained(tmp_path, writer="tf"):
  """A checkpoint of `model=(encoder, decoder), step`, written by `writer`."""
  model = tf.Module()
  model.encoder = _encoder(1.0)
  model.decoder = _encoder(10.0)
  objects = dict(model=model, step=tf.Variable(7, dtype=tf.int64))
  return tl.write(writer, str(tmp_path / writer / "ckpt"), **objects)


def _values(module):
  return [v.numpy().tolist() for v in module.trainable_variables]


def _new_classifier():
  classifier = tf.Module()
  classifier.backbone = _encoder(0.0)
  classifier.head = tf.Variable([0.0, 0.0])
  return classifier


@pytest.mark.parametrize("writer", ["tf", "ours"])
def test_mapped_read_matches_tensorflow_rebuilt_structure(tmp_path, writer):
  path = _pretrained(tmp_path, writer)
  ours, theirs = _new_classifier(), _new_classifier()
  status = tf_objckpt.Checkpoint(backbone=ours.backbone).read(
      path, options=tf_objckpt.CheckpointOptions(object_map=_MAP))
  tf_status = tf.train.Checkpoint(model=tf.train.Checkpoint(
      encoder=theirs.backbone)).read(path)
  assert _values(ours.backbone) == _values(theirs.backbone)
  assert ours.backbone.dense.kernel.numpy().tolist() == [[1.0] * 3] * 2
  # Ours asks only about the mapped paths; TensorFlow's rebuilt structure
  # leaves the decoder and step unmatched. Both match the existing objects.
  assert tl.assertion_outcomes(status) == ["ok", "ok", "ok"]
  assert tl.assertion_outcomes(tf_status)[1:] == ["ok", "ok"]
  tf_status.expect_partial()


def test_restore_and_map_of_the_root(tmp_path):
  path = _pretrained(tmp_path)
  backbone = _encoder(0.0)
  status = tf_objckpt.Checkpoint(root=backbone).read(
      path,
      options=tf_objckpt.CheckpointOptions(object_map={"": "model/encoder"}))
  status.assert_consumed()
  assert backbone.dense_1.kernel.numpy().tolist() == [3.0] * 3


def test_several_pairs(tmp_path):
  path = _pretrained(tmp_path)
  new = tf.Module()
  new.first = _encoder(0.0)
  new.second = _encoder(0.0)
  counter = tf.Variable(0, dtype=tf.int64)
  status = tf_objckpt.Checkpoint(new=new, counter=counter).read(
      path,
      options=tf_objckpt.CheckpointOptions(
          object_map={
              "new/first": "model/encoder",
              "new/second": "model/decoder",
              "counter": "step",
          }))
  status.assert_consumed()
  theirs = tf.Module()
  theirs.first, theirs.second = _encoder(0.0), _encoder(0.0)
  their_counter = tf.Variable(0, dtype=tf.int64)
  tf.train.Checkpoint(model=tf.train.Checkpoint(encoder=theirs.first,
                                                decoder=theirs.second),
                      step=their_counter).read(path).assert_consumed()
  assert _values(new) == _values(theirs)
  assert counter.numpy() == their_counter.numpy() == 7


def test_nested_pair_wins_its_sub_tree(tmp_path):
  path = _pretrained(tmp_path)
  new = _new_classifier()
  del new.head
  status = tf_objckpt.Checkpoint(model=new).read(
      path,
      options=tf_objckpt.CheckpointOptions(
          object_map={
              "model/backbone": "model/encoder",
              "model/backbone/dense_1": "model/decoder/dense_1",
          }))
  status.assert_existing_objects_matched()
  assert new.backbone.dense.kernel.numpy()[0, 0] == 1.0
  assert new.backbone.dense_1.kernel.numpy()[0] == 12.0
  # The encoder's dense_1, which the nested pair replaced, is asked about.
  with pytest.raises(AssertionError, match="model/encoder/dense_1/kernel"):
    status.assert_consumed()
  theirs = _new_classifier()
  tf.train.Checkpoint(model=tf.train.Checkpoint(
      encoder=theirs.backbone)).read(path).expect_partial()
  tf.train.Checkpoint(model=tf.train.Checkpoint(decoder=tf.train.Checkpoint(
      dense_1=theirs.backbone.dense_1))).read(path).expect_partial()
  assert _values(new.backbone) == _values(theirs.backbone)


def test_two_pairs_naming_one_node_or_object_fail(tmp_path):
  path = _pretrained(tmp_path)
  new = _new_classifier()
  checkpoint = tf_objckpt.Checkpoint(a=new.backbone, b=new.backbone.dense)
  with pytest.raises(ValueError, match="restores checkpoint path"):
    checkpoint.read(path,
                    options=tf_objckpt.CheckpointOptions(object_map={
                        "a": "model/encoder",
                        "b": "model/encoder"
                    }))
  with pytest.raises(ValueError, match="are one object"):
    checkpoint.read(
        path,
        options=tf_objckpt.CheckpointOptions(object_map={
            "b": "model/encoder/dense",
            "a/dense": "model/decoder/dense"
        }))


def test_unmapped_paths_restore_as_usual(tmp_path):
  path = _pretrained(tmp_path)
  new = _new_classifier()
  step = tf.Variable(0, dtype=tf.int64)
  status = tf_objckpt.Checkpoint(backbone=new.backbone, step=step).read(
      path, options=tf_objckpt.CheckpointOptions(object_map=_MAP))
  status.assert_consumed()
  assert step.numpy() == 7


def test_status_names_both_sides(tmp_path):
  path = _pretrained(tmp_path)
  new = _new_classifier()
  new.backbone.dense_2 = tf.Module()
  new.backbone.dense_2.kernel = tf.Variable([1.0])
  del new.backbone.dense_1
  status = tf_objckpt.Checkpoint(backbone=new.backbone).read(
      path, options=tf_objckpt.CheckpointOptions(object_map=_MAP))
  with pytest.raises(AssertionError) as raised:
    status.assert_existing_objects_matched()
  assert ("backbone/dense_2/kernel has no value at "
          "model/encoder/dense_2/kernel") in str(raised.value)
  with pytest.raises(AssertionError, match="backbone/dense_2/kernel"):
    status.assert_consumed()
  report = str(status.report())
  assert ("model/encoder/dense_1/kernel (3,) float32 (no object at "
          "backbone/dense_1/kernel)") in report
  assert ("model/encoder/dense/kernel (2, 3) float32 (into "
          "backbone/dense/kernel)") in report
  assert "model/decoder" not in report
  assert "backbone/dense_2/kernel has no value at" in report


@pytest.mark.parametrize("object_map,error,words", [
    ({
        "backbone": "model/encodr"
    }, tf.errors.NotFoundError, "'model/encodr' is not in checkpoint.*"
     "Closest: model/encoder"),
    ({
        "backbon": "model/encoder"
    }, ValueError, "'backbon' is not an object.*Closest: backbone"),
])
def test_missing_paths_fail_naming_them(tmp_path, object_map, error, words):
  path = _pretrained(tmp_path)
  new = _new_classifier()
  before = _values(new.backbone)
  with pytest.raises(error, match=words):
    tf_objckpt.Checkpoint(backbone=new.backbone).read(
        path, options=tf_objckpt.CheckpointOptions(object_map=object_map))
  assert _values(new.backbone) == before


def test_bad_object_map_type():
  with pytest.raises(TypeError, match="object_map"):
    tf_objckpt.CheckpointOptions(object_map=[("a", "b")])


def test_mismatch_assigns_nothing(tmp_path):
  path = _pretrained(tmp_path)
  ours, theirs = _new_classifier(), _new_classifier()
  for new in (ours, theirs):
    new.backbone.dense_1.kernel = tf.Variable([5.0, 5.0])  # Not (3,).
  error = tl.outcome(
      tf_objckpt.Checkpoint(backbone=ours.backbone).read,
      path,
      options=tf_objckpt.CheckpointOptions(object_map=_MAP)).error
  tf_error = tl.outcome(
      tf.train.Checkpoint(model=tf.train.Checkpoint(
          encoder=theirs.backbone)).read, path).error
  assert type(error) is type(tf_error)  # pylint: disable=unidiomatic-typecheck
  assert "model/encoder/dense_1/kernel" in str(error)
  assert ours.backbone.dense.kernel.numpy().tolist(
  ) == [[0.0] * 3] * 2  # Nothing assigned.


def test_restore_on_create_below_the_mapped_object(tmp_path):
  path = _pretrained(tmp_path)
  backbone = tf_objckpt.AutoTrackable()
  status = tf_objckpt.Checkpoint(backbone=backbone).read(
      path, options=tf_objckpt.CheckpointOptions(object_map=_MAP))
  backbone.dense = tf_objckpt.AutoTrackable()
  backbone.dense.kernel = tf.Variable(np.zeros((2, 3), np.float32))
  assert backbone.dense.kernel.numpy()[0, 0] == 1.0
  status.assert_existing_objects_matched()
  with pytest.raises(AssertionError, match="model/encoder/dense/bias"):
    status.assert_consumed()


def test_manager_restore_or_initialize_takes_options(tmp_path):
  model = tf.Module()
  model.encoder = _encoder(1.0)
  directory = str(tmp_path / "pretrained")
  path = tf.train.CheckpointManager(tf.train.Checkpoint(model=model),
                                    directory,
                                    max_to_keep=2).save()
  new = _new_classifier()
  manager = tf_objckpt.CheckpointManager(
      tf_objckpt.Checkpoint(backbone=new.backbone), directory, max_to_keep=2)
  restored = manager.restore_or_initialize(options=tf_objckpt.CheckpointOptions(
      object_map=_MAP))
  assert restored == path
  assert new.backbone.dense_1.kernel.numpy().tolist() == [3.0] * 3


def test_checkpoint_written_after_a_mapped_restore_is_ordinary(tmp_path):
  path = _pretrained(tmp_path)
  new = _new_classifier()
  checkpoint = tf_objckpt.Checkpoint(model=new)
  checkpoint.read(path,
                  options=tf_objckpt.CheckpointOptions(
                      object_map={"model/backbone": "model/encoder"}))
  written = checkpoint.write(str(tmp_path / "fine_tuned" / "ckpt"))
  again = _new_classifier()
  tf.train.Checkpoint(model=again).read(written).assert_consumed()
  assert _values(again) == _values(new)
  assert again.backbone.dense.kernel.numpy().tolist() == [[1.0] * 3] * 2


def test_preview_says_what_would_go_where(tmp_path):
  path = _pretrained(tmp_path)
  new = _new_classifier()
  new.backbone.dense_1.kernel = tf.Variable([5.0, 5.0])
  new.backbone.extra = tf.Variable(1.0)
  checkpoint = tf_objckpt.Checkpoint(backbone=new.backbone)
  preview = checkpoint.preview_restore(
      path, tf_objckpt.CheckpointOptions(object_map=_MAP))
  text = str(preview)
  assert ("backbone/dense/kernel <- model/encoder/dense/kernel (2, 3) "
          "float32") in text
  assert ("backbone/dense_1/kernel <- model/encoder/dense_1/kernel (3,) "
          "float32: the object's shape is (2,)") in text
  assert "backbone/extra has no value at model/encoder/extra" in text
  assert not preview.complete
  assert new.backbone.dense.kernel.numpy()[0, 0] == 0.0  # Nothing assigned.
  del new.backbone.extra
  new.backbone.dense_1.kernel = tf.Variable([0.0, 0.0, 0.0])
  assert checkpoint.preview_restore(
      path, tf_objckpt.CheckpointOptions(object_map=_MAP)).complete
