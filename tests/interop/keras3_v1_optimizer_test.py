"""A v1 optimizer's state, saved by a v1 `Saver`, restored into Keras 3.

A tf.compat.v1 network trains N steps with a v1 optimizer in a session and
is saved with `tf.compat.v1.train.Saver`; then it trains one more step. The
same network in Keras 3, with the equivalent Keras 3 optimizer restored from
the checkpoint (slots by their v1 names, `iterations` from `beta1_power` or
`global_step`), takes one step too: the weights must agree with the v1 step.
That holds only if every slot and the step count were restored (Adam's bias
correction depends on the count). TensorFlow restores none of this into
Keras 3, so the tests compare with v1 training, not with TensorFlow's
restore. A departure in API.md.

Covers: tf_objckpt.restoring.v1_optimizer_state,
tf_objckpt.saveables.v1_optimizer_saveables, tf_objckpt.restoring.name_based.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt
from tf_objckpt.restoring import v1_optimizer_state

_X = np.random.RandomState(3).rand(6, 3).astype(np.float32)
_Y = np.random.RandomState(4).rand(6, 2).astype(np.float32)
_STEPS = 3
_V1 = tf.compat.v1.train

# name -> (v1 optimizer, the equivalent Keras 3 optimizer).
OPTIMIZERS = {
    "adam": (lambda: _V1.AdamOptimizer(0.01, epsilon=1e-7),
             lambda: keras.optimizers.Adam(0.01, epsilon=1e-7)),
    "adagrad": (lambda: _V1.AdagradOptimizer(0.1),
                lambda: keras.optimizers.Adagrad(0.1)),
    "rmsprop":
        (lambda: _V1.RMSPropOptimizer(0.01, momentum=0.5, epsilon=1e-7),
         lambda: keras.optimizers.RMSprop(0.01, momentum=0.5, epsilon=1e-7)),
    "rmsprop_centered":
        (lambda: _V1.RMSPropOptimizer(
            0.01, momentum=0.5, epsilon=1e-7, centered=True), lambda: keras.
         optimizers.RMSprop(0.01, momentum=0.5, epsilon=1e-7, centered=True)),
    "ftrl":
        (lambda: _V1.FtrlOptimizer(0.1), lambda: keras.optimizers.Ftrl(0.1)),
    "adadelta": (lambda: _V1.AdadeltaOptimizer(1.0, epsilon=1e-7),
                 lambda: keras.optimizers.Adadelta(1.0, epsilon=1e-7)),
    # Keras 3 SGD's momentum is -learning_rate times v1's.
    "momentum": (lambda: _V1.MomentumOptimizer(0.1, 0.9),
                 lambda: keras.optimizers.SGD(0.1, momentum=0.9)),
    "nesterov":
        (lambda: _V1.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
         lambda: keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True)),
}


def _v1_train(tmp_path, optimizer, global_step=True, steps=_STEPS):
  """Trains `steps` steps, saves, steps once more.

  Returns:
    The checkpoint path and `{variable name: value}` after the extra step.
  """
  with tf.Graph().as_default():
    inputs = tf.compat.v1.placeholder(tf.float32, (None, 3))
    outputs = tl.v1_dense(tf.nn.relu(tl.v1_dense(inputs, 4, "dense")), 2,
                          "dense_1")
    loss = tf.reduce_mean(tf.square(outputs - _Y))
    step = (tf.compat.v1.train.get_or_create_global_step()
            if global_step else None)
    train = optimizer.minimize(loss, global_step=step)
    weights = tf.compat.v1.trainable_variables()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      for _ in range(steps):
        sess.run(train, {inputs: _X})
      path = tf.compat.v1.train.Saver().save(sess, str(tmp_path / "v1"))
      sess.run(train, {inputs: _X})
      after = {w.op.name: sess.run(w) for w in weights}
  return path, after


def _model(built=True):
  layers = [
      keras.layers.Dense(4, activation="relu", name="dense"),
      keras.layers.Dense(2, name="dense_1")
  ]
  if built:
    layers.insert(0, keras.Input((3,)))
  return keras.Sequential(layers, name="sequential")


def _keras_step(model, optimizer):
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(tf.square(model(_X) - _Y))
  grads = tape.gradient(loss, model.trainable_variables)
  optimizer.apply_gradients(zip(grads, model.trainable_variables))


def _assert_same_step(model, v1_after, renamed=None):
  for variable in model.trainable_variables:
    key = variable.path.partition("/")[2]  # Without the model's name.
    for old, new in (renamed or {}).items():
      key = key.replace(old, new)
    np.testing.assert_allclose(variable.numpy(),
                               v1_after[key],
                               rtol=2e-5,
                               atol=1e-6,
                               err_msg=key)


def _iterations_path(optimizer):
  """The object path of `optimizer.iterations` under "optimizer".

  Keras 3.3 tracks it as `iterations`, later versions as `_iterations`.
  """
  names = [
      name for name, child in optimizer._trackable_children().items()  # pylint: disable=protected-access
      if child is optimizer.iterations
  ]
  assert len(names) == 1, names
  return f"optimizer/{names[0]}"


def _restore(path, built):
  model, optimizer = _model(built), OPTIMIZERS["adam"][1]()
  if built:
    optimizer.build(model.trainable_variables)
  status = tf_objckpt.Checkpoint(model=model, optimizer=optimizer).restore(path)
  return model, optimizer, status


@pytest.mark.parametrize("built", [True, False], ids=["built", "deferred"])
@pytest.mark.parametrize("global_step", [True, False],
                         ids=["global_step", "no_global_step"])
def test_adam_steps_on_like_v1(tmp_path, built, global_step):
  path, v1_after = _v1_train(tmp_path, OPTIMIZERS["adam"][0](), global_step)
  model, optimizer, status = _restore(path, built)
  assert int(optimizer.iterations.numpy()) == _STEPS  # Set before the build.
  _keras_step(model, optimizer)
  _assert_same_step(model, v1_after)
  status.assert_consumed()

  report = status.report()
  by_key = {value.key: value for value in report.restored}
  slot_keys = {
      f"{layer}/{weight}/{slot}" for layer in ("dense", "dense_1")
      for weight in ("kernel", "bias") for slot in ("Adam", "Adam_1")
  }
  assert slot_keys <= set(by_key)
  assert by_key["dense/kernel/Adam"].path.startswith("optimizer/")
  # The count came from beta1_power, checked by beta2_power, even when a
  # global_step is there too: it stays unmatched.
  assert by_key["beta1_power"].path == _iterations_path(optimizer)
  assert f"iterations = {_STEPS}" in by_key["beta1_power"].note
  assert "agrees" in by_key["beta2_power"].note
  assert "'beta1_power' (iterations = 3" in str(report)
  assert [value.key for value in report.unmatched
         ] == (["global_step"] if global_step else [])
  if global_step:
    assert "came from beta1_power" in report.unmatched[0].note
  assert not report.objects_without_values


def test_optimizer_tracked_after_restore_steps_on_like_v1(tmp_path):
  path, v1_after = _v1_train(tmp_path, OPTIMIZERS["adam"][0]())
  model, optimizer = _model(), OPTIMIZERS["adam"][1]()
  checkpoint = tf_objckpt.Checkpoint(model=model)
  status = checkpoint.restore(path)
  checkpoint.optimizer = optimizer
  assert int(optimizer.iterations.numpy()) == _STEPS
  _keras_step(model, optimizer)  # Builds the optimizer: slots land here.
  _assert_same_step(model, v1_after)
  status.assert_consumed()


def test_restore_then_fit_steps_like_v1(tmp_path):
  """`fit` builds the model and the optimizer after the restore."""
  path, v1_after = _v1_train(tmp_path, OPTIMIZERS["adam"][0]())
  model, optimizer = _model(built=False), OPTIMIZERS["adam"][1]()
  model.compile(optimizer=optimizer, loss="mse")
  status = tf_objckpt.Checkpoint(model=model, optimizer=optimizer).restore(path)
  model.fit(_X, _Y, batch_size=len(_X), epochs=1, shuffle=False, verbose=0)
  _assert_same_step(model, v1_after)
  status.assert_consumed()


def test_without_the_count_adam_would_step_differently(tmp_path):
  """The differential test can fail: a restarted count changes the step."""
  path, v1_after = _v1_train(tmp_path, OPTIMIZERS["adam"][0]())
  model, optimizer, _ = _restore(path, built=True)
  optimizer.iterations.assign(0)
  _keras_step(model, optimizer)
  with pytest.raises(AssertionError):
    _assert_same_step(model, v1_after)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_v1_optimizers_step_on_like_v1(tmp_path, name):
  make_v1, make_keras = OPTIMIZERS[name]
  path, v1_after = _v1_train(tmp_path, make_v1())
  model, optimizer = _model(), make_keras()
  optimizer.build(model.trainable_variables)
  status = tf_objckpt.Checkpoint(model=model, optimizer=optimizer).restore(path)
  status.assert_consumed()
  assert int(optimizer.iterations.numpy()) == _STEPS
  _keras_step(model, optimizer)
  _assert_same_step(model, v1_after)
  report = status.report()
  assert not report.objects_without_values, report
  if name == "adam":  # Counted by beta1_power.
    assert [value.key for value in report.unmatched] == ["global_step"]
  else:
    assert [
        value.path for value in report.restored if value.key == "global_step"
    ] == [_iterations_path(optimizer)]
    assert not report.unmatched, report


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_v1_optimizers_built_after_restore_step_on_like_v1(tmp_path, name):
  """Each slot is recognized as the build makes it (in no list yet)."""
  make_v1, make_keras = OPTIMIZERS[name]
  path, v1_after = _v1_train(tmp_path, make_v1())
  model, optimizer = _model(built=False), make_keras()
  status = tf_objckpt.Checkpoint(model=model, optimizer=optimizer).restore(path)
  _keras_step(model, optimizer)
  _assert_same_step(model, v1_after)
  status.assert_consumed()


def _named_by_kind(optimizer):
  """A copy of `optimizer` naming each slot by its kind alone (`momentum`).

  As Keras 3.3's Adagrad and Ftrl named their accumulators: the slot's name
  does not say which variable it belongs to.
  """

  class NamedByKind(type(optimizer)):

    def add_variable_from_reference(self,
                                    reference_variable,
                                    name=None,
                                    initializer="zeros"):
      return self.add_variable(shape=reference_variable.shape,
                               initializer=initializer,
                               dtype=reference_variable.dtype,
                               name=name)

  return NamedByKind.from_config(optimizer.get_config())


@pytest.mark.parametrize("built", [True, False], ids=["built", "deferred"])
@pytest.mark.parametrize("name", ["adagrad", "adam", "ftrl", "momentum"])
def test_slots_named_by_kind_follow_the_optimizer_lists(tmp_path, name, built):
  """Slots are matched by the optimizer's structure, not their full names."""
  make_v1, make_keras = OPTIMIZERS[name]
  path, v1_after = _v1_train(tmp_path, make_v1())
  model, optimizer = _model(built), _named_by_kind(make_keras())
  if built:
    optimizer.build(model.trainable_variables)
    assert {variable.name for variable in optimizer.variables[2:]
           } <= {"momentum", "velocity", "accumulator", "linear"}
  status = tf_objckpt.Checkpoint(model=model, optimizer=optimizer).restore(path)
  _keras_step(model, optimizer)
  _assert_same_step(model, v1_after)
  status.assert_consumed()


