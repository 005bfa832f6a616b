"""Load statuses pass and raise in the same situations as TensorFlow's.

Each scenario restores a checkpoint into a program that matches it more or
less; it runs with `tf.train.Checkpoint` and with `tf_objckpt.Checkpoint`,
and every assertion of the returned status must have the same outcome. The
warning about unrestored values, logged when a restore is dropped without
`expect_partial()`, must name the same values.

Covers: tf_objckpt.api.load_status, tf_objckpt.restore,
tf_objckpt.restoring.restore_coordinator, tf_objckpt.checkpoint,
tf_objckpt.api.object_checkpoints, tf_objckpt.restoring.checkpoint_position.
"""

import gc

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import testlib as tl
import tf_objckpt

_METHODS = tl.STATUS_ASSERTIONS + ("run_restore_ops", "initialize_or_restore")


def _outcomes_by_method(status):
  """`{method name: "ok" or exception type name}`."""
  return dict(zip(_METHODS, tl.assertion_outcomes(status, _METHODS)))


def _tf_save(tmp_path, **objects):
  return tl.write("tf", tmp_path / "saved" / "ckpt", **objects)


def _module(**attributes):
  module = tf.Module()
  for name, value in attributes.items():
    setattr(module, name, value)
  return module


# Each scenario saves a checkpoint and returns a function that, given a
# Checkpoint class, builds the program's objects and restores into them. It
# returns (status, objects to keep alive).


def _restoring(path, make_objects, method="read"):
  """The restore of a scenario: `method(path)` on `make_objects()`."""

  def restore(cls):
    objects = make_objects()
    return getattr(cls(**objects), method)(path), objects

  return restore


def _exact_match(tmp_path):
  path = _tf_save(tmp_path, a=_module(v=tf.Variable(1.0)), b=tf.Variable(2))
  return _restoring(
      path, lambda: {
          "a": _module(v=tf.Variable(0.0)),
          "b": tf.Variable(0)
      })


def _extra_variable_in_program(tmp_path):
  path = _tf_save(tmp_path, a=_module(v=tf.Variable(1.0)))
  return _restoring(
      path, lambda: {"a": _module(v=tf.Variable(0.0), w=tf.Variable(5.0))})


def _extra_root_object_in_program(tmp_path):
  path = _tf_save(tmp_path, a=tf.Variable(1.0))
  return _restoring(
      path, lambda: {
          "a": tf.Variable(0.0),
          "b": _module(v=tf.Variable(0.0))
      })


def _extra_empty_objects_in_program(tmp_path):
  path = _tf_save(tmp_path, a=tf.Variable(1.0))

  def objects():
    auto = tf_objckpt.AutoTrackable()
    auto.empty = []
    auto.nothing = {}
    return {"a": tf.Variable(0.0), "empty": auto, "module": tf.Module()}

  return _restoring(path, objects)


def _extra_value_in_checkpoint(tmp_path):
  path = _tf_save(tmp_path, a=tf.Variable(1.0), b=_module(v=tf.Variable(2.0)))
  return _restoring(path, lambda: {"a": tf.Variable(0.0)})


def _extra_nested_value_in_checkpoint(tmp_path):
  path = _tf_save(tmp_path, a=_module(v=tf.Variable(1.0), w=tf.Variable(2.0)))
  return _restoring(path, lambda: {"a": _module(v=tf.Variable(0.0))})


def _attribute_without_saveable(tmp_path):
  """The checkpoint holds a value where the program has a plain object."""
  path = _tf_save(tmp_path, a=tf.Variable(1.0), b=tf.Variable(2.0))
  return _restoring(
      path, lambda: {
          "a": tf.Variable(0.0),
          "b": tf_objckpt.AutoTrackable()
      })


def _variable_where_checkpoint_has_object(tmp_path):
  path = _tf_save(tmp_path, a=tf.Variable(1.0), b=_module(v=tf.Variable(2.0)))
  return _restoring(path, lambda: {
      "a": tf.Variable(0.0),
      "b": tf.Variable(0.0)
  })


def _nothing_matches(tmp_path):
  path = _tf_save(tmp_path, x=tf.Variable(1.0))
  return _restoring(path, lambda: {"y": tf.Variable(0.0)})


def _nothing_in_program(tmp_path):
  path = _tf_save(tmp_path, x=tf.Variable(1.0))
  return _restoring(path, dict)


def _two_dense_layers():
  return tf_keras.Sequential(
      [tf_keras.layers.Dense(3),
       tf_keras.layers.Dense(2)])


def _partially_built_model(tmp_path):
  source = _two_dense_layers()
  source.build((None, 4))
  path = _tf_save(tmp_path, model=source)

  def objects():
    model = _two_dense_layers()
    model.layers[0].build((None, 4))  # The second layer has no weights yet.
    return {"model": model}

  return _restoring(path, objects)


def _unbuilt_keras3_model(tmp_path):
  path = _tf_save(tmp_path, model=tl.make_model("keras3", "subclassed"))
  return _restoring(
      path,
      lambda: {"model": tl.make_model("keras3", "subclassed", built=False)})


