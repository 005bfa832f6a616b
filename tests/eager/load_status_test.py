"""Load statuses pass and raise in the same situations as TensorFlow's.

Each scenario restores a checkpoint into a program that matches it more or
less; it runs with `tf.train.Checkpoint` and with `tf_objckpt.Checkpoint`,
and every assertion of the returned status must have the same outcome. The
warning about unrestored values, logged when a restore is dropped without
`expect_partial()`, must name the same values.
"""

import gc

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import compat_util as cu
import tf_objckpt

_ASSERTIONS = ("assert_consumed", "assert_existing_objects_matched",
               "assert_nontrivial_match", "run_restore_ops",
               "initialize_or_restore")


def _outcomes(status):
  """`{assertion name: "ok" or exception type name}`."""
  return {name: cu.outcome(getattr(status, name)) for name in _ASSERTIONS}


def _save(tmp_path, **objects):
  return cu.write("tf", tmp_path / "saved" / "ckpt", **objects)


def _module(**attributes):
  module = tf.Module()
  for name, value in attributes.items():
    setattr(module, name, value)
  return module


# Each scenario saves a checkpoint and returns a function that, given a
# Checkpoint class, builds the program's objects and restores into them. It
# returns (status, objects to keep alive).


def _exact_match(tmp_path):
  path = _save(tmp_path, a=_module(v=tf.Variable(1.0)), b=tf.Variable(2))

  def restore(cls):
    objects = {"a": _module(v=tf.Variable(0.0)), "b": tf.Variable(0)}
    return cls(**objects).read(path), objects
  return restore


def _extra_variable_in_program(tmp_path):
  path = _save(tmp_path, a=_module(v=tf.Variable(1.0)))

  def restore(cls):
    objects = {"a": _module(v=tf.Variable(0.0), w=tf.Variable(5.0))}
    return cls(**objects).read(path), objects
  return restore


def _extra_root_object_in_program(tmp_path):
  path = _save(tmp_path, a=tf.Variable(1.0))

  def restore(cls):
    objects = {"a": tf.Variable(0.0), "b": _module(v=tf.Variable(0.0))}
    return cls(**objects).read(path), objects
  return restore


def _extra_empty_objects_in_program(tmp_path):
  path = _save(tmp_path, a=tf.Variable(1.0))

  def restore(cls):
    auto = tf_objckpt.AutoTrackable()
    auto.empty = []
    auto.nothing = {}
    objects = {"a": tf.Variable(0.0), "empty": auto, "module": tf.Module()}
    return cls(**objects).read(path), objects
  return restore


def _extra_value_in_checkpoint(tmp_path):
  path = _save(tmp_path, a=tf.Variable(1.0), b=_module(v=tf.Variable(2.0)))

  def restore(cls):
    objects = {"a": tf.Variable(0.0)}
    return cls(**objects).read(path), objects
  return restore


def _extra_nested_value_in_checkpoint(tmp_path):
  path = _save(tmp_path, a=_module(v=tf.Variable(1.0), w=tf.Variable(2.0)))

  def restore(cls):
    objects = {"a": _module(v=tf.Variable(0.0))}
    return cls(**objects).read(path), objects
  return restore


def _attribute_without_saveable(tmp_path):
  """The checkpoint holds a value where the program has a plain object."""
  path = _save(tmp_path, a=tf.Variable(1.0), b=tf.Variable(2.0))

  def restore(cls):
    objects = {"a": tf.Variable(0.0), "b": tf_objckpt.AutoTrackable()}
    return cls(**objects).read(path), objects
  return restore


def _variable_where_checkpoint_has_object(tmp_path):
  path = _save(tmp_path, a=tf.Variable(1.0), b=_module(v=tf.Variable(2.0)))

  def restore(cls):
    objects = {"a": tf.Variable(0.0), "b": tf.Variable(0.0)}
    return cls(**objects).read(path), objects
  return restore


def _nothing_matches(tmp_path):
  path = _save(tmp_path, x=tf.Variable(1.0))

  def restore(cls):
    objects = {"y": tf.Variable(0.0)}
    return cls(**objects).read(path), objects
  return restore


def _nothing_in_program(tmp_path):
  path = _save(tmp_path, x=tf.Variable(1.0))

  def restore(cls):
    return cls().read(path), {}
  return restore


def _partially_built_model(tmp_path):
  source = tf_keras.Sequential([tf_keras.layers.Dense(3),
                                tf_keras.layers.Dense(2)])
  source.build((None, 4))
  path = _save(tmp_path, model=source)

  def restore(cls):
    model = tf_keras.Sequential([tf_keras.layers.Dense(3),
                                 tf_keras.layers.Dense(2)])
    model.layers[0].build((None, 4))  # The second layer has no weights yet.
    return cls(model=model).read(path), {"model": model}
  return restore


