"""Object maps with Keras: a pretrained encoder into a new classifier.

A checkpoint of `Checkpoint(model=pretrained, optimizer=adam)` (written by
TensorFlow) restores its encoder into a new classifier's backbone, with
`object_map={"model/backbone": "model/encoder", "optimizer": "optimizer"}`,
for Keras 3 and tf_keras: into built models, and restore-on-create (the
backbone built after `read()`; tf_keras's newer optimizers, whose slot
lists name no variables, only without the optimizer). The optimizer's slots follow the moved
variables: the backbone's slots get the encoder's, the new head's stay
untouched (Keras 3's slot lists, matched by variable; tf_keras's legacy
optimizers' slot variables). The same is done with TensorFlow by
rebuilding the old structure around the new objects; the values agree
where TensorFlow's restore matches by variable (TensorFlow restores Keras
3's slot lists by position, so there only the backbone's slots compare).

Covers: tf_objckpt.restoring.object_maps, tf_objckpt.restoring.keras3_slots,
tf_objckpt.restoring.restore_coordinator.
"""

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt

_FLAVORS = [flavor for flavor in tl.FLAVORS if flavor != "tf_keras"]
_MAP = {"model/backbone": "model/encoder", "optimizer": "optimizer"}


def _encoder(k):
  return k.Sequential([
      k.layers.Dense(8, activation="relu"),
      k.layers.Dense(4),
  ])


def _models(flavor):
  """The pretrained model's class and the new classifier's."""
  k = tl.keras_module(flavor)

  class Pretrained(k.Model):

    def __init__(self):
      super().__init__()
      self.encoder = _encoder(k)
      self.head = k.layers.Dense(3)

    def call(self, inputs):
      return self.head(self.encoder(inputs))

  class Classifier(k.Model):

    def __init__(self):
      super().__init__()
      self.backbone = _encoder(k)
      self.classify = k.layers.Dense(2)

    def call(self, inputs):
      return self.classify(self.backbone(inputs))

  return Pretrained, Classifier


def _train(model, optimizer):
  inputs = np.random.RandomState(1).rand(8, 4).astype(np.float32)
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(model(inputs))
  variables = model.trainable_variables
  optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))


def _build(flavor, model, optimizer):
  model(np.zeros((1, 4), np.float32))
  tl.create_optimizer_variables(flavor, optimizer, model.trainable_variables)


def _slots(flavor, optimizer, variable):
  """The optimizer's slots of `variable`, as numpy values."""
  if flavor == "tf_keras_legacy":
    return [optimizer.get_slot(variable, name).numpy() for name in ("m", "v")]
  index = [id(v) for v in optimizer._trainable_variables].index(id(variable))  # pylint: disable=protected-access
  return [
      slots[index].numpy()
      for slots in (optimizer._momentums, optimizer._velocities)  # pylint: disable=protected-access
  ]


def _pretrained(flavor, tmp_path):
  pretrained_class, _ = _models(flavor)
  model, optimizer = pretrained_class(), tl.make_optimizer(flavor)
  _build(flavor, model, optimizer)
  _train(model, optimizer)
  path = tf.train.Checkpoint(model=model, optimizer=optimizer).write(
      str(tmp_path / "pretrained" / "ckpt"))
  return path, model, optimizer


def _assert_moved(flavor, pretrained, new):
  """The backbone holds the encoder's values and slots; the head none."""
  (model, optimizer), (new_model, new_optimizer) = pretrained, new
  for old, moved in zip(model.encoder.weights, new_model.backbone.weights):
    np.testing.assert_array_equal(old.numpy(), moved.numpy())
    for old_slot, slot in zip(_slots(flavor, optimizer, old),
                              _slots(flavor, new_optimizer, moved)):
      np.testing.assert_array_equal(old_slot, slot)
      assert np.any(slot != 0)
  for variable in new_model.classify.weights:
    for slot in _slots(flavor, new_optimizer, variable):
      assert not np.any(slot), "an unmoved variable got slots"


def _assert_only_the_head_unmatched(status):
  """Every mapped value restored; the new head and its slots got none."""
  report = status.report()
  assert not report.unmatched, str(report)
  assert len(report.objects_without_values) == 6, str(report)
  assert sum(
      "classify" in line for line in report.objects_without_values) in (2, 6)
  with pytest.raises(AssertionError, match="model/classify/"):
    status.assert_existing_objects_matched()