def _legacy_optimizer_without_slots(tmp_path):
  """Slot variables wait for an optimizer the program does not have."""
  model, optimizer = tl.trained("tf_keras_legacy", "functional")
  path = _tf_save(tmp_path, model=model, optimizer=optimizer)
  return _restoring(
      path, lambda: {"model": tl.make_model("tf_keras_legacy", "functional")})


def _restore_none(tmp_path):
  del tmp_path
  return _restoring(None, lambda: {"a": tf.Variable(0.0)})


def _restore_none_with_restore(tmp_path):
  del tmp_path
  return _restoring(None, lambda: {"a": tf.Variable(0.0)}, method="restore")


def _saved_with_save_read_with_restore(tmp_path):
  path = tf.train.Checkpoint(a=tf.Variable(1.0)).save(
      str(tmp_path / "saved" / "ckpt"))
  return _restoring(path, lambda: {"a": tf.Variable(0.0)}, method="restore")


def _written_with_write_read_with_restore(tmp_path):
  """`restore` creates a save counter the checkpoint lacks."""
  path = _tf_save(tmp_path, a=tf.Variable(1.0))
  return _restoring(path, lambda: {"a": tf.Variable(0.0)}, method="restore")


def _shared_in_checkpoint_two_in_program(tmp_path):
  """One variable by two paths in the checkpoint, two in the program."""
  shared = tf.Variable(1.0)
  path = _tf_save(tmp_path, a=_module(v=shared), b=_module(v=shared))
  return _restoring(
      path, lambda: {
          "a": _module(v=tf.Variable(0.0)),
          "b": _module(v=tf.Variable(0.0))
      })


SCENARIOS = {
    "exact_match":
        _exact_match,
    "extra_variable_in_program":
        _extra_variable_in_program,
    "extra_root_object_in_program":
        _extra_root_object_in_program,
    "extra_empty_objects_in_program":
        _extra_empty_objects_in_program,
    "extra_value_in_checkpoint":
        _extra_value_in_checkpoint,
    "extra_nested_value_in_checkpoint":
        _extra_nested_value_in_checkpoint,
    "attribute_without_saveable":
        _attribute_without_saveable,
    "variable_where_checkpoint_has_object":
        _variable_where_checkpoint_has_object,
    "nothing_matches":
        _nothing_matches,
    "nothing_in_program":
        _nothing_in_program,
    "partially_built_model":
        _partially_built_model,
    "unbuilt_keras3_model":
        _unbuilt_keras3_model,
    "legacy_optimizer_without_slots":
        _legacy_optimizer_without_slots,
    "restore_none":
        _restore_none,
    "restore_none_with_restore":
        _restore_none_with_restore,
    "saved_with_save_read_with_restore":
        _saved_with_save_read_with_restore,
    "written_with_write_read_with_restore":
        _written_with_write_read_with_restore,
    "shared_in_checkpoint_two_in_program":
        _shared_in_checkpoint_two_in_program,
}

