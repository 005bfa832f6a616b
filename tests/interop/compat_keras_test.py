"""tf_objckpt against tf.train.Checkpoint on trained Keras models.

Keras 3 (`import keras`) and Keras 2 (`import tf_keras`, with its new Adam
and its legacy Adam, which keeps slot variables), for Sequential, functional
and subclassed models after one training step. Both write the same
checkpoint; a checkpoint from either restores into fresh models and
optimizers through the other, model weights and optimizer state included.

Covers: tf_objckpt.checkpoint, tf_objckpt.graph_view, tf_objckpt.restore,
tf_objckpt.saveable_object_util, tf_objckpt.api.object_checkpoints,
tf_objckpt.objects.graph_walk, tf_objckpt.objects.graph_serialization,
tf_objckpt.saveables.trackable_saveables, tf_objckpt.saveables.keras3_variables.
"""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import testlib as tl


def test_keras_2_and_3_are_both_importable():
  assert keras.__version__.startswith("3.")
  assert tf_keras.__version__.startswith("2.")
  model = tl.make_model("tf_keras", "functional")
  assert isinstance(model, tf_keras.Model)
  assert not isinstance(model, keras.Model)
  assert isinstance(tl.make_model("keras3", "functional"), keras.Model)


@pytest.mark.parametrize("kind", tl.MODEL_KINDS)
@pytest.mark.parametrize("flavor", tl.FLAVORS)
def test_write_gives_tensorflows_checkpoint(tmp_path, flavor, kind):
  model, optimizer = tl.trained(flavor, kind)
  paths = tl.write_both(tmp_path, model=model, optimizer=optimizer)
  tl.assert_same_checkpoint(paths["tf"], paths["ours"])
  keys = tl.signature(paths["ours"])
  graph = tl.object_graph(paths["ours"])
  # Model weights and optimizer state are in there. The kernels of Keras 3
  # Sequential and functional models are first reached through the
  # optimizer's `_trainable_variables`, so their keys start there.
  through_optimizer = flavor == "keras3" and kind != "subclassed"
  assert through_optimizer != any(
      key.startswith("model/") and "kernel" in key for key in keys)
  assert through_optimizer == any(
      key.startswith("optimizer/_trainable_variables/") for key in keys)
  assert any(key.startswith("optimizer/") and "iter" in key for key in keys)
  slots = [key for key in keys if ".OPTIMIZER_SLOT" in key]
  if flavor == "tf_keras_legacy":
    # m and v for each of the trainable variables.
    assert len(slots) == 2 * len(model.trainable_variables)
    assert any(node.slot_variables for node in graph.nodes)
  else:
    assert not slots


_HYPERPARAMETERS = ("learning_rate", "beta_1", "beta_2", "decay")


@pytest.mark.parametrize("writer", tl.IMPLS)
@pytest.mark.parametrize("kind", tl.MODEL_KINDS)
@pytest.mark.parametrize("flavor", tl.FLAVORS)
def test_cross_restore(tmp_path, flavor, kind, writer):
  model, optimizer = tl.trained(flavor, kind)
  path = tl.write(writer, tmp_path / "ckpt", model=model, optimizer=optimizer)
  expected = tl.values(path)
  fresh_model, fresh_optimizer = tl.untrained(flavor, kind)
  before = tl.snapshot(tmp_path, model=fresh_model, optimizer=fresh_optimizer)
  assert sorted(before) == sorted(expected)
  # Everything but hyperparameters starts different from the checkpoint.
  same = [key for key in expected if np.array_equal(before[key], expected[key])]
  assert all(any(name in key for name in _HYPERPARAMETERS) for key in same)
  reader = tl.IMPLS[tl.other(writer)].Checkpoint(model=fresh_model,
                                                 optimizer=fresh_optimizer)
  status = reader.read(path)
  status.assert_consumed()
  after = tl.snapshot(tmp_path, model=fresh_model, optimizer=fresh_optimizer)
  tl.assert_values_equal(expected, after)
  # The restored model computes what the trained one does.
  x, _ = tl.training_data()
  np.testing.assert_allclose(fresh_model(x).numpy(),
                             model(x).numpy(),
                             rtol=1e-6)