def test_v1_slots_without_a_keras_home_fail_assert_consumed(tmp_path):
  """v1 RMSProp keeps a momentum slot that Keras 3 RMSprop(momentum=0) lacks."""
  path, _ = _v1_train(tmp_path, _V1.RMSPropOptimizer(0.01))
  model, optimizer = _model(), keras.optimizers.RMSprop(0.01)
  optimizer.build(model.trainable_variables)
  status = tf_objckpt.Checkpoint(model=model, optimizer=optimizer).restore(path)
  status.assert_existing_objects_matched()
  unmatched = sorted(value.key for value in status.report().unmatched)
  assert unmatched == sorted(
      f"{layer}/{weight}/RMSProp_1" for layer in ("dense", "dense_1")
      for weight in ("kernel", "bias"))
  with pytest.raises(AssertionError, match="dense/kernel/RMSProp_1"):
    status.assert_consumed()


def test_sgd_momentum_under_a_schedule_is_named_not_guessed(tmp_path):
  """With a learning-rate schedule, -learning_rate * v1's is no constant."""
  path, _ = _v1_train(tmp_path, _V1.MomentumOptimizer(0.1, 0.9))
  schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
  model = _model()
  optimizer = keras.optimizers.SGD(schedule, momentum=0.9)
  optimizer.build(model.trainable_variables)
  status = tf_objckpt.Checkpoint(model=model, optimizer=optimizer).restore(path)
  report = status.report()
  notes = {value.key: value.note for value in report.unmatched}
  assert "schedule" in notes["dense/kernel/Momentum"]
  assert len(report.objects_without_values) == 4  # The Keras momentums.
  with pytest.raises(AssertionError, match="sequential_dense_kernel_momentum"):
    status.assert_consumed()


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
@pytest.mark.parametrize("name", ["adam", "momentum"])
def test_built_by_the_first_step_after_restore(tmp_path, name, traced):
  """A custom training loop builds the model and optimizer in its step."""
  path, v1_after = _v1_train(tmp_path, OPTIMIZERS[name][0]())
  model, optimizer = _model(built=False), OPTIMIZERS[name][1]()
  status = tf_objckpt.Checkpoint(model=model, optimizer=optimizer).restore(path)
  (tf.function(_keras_step) if traced else _keras_step)(model, optimizer)
  _assert_same_step(model, v1_after)
  status.assert_consumed()