# What TensorFlow does, written down so that a scenario that stopped
# testing anything (say, everything passing for both) is noticed.
_EXPECTED_CONSUMED = {
    "exact_match": "ok",
    "extra_variable_in_program": "AssertionError",
    "extra_value_in_checkpoint": "AssertionError",
    "partially_built_model": "AssertionError",
    "restore_none": "AssertionError",
    "saved_with_save_read_with_restore": "ok",
    "written_with_write_read_with_restore": "AssertionError",
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_assertions_agree_with_tensorflow(tmp_path, scenario):
  restore = SCENARIOS[scenario](tmp_path)
  results = {}
  for impl, lib in tl.IMPLS.items():
    status, objects = restore(lib.Checkpoint)
    results[impl] = _outcomes_by_method(status)
    assert status.expect_partial() is status
    del objects
  assert results["ours"] == results["tf"]
  if scenario in _EXPECTED_CONSUMED:
    assert results["ours"]["assert_consumed"] == _EXPECTED_CONSUMED[scenario]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_status_class_names_agree(tmp_path, scenario):
  restore = SCENARIOS[scenario](tmp_path)
  names = {}
  for impl, lib in tl.IMPLS.items():
    status, _ = restore(lib.Checkpoint)
    status.expect_partial()
    names[impl] = type(status).__name__
  assert names["ours"] == names["tf"]


def test_assertions_later_pass_when_objects_are_created(tmp_path):
  """A status reflects objects created after restore()."""
  path = _tf_save(tmp_path, a=_module(v=tf.Variable(1.0)), b=tf.Variable(2.0))
  traces = {}
  for impl, lib in tl.IMPLS.items():
    a = tf.Module()
    checkpoint = lib.Checkpoint(a=a)
    status = checkpoint.read(path)
    trace = [_outcomes_by_method(status)]
    a.v = tf.Variable(0.0)
    trace.append(_outcomes_by_method(status))
    checkpoint.b = tf.Variable(0.0)
    trace.append(_outcomes_by_method(status))
    traces[impl] = trace
    assert float(checkpoint.b.numpy()) == 2.0
  assert traces["ours"] == traces["tf"]
  assert traces["ours"][-1]["assert_consumed"] == "ok"
  assert traces["ours"][0]["assert_consumed"] == "AssertionError"


def _unrestored_value_warnings(tmp_path, cls, scenario, expect_partial):
  """Messages logged when a restore with unused values is dropped."""
  restore = SCENARIOS[scenario](tmp_path)
  with tl.captured_logs() as messages:
    status, objects = restore(cls)
    if expect_partial:
      status.expect_partial()
    del status, objects
    gc.collect()
  return messages


_WARNING_SCENARIOS = [
    "extra_value_in_checkpoint", "extra_nested_value_in_checkpoint",
    "attribute_without_saveable", "partially_built_model",
    "legacy_optimizer_without_slots", "exact_match", "extra_variable_in_program"
]


def _value_lines(messages):
  return sorted(m for m in messages
                if m.startswith("Value in checkpoint could not be found") or
                m.startswith("An attribute in the restored object"))


@pytest.mark.parametrize("scenario", _WARNING_SCENARIOS)
def test_dropped_status_warns_about_unrestored_values(tmp_path, scenario):
  lines = {}
  for impl, lib in tl.IMPLS.items():
    messages = _unrestored_value_warnings(tmp_path / impl,
                                          lib.Checkpoint,
                                          scenario,
                                          expect_partial=False)
    lines[impl] = _value_lines(messages)
    if lines[impl]:
      header, = [m for m in messages if "expect_partial()" in m]
      # TensorFlow's first sentence, which users search for.
      lines[impl].append(header.split(".", 1)[0])
  assert lines["ours"] == lines["tf"]
  should_warn = scenario not in ("exact_match", "extra_variable_in_program")
  assert bool(lines["ours"]) == should_warn


@pytest.mark.parametrize("scenario", _WARNING_SCENARIOS)
def test_expect_partial_silences_the_warning(tmp_path, scenario):
  for impl, lib in tl.IMPLS.items():
    messages = _unrestored_value_warnings(tmp_path / impl,
                                          lib.Checkpoint,
                                          scenario,
                                          expect_partial=True)
    assert not _value_lines(messages), (impl, messages)
    assert not any("expect_partial()" in m for m in messages), (impl, messages)


def test_warning_names_the_unrestored_paths(tmp_path):
  messages = _unrestored_value_warnings(tmp_path,
                                        tf_objckpt.Checkpoint,
                                        "extra_nested_value_in_checkpoint",
                                        expect_partial=False)
  assert _value_lines(messages) == [
      "Value in checkpoint could not be found in the restored object: "
      "(root).a.w"
  ]


def test_name_based_checkpoint_statuses_agree(tmp_path):
  """A checkpoint without an object graph is restored by variable names."""
  v = tf.Variable(1.0, name="v")
  w = tf.Variable([2, 3], name="w")
  path = tf.compat.v1.train.Saver([v, w]).save(None,
                                               str(tmp_path / "names" / "ckpt"))
  results = {}
  for impl, lib in tl.IMPLS.items():
    fresh_v = tf.Variable(0.0, name="v")
    fresh_w = tf.Variable([0, 0], name="w")
    status = lib.Checkpoint(a=fresh_v, b=fresh_w).restore(path)
    results[impl] = (type(status).__name__, _outcomes_by_method(status),
                     float(fresh_v.numpy()), fresh_w.numpy().tolist())
  assert results["ours"] == results["tf"]
  assert results["ours"][2:] == (1.0, [2, 3])


def test_initialization_only_status_leaves_values_alone(tmp_path):
  del tmp_path
  for lib in tl.IMPLS.values():
    v = tf.Variable(np.arange(3.0))
    status = lib.Checkpoint(v=v).restore(None)
    status.initialize_or_restore()
    np.testing.assert_array_equal(v.numpy(), np.arange(3.0))


def test_inconsistent_references_are_logged_by_both(tmp_path):
  """One checkpointed variable, two program variables, met on creation."""
  shared = tf.Variable(1.0)
  path = _tf_save(tmp_path, a=_module(v=shared), b=_module(v=shared))
  logged = {}
  for impl, lib in tl.IMPLS.items():
    checkpoint = lib.Checkpoint()
    with tl.captured_logs() as messages:
      status = checkpoint.read(path)
      checkpoint.a = tf.Module()  # Waits for its "v".
      checkpoint.b = _module(v=tf.Variable(0.0))  # Gets the value.
      checkpoint.a.v = tf.Variable(0.0)  # Same value, other variable.
      status.expect_partial()
    logged[impl] = [m for m in messages if "Inconsistent references" in m]
    assert float(checkpoint.b.v.numpy()) == 1.0
    assert float(checkpoint.a.v.numpy()) == 0.0
  assert len(logged["ours"]) == len(logged["tf"]) == 1