@pytest.mark.parametrize("flavor", tl.FLAVORS)
def test_compiled_and_fitted_model(tmp_path, flavor):
  """`model.fit` on a compiled model, whose optimizer the model holds too."""

  def compiled():
    model = tl.make_model(flavor, "sequential")
    model.compile(optimizer=tl.make_optimizer(flavor), loss="mse")
    return model

  model = compiled()
  x, y = tl.training_data()
  model.fit(x, y, batch_size=16, epochs=1, verbose=0)
  optimizer = model.optimizer
  paths = tl.write_both(tmp_path, model=model, optimizer=optimizer)
  tl.assert_same_checkpoint(paths["tf"], paths["ours"])
  expected = tl.values(paths["tf"])
  for writer in tl.IMPLS:
    fresh = compiled()
    tl.create_optimizer_variables(flavor, fresh.optimizer,
                                  fresh.trainable_variables)
    tl.IMPLS[tl.other(writer)].Checkpoint(model=fresh,
                                          optimizer=fresh.optimizer).read(
                                              paths[writer]).assert_consumed()
    after = tl.snapshot(tmp_path, model=fresh, optimizer=fresh.optimizer)
    tl.assert_values_equal(expected, after)
    assert int(fresh.optimizer.iterations.numpy()) == 1


@pytest.mark.parametrize("flavor", tl.FLAVORS)
def test_model_alone_and_optimizer_alone(tmp_path, flavor):
  """Either half on its own gives the same checkpoint as TensorFlow's."""
  model, optimizer = tl.trained(flavor, "functional")
  for objects in ({
      "model": model
  }, {
      "optimizer": optimizer
  }, {
      "net": model,
      "opt": optimizer,
      "step": tf.Variable(3)
  }):
    name = "_".join(sorted(objects))
    paths = {
        impl: tl.write(impl, tmp_path / name / impl, **objects)
        for impl in tl.IMPLS
    }
    tl.assert_same_checkpoint(paths["tf"], paths["ours"])


def test_saved_path_is_a_string(tmp_path):
  model, optimizer = tl.trained("keras3", "sequential")
  path = tl.write("ours", tmp_path / "ckpt", model=model, optimizer=optimizer)
  assert isinstance(path, str)
  assert os.path.exists(path + ".index")


class _ScaledKerasVariable(keras.Variable):
  """A Keras 3 variable with save logic of its own: it saves twice its value.

  Keras 3 variables are saved and restored as the `tf.Variable` they wrap,
  in batches; a subclass that changes that logic must keep its own.
  """

  def _serialize_to_tensors(self):
    return {"VARIABLE_VALUE": self.value * 2., "scale": tf.constant(2.)}

  def _restore_from_tensors(self, restored_tensors):
    return self.assign(restored_tensors["VARIABLE_VALUE"] /
                       restored_tensors["scale"])


def _keras3_variables(fill):
  """Plain, subclassed and instance-overridden Keras 3 variables."""
  module = tf.Module()
  module.plain = keras.Variable(np.full([3], fill, np.float32))
  module.scaled = _ScaledKerasVariable(np.full([2], fill, np.float32))
  module.overridden = keras.Variable(np.full([2], fill, np.float32))
  overridden = module.overridden
  overridden._serialize_to_tensors = lambda: {  # pylint: disable=protected-access
      "VARIABLE_VALUE": overridden.value + 1.
  }
  overridden._restore_from_tensors = lambda tensors: overridden.assign(  # pylint: disable=protected-access
      tensors["VARIABLE_VALUE"] - 1.)
  return module


@pytest.mark.parametrize("writer", tl.IMPLS)
def test_keras3_variables_keep_their_own_save_logic(tmp_path, writer):
  saved = _keras3_variables(fill=1.)
  paths = tl.write_both(tmp_path, module=saved)
  tl.assert_same_checkpoint(paths["tf"], paths["ours"])
  values = tl.values(paths["ours"])
  scaled_key = "module/scaled/.ATTRIBUTES/VARIABLE_VALUE"
  np.testing.assert_array_equal(values[scaled_key], [2., 2.])
  np.testing.assert_array_equal(
      values["module/overridden/.ATTRIBUTES/VARIABLE_VALUE"], [2., 2.])
  fresh = _keras3_variables(fill=5.)
  tl.IMPLS[tl.other(writer)].Checkpoint(module=fresh).read(
      paths[writer]).assert_consumed()
  for name in ("plain", "scaled", "overridden"):
    np.testing.assert_array_equal(
        getattr(fresh, name).numpy(),
        getattr(saved, name).numpy())