@pytest.mark.parametrize("flavor", _FLAVORS)
def test_encoder_into_built_backbone_with_slots(tmp_path, flavor):
  path, *pretrained = _pretrained(flavor, tmp_path)
  _, classifier_class = _models(flavor)
  model, optimizer = classifier_class(), tl.make_optimizer(flavor)
  _build(flavor, model, optimizer)
  status = tf_objckpt.Checkpoint(model=model, optimizer=optimizer).read(
      path, options=tf_objckpt.CheckpointOptions(object_map=_MAP))
  _assert_moved(flavor, pretrained, (model, optimizer))
  _assert_only_the_head_unmatched(status)
  # TensorFlow, the old structure rebuilt around the new objects. Its
  # restore of Keras 3's slot lists goes by position, and fails on the
  # head's: there, only the model compares.
  theirs, their_optimizer = classifier_class(), tl.make_optimizer(flavor)
  _build(flavor, theirs, their_optimizer)
  legacy = flavor == "tf_keras_legacy"
  tf.train.Checkpoint(model=tf.train.Checkpoint(encoder=theirs.backbone),
                      **({
                          "optimizer": their_optimizer
                      } if legacy else {})).read(path).expect_partial()
  for ours, their in zip(model.backbone.weights, theirs.backbone.weights):
    np.testing.assert_array_equal(ours.numpy(), their.numpy())
  if legacy:  # Slot variables, matched by variable in both.
    for ours, their in zip(model.weights, theirs.weights):
      for our_slot, their_slot in zip(_slots(flavor, optimizer, ours),
                                      _slots(flavor, their_optimizer, their)):
        np.testing.assert_array_equal(our_slot, their_slot)


@pytest.mark.parametrize("flavor", _FLAVORS)
def test_restore_on_create_builds_the_backbone_from_the_encoder(
    tmp_path, flavor):
  path, *pretrained = _pretrained(flavor, tmp_path)
  _, classifier_class = _models(flavor)
  model, optimizer = classifier_class(), tl.make_optimizer(flavor)
  status = tf_objckpt.Checkpoint(model=model, optimizer=optimizer).read(
      path, options=tf_objckpt.CheckpointOptions(object_map=_MAP))
  _build(flavor, model, optimizer)  # After read(): restored on creation.
  _assert_moved(flavor, pretrained, (model, optimizer))
  _assert_only_the_head_unmatched(status)


@pytest.mark.parametrize("built", ["before", "after"])
@pytest.mark.parametrize("flavor", tl.FLAVORS)
def test_backbone_alone_and_the_unmatched_head(tmp_path, flavor, built):
  path, model, _ = _pretrained(flavor, tmp_path)
  _, classifier_class = _models(flavor)
  new = classifier_class()
  if built == "before":
    new(np.zeros((1, 4), np.float32))
  status = tf_objckpt.Checkpoint(model=new).read(
      path,
      options=tf_objckpt.CheckpointOptions(
          object_map={"model/backbone": "model/encoder"}))
  if built == "after":
    new(np.zeros((1, 4), np.float32))
  for old, moved in zip(model.encoder.weights, new.backbone.weights):
    np.testing.assert_array_equal(old.numpy(), moved.numpy())
  # The new head has no value: named in the program's words.
  with pytest.raises(AssertionError, match="model/classify/"):
    status.assert_existing_objects_matched()
  status.expect_partial()


@pytest.mark.parametrize("flavor", tl.FLAVORS)
def test_fine_tuned_checkpoint_restores_in_tensorflow(tmp_path, flavor):
  path, *_ = _pretrained(flavor, tmp_path)
  _, classifier_class = _models(flavor)
  model, optimizer = classifier_class(), tl.make_optimizer(flavor)
  _build(flavor, model, optimizer)
  tf_objckpt.Checkpoint(model=model).read(
      path,
      options=tf_objckpt.CheckpointOptions(
          object_map={"model/backbone": "model/encoder"})).expect_partial()
  _train(model, optimizer)
  written = tf_objckpt.Checkpoint(model=model, optimizer=optimizer).write(
      str(tmp_path / "fine_tuned" / "ckpt"))
  again, again_optimizer = classifier_class(), tl.make_optimizer(flavor)
  _build(flavor, again, again_optimizer)
  tf.train.Checkpoint(
      model=again, optimizer=again_optimizer).read(written).assert_consumed()
  for ours, theirs in zip(model.weights, again.weights):
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