def test_sgd_momentum_is_scaled_and_says_so(tmp_path):
  path, v1_after = _v1_train(tmp_path, OPTIMIZERS["momentum"][0]())
  model, optimizer = _model(built=False), OPTIMIZERS["momentum"][1]()
  status = tf_objckpt.Checkpoint(model=model, optimizer=optimizer).restore(path)
  _keras_step(model, optimizer)
  _assert_same_step(model, v1_after)
  status.assert_consumed()
  notes = {value.key: value.note for value in status.report().restored}
  assert notes["dense/kernel/Momentum"] == "times -learning_rate = -0.1"


def test_inconsistent_beta_powers_leave_iterations_named(tmp_path):
  """Betas other than v1's give no count; report and assertions say why."""
  path, _ = _v1_train(tmp_path,
                      _V1.AdamOptimizer(0.01, beta1=0.8),
                      global_step=False)
  model, optimizer = _model(), keras.optimizers.Adam(0.01)
  optimizer.build(model.trainable_variables)
  status = tf_objckpt.Checkpoint(model=model, optimizer=optimizer).restore(path)
  assert int(optimizer.iterations.numpy()) == 0
  report = status.report()
  notes = {value.key: value.note for value in report.unmatched}
  assert "no integer power" in notes["beta1_power"]
  assert any(
      text.startswith(_iterations_path(optimizer))
      for text in report.objects_without_values)
  with pytest.raises(AssertionError, match="iteration.*no integer power"):
    status.assert_consumed()