def _unbuilt_model(tmp_path):
  source = cu.make_model("keras3", "subclassed")
  path = _save(tmp_path, model=source)

  def restore(cls):
    model = cu.make_model("keras3", "subclassed", built=False)
    return cls(model=model).read(path), {"model": model}
  return restore


def _legacy_optimizer_without_slots(tmp_path):
  """Slot variables wait for an optimizer the program does not have."""
  model, optimizer = cu.trained("tf_keras_legacy", "functional")
  path = _save(tmp_path, model=model, optimizer=optimizer)

  def restore(cls):
    fresh = cu.make_model("tf_keras_legacy", "functional")
    return cls(model=fresh).read(path), {"model": fresh}
  return restore


def _restore_none(tmp_path):
  del tmp_path

  def restore(cls):
    objects = {"a": tf.Variable(0.0)}
    return cls(**objects).read(None), objects
  return restore


def _restore_none_with_restore(tmp_path):
  del tmp_path

  def restore(cls):
    objects = {"a": tf.Variable(0.0)}
    return cls(**objects).restore(None), objects
  return restore


def _saved_with_save_read_with_restore(tmp_path):
  source = {"a": tf.Variable(1.0)}
  path = tf.train.Checkpoint(**source).save(
      str(tmp_path / "saved" / "ckpt"))

  def restore(cls):
    objects = {"a": tf.Variable(0.0)}
    return cls(**objects).restore(path), objects
  return restore


def _written_with_write_read_with_restore(tmp_path):
  """`restore` creates a save counter the checkpoint lacks."""
  path = _save(tmp_path, a=tf.Variable(1.0))

  def restore(cls):
    objects = {"a": tf.Variable(0.0)}
    return cls(**objects).restore(path), objects
  return restore


def _shared_in_checkpoint_two_in_program(tmp_path):
  """One variable by two paths in the checkpoint, two in the program."""
  shared = tf.Variable(1.0)
  path = _save(tmp_path, a=_module(v=shared), b=_module(v=shared))

  def restore(cls):
    objects = {"a": _module(v=tf.Variable(0.0)),
               "b": _module(v=tf.Variable(0.0))}
    return cls(**objects).read(path), objects
  return restore


SCENARIOS = {
    "exact_match": _exact_match,
    "extra_variable_in_program": _extra_variable_in_program,
    "extra_root_object_in_program": _extra_root_object_in_program,
    "extra_empty_objects_in_program": _extra_empty_objects_in_program,
    "extra_value_in_checkpoint": _extra_value_in_checkpoint,
    "extra_nested_value_in_checkpoint": _extra_nested_value_in_checkpoint,
    "attribute_without_saveable": _attribute_without_saveable,
    "variable_where_checkpoint_has_object":
        _variable_where_checkpoint_has_object,
    "nothing_matches": _nothing_matches,
    "nothing_in_program": _nothing_in_program,
    "partially_built_model": _partially_built_model,
    "unbuilt_model": _unbuilt_model,
    "legacy_optimizer_without_slots": _legacy_optimizer_without_slots,
    "restore_none": _restore_none,
    "restore_none_with_restore": _restore_none_with_restore,
    "saved_with_save_read_with_restore": _saved_with_save_read_with_restore,
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
  for impl, cls in cu.CHECKPOINT_CLASSES.items():
    status, objects = restore(cls)
    results[impl] = _outcomes(status)
    assert status.expect_partial() is status
    del objects
  assert results["ours"] == results["tf"]
  if scenario in _EXPECTED_CONSUMED:
    assert results["ours"]["assert_consumed"] == _EXPECTED_CONSUMED[scenario]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_status_class_names_agree(tmp_path, scenario):
  restore = SCENARIOS[scenario](tmp_path)
  names = {}
  for impl, cls in cu.CHECKPOINT_CLASSES.items():
    status, _ = restore(cls)
    status.expect_partial()
    names[impl] = type(status).__name__
  assert names["ours"] == names["tf"]


def test_assertions_later_pass_when_objects_are_created(tmp_path):
  """A status reflects objects created after restore()."""
  path = _save(tmp_path, a=_module(v=tf.Variable(1.0)), b=tf.Variable(2.0))
  traces = {}
  for impl, cls in cu.CHECKPOINT_CLASSES.items():
    a = tf.Module()
    checkpoint = cls(a=a)
    status = checkpoint.read(path)
    trace = [_outcomes(status)]
    a.v = tf.Variable(0.0)
    trace.append(_outcomes(status))
    checkpoint.b = tf.Variable(0.0)
    trace.append(_outcomes(status))
    traces[impl] = trace
    assert float(checkpoint.b.numpy()) == 2.0
  assert traces["ours"] == traces["tf"]
  assert traces["ours"][-1]["assert_consumed"] == "ok"
  assert traces["ours"][0]["assert_consumed"] == "AssertionError"


def _unrestored_value_warnings(tmp_path, cls, scenario, expect_partial):
  """Messages logged when a restore with unused values is dropped."""
  restore = SCENARIOS[scenario](tmp_path)
  with cu.captured_logs() as messages:
    status, objects = restore(cls)
    if expect_partial:
      status.expect_partial()
    del status, objects
    gc.collect()
  return messages


_WARNING_SCENARIOS = ["extra_value_in_checkpoint",
                      "extra_nested_value_in_checkpoint",
                      "attribute_without_saveable",
                      "partially_built_model",
                      "legacy_optimizer_without_slots",
                      "exact_match", "extra_variable_in_program"]


def _value_lines(messages):
  return sorted(m for m in messages
                if m.startswith("Value in checkpoint could not be found") or
                m.startswith("An attribute in the restored object"))


@pytest.mark.parametrize("scenario", _WARNING_SCENARIOS)
def test_dropped_status_warns_about_unrestored_values(tmp_path, scenario):
  lines = {}
  for impl, cls in cu.CHECKPOINT_CLASSES.items():
    messages = _unrestored_value_warnings(tmp_path / impl, cls, scenario,
                                          expect_partial=False)
    lines[impl] = _value_lines(messages)
    if lines[impl]:
      assert any("expect_partial" in m for m in messages), messages
  assert lines["ours"] == lines["tf"]
  should_warn = scenario not in ("exact_match", "extra_variable_in_program")
  assert bool(lines["ours"]) == should_warn


@pytest.mark.parametrize("scenario", _WARNING_SCENARIOS)
def test_expect_partial_silences_the_warning(tmp_path, scenario):
  for impl, cls in cu.CHECKPOINT_CLASSES.items():
    messages = _unrestored_value_warnings(tmp_path / impl, cls, scenario,
                                          expect_partial=True)
    assert not _value_lines(messages), (impl, messages)
    assert not any("expect_partial" in m for m in messages), (impl, messages)


def test_warning_names_the_unrestored_paths(tmp_path):
  messages = _unrestored_value_warnings(
      tmp_path, tf_objckpt.Checkpoint, "extra_nested_value_in_checkpoint",
      expect_partial=False)
  assert _value_lines(messages) == [
      "Value in checkpoint could not be found in the restored object: "
      "(root).a.w"]


def test_name_based_checkpoint_statuses_agree(tmp_path):
  """A checkpoint without an object graph is restored by variable names."""
  v = tf.Variable(1.0, name="v")
  w = tf.Variable([2, 3], name="w")
  path = tf.compat.v1.train.Saver([v, w]).save(
      None, str(tmp_path / "names" / "ckpt"))
  results = {}
  for impl, cls in cu.CHECKPOINT_CLASSES.items():
    fresh_v = tf.Variable(0.0, name="v")
    fresh_w = tf.Variable([0, 0], name="w")
    status = cls(a=fresh_v, b=fresh_w).restore(path)
    results[impl] = (type(status).__name__, _outcomes(status),
                     float(fresh_v.numpy()), fresh_w.numpy().tolist())
  assert results["ours"] == results["tf"]
  assert results["ours"][2:] == (1.0, [2, 3])


def test_initialization_only_status_leaves_values_alone(tmp_path):
  del tmp_path
  for cls in cu.CHECKPOINT_CLASSES.values():
    v = tf.Variable(np.arange(3.0))
    status = cls(v=v).restore(None)
    status.initialize_or_restore()
    np.testing.assert_array_equal(v.numpy(), np.arange(3.0))


def test_inconsistent_references_are_logged_by_both(tmp_path):
  """One checkpointed variable, two program variables, met on creation."""
  shared = tf.Variable(1.0)
  path = _save(tmp_path, a=_module(v=shared), b=_module(v=shared))
  logged = {}
  for impl, cls in cu.CHECKPOINT_CLASSES.items():
    checkpoint = cls()
    with cu.captured_logs() as messages:
      status = checkpoint.read(path)
      checkpoint.a = tf.Module()  # Waits for its "v".
      checkpoint.b = _module(v=tf.Variable(0.0))  # Gets the value.
      checkpoint.a.v = tf.Variable(0.0)  # Same value, other variable.
      status.expect_partial()
    logged[impl] = [m for m in messages if "Inconsistent references" in m]
    assert float(checkpoint.b.v.numpy()) == 1.0
    assert float(checkpoint.a.v.numpy()) == 0.0
  assert len(logged["ours"]) == len(logged["tf"]) == 1