def test_global_step_counts_when_the_powers_cannot(tmp_path):
  path, _ = _v1_train(tmp_path, _V1.AdamOptimizer(0.01, beta1=0.8))
  model, optimizer = _model(), keras.optimizers.Adam(0.01)
  optimizer.build(model.trainable_variables)
  status = tf_objckpt.Checkpoint(model=model, optimizer=optimizer).restore(path)
  assert int(optimizer.iterations.numpy()) == _STEPS
  report = status.report()
  assert [
      value.path for value in report.restored if value.key == "global_step"
  ] == [_iterations_path(optimizer)]
  with pytest.raises(AssertionError, match="beta1_power"):
    status.assert_consumed()  # The powers found no home.


def test_assignment_map_names_the_count_and_moves_the_slots(tmp_path):
  path, v1_after = _v1_train(tmp_path, OPTIMIZERS["adam"][0]())
  model = keras.Sequential([
      keras.Input((3,)),
      keras.layers.Dense(4, activation="relu", name="hidden"),
      keras.layers.Dense(2, name="dense_1")
  ],
                           name="sequential")
  optimizer = OPTIMIZERS["adam"][1]()
  optimizer.build(model.trainable_variables)
  options = tf_objckpt.CheckpointOptions(assignment_map={
      "dense/": "sequential/hidden/",
      "global_step": optimizer.iterations.path
  })  # "adam/iteration"
  status = tf_objckpt.Checkpoint(model=model,
                                 optimizer=optimizer).restore(path,
                                                              options=options)
  by_key = {value.key: value for value in status.report().restored}
  assert by_key["global_step"].path == _iterations_path(optimizer)
  assert by_key["dense/kernel/Adam_1"].path.startswith("optimizer/")
  _keras_step(model, optimizer)
  _assert_same_step(model, v1_after, renamed={"hidden/": "dense/"})


@pytest.mark.parametrize("steps", [1, 5, 200, 700])
def test_adam_step_count_from_float32_powers(steps):
  """The count survives float32 rounding over many steps."""
  powers = {"beta1_power": np.float32(0.9), "beta2_power": np.float32(0.999)}
  for _ in range(steps):
    powers = {
        key: np.float32(value * np.float32(beta))
        for (key, value), beta in zip(powers.items(), (0.9, 0.999))
    }
  count = v1_optimizer_state.adam_step_count(powers, {
      "beta1_power": 0.9,
      "beta2_power": 0.999
  })
  assert count.value == steps
  assert list(count.notes) == ["beta1_power", "beta2_power"]


def test_adam_step_count_after_beta1_power_underflows():
  powers = {
      "beta1_power": np.float32(0.0),
      "beta2_power": np.float32(0.999)**1201
  }
  count = v1_optimizer_state.adam_step_count(powers, {
      "beta1_power": 0.9,
      "beta2_power": 0.999
  })
  assert count.value == 1200 and list(count.notes) == ["beta2_power"]
