"""Readers and `init_from_checkpoint` on damaged files: the damage is named.

The readers are `load_checkpoint`, `list_variables` and `load_variable`.

A truncated or corrupted index fails when the checkpoint is opened; a
missing, truncated or corrupted data file when a value in it is read. Ours
raise `DataLossError` naming the checkpoint, the damaged file and (for a
value) the key, where TensorFlow raises a bare `OpError` or an
`IndexError` that names neither. Values elsewhere still read. Eagerly,
`init_from_checkpoint` reads every value before it assigns any, so a
damaged one leaves every variable as it was (the error is `RestoreV2`'s,
as TensorFlow's, naming the file and the key); TensorFlow has assigned
the values before it by then.

Covers: tf_objckpt.inspection.checkpoint_reader, tf_objckpt.v1.warm_start,
tf_objckpt.engine.reads, tf_objckpt.engine.checkpoint_opening.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
from tf_objckpt.engine import bundle_index

# Sorted by key, as `init_from_checkpoint` assigns them; "b" is damaged.
_VALUES = {
    "a": np.arange(40, dtype=np.float32),
    "b": np.arange(100, 164, dtype=np.float32),
    "c": np.arange(-16, 0, dtype=np.float32)
}
_BROKEN = "b"


def _write(tmp_path):
  return tl.write_with_saver("tf", tmp_path / "ckpt", _VALUES, eager=True)


def _data_file(path):
  return bundle_index.data_file_name(path, 0, 1)


def _truncate(file, keep):
  with open(file, "r+b") as f:
    f.truncate(keep)


def _flip_middle_of(path, key):
  entry = bundle_index.read_bundle_index(path).entries[key]
  with open(_data_file(path), "r+b") as f:
    f.seek(entry.offset + entry.size // 2)
    f.write(b"\xa5\xa5\xa5\xa5")


def _damage_value(path, damage):
  """Damages the value of `_BROKEN` (and, truncated, what follows it)."""
  if damage == "missing":
    os.remove(_data_file(path))
  elif damage == "truncated":
    entry = bundle_index.read_bundle_index(path).entries[_BROKEN]
    _truncate(_data_file(path), entry.offset + entry.size // 2)
  else:
    _flip_middle_of(path, _BROKEN)


def _both(function_name, *args):
  return {
      impl:
          tl.outcome(getattr(tl.IMPLS[impl].checkpoint_utils, function_name),
                     *args) for impl in tl.IMPLS
  }


@pytest.mark.parametrize("damage", ["truncated", "corrupted"])
def test_damaged_index_fails_on_opening_naming_it(tmp_path, damage):
  path = _write(tmp_path)
  index = bundle_index.index_file_name(path)
  if damage == "truncated":
    _truncate(index, os.path.getsize(index) // 2)
  else:
    with open(index, "r+b") as f:
      f.seek(10)
      f.write(b"\xa5")
  for function_name in ("load_checkpoint", "list_variables"):
    outcomes = _both(function_name, path)
    assert isinstance(outcomes["tf"].error, tf.errors.OpError)
    assert isinstance(outcomes["ours"].error, tf.errors.DataLossError)
    assert repr(index) in str(outcomes["ours"].error)


@pytest.mark.parametrize("damage", ["missing", "truncated", "corrupted"])
def test_damaged_value_names_its_file_and_key(tmp_path, damage):
  path = _write(tmp_path)
  _damage_value(path, damage)
  # The index is intact: both list the values.
  tl.agreed(lambda impl: tl.IMPLS[impl].checkpoint_utils.list_variables(path))
  readers = {
      impl: tl.IMPLS[impl].checkpoint_utils.load_checkpoint(path)
      for impl in tl.IMPLS
  }
  for read in (lambda impl: readers[impl].get_tensor(_BROKEN), lambda impl: tl.
               IMPLS[impl].checkpoint_utils.load_variable(path, _BROKEN)):
    outcomes = {impl: tl.outcome(read, impl) for impl in tl.IMPLS}
    # TensorFlow: an IndexError for a short file, else a bare OpError.
    assert isinstance(outcomes["tf"].error, (IndexError, tf.errors.OpError))
    error = outcomes["ours"].error
    assert isinstance(error, tf.errors.DataLossError), error
    assert f"key {_BROKEN!r}" in str(error)
    assert f"checkpoint {path!r}" in str(error)
    assert repr(_data_file(path)) in str(error)
  if damage != "missing":  # The value before it is intact.
    np.testing.assert_array_equal(readers["ours"].get_tensor("a"), _VALUES["a"])


@pytest.mark.parametrize("damage", ["truncated", "corrupted"])
def test_eager_warm_start_assigns_nothing_from_a_damaged_checkpoint(
    tmp_path, damage):
  path = _write(tmp_path)
  _damage_value(path, damage)

  def warm_start(impl):
    variables = {
        name: tf.Variable(tf.zeros_like(value))
        for name, value in _VALUES.items()
    }
    error = tl.outcome(tl.IMPLS[impl].checkpoint_utils.init_from_checkpoint,
                       path, variables).error
    return error, {name: v.numpy() for name, v in variables.items()}

  results = tl.by_impl(warm_start)
  # RestoreV2's error type (OutOfRange for a short file, DataLoss for a bad
  # checksum), ours naming the file and the key.
  tl.assert_same_error_type(
      {
          impl: error for impl, (error, _) in results.items()
      }, tf.errors.OpError)
  error, after = results["ours"]
  assert f"checkpoint key {_BROKEN!r}" in str(error)
  assert repr(_data_file(path)) in str(error)
  for value in after.values():
    assert not value.any()
  # TensorFlow fails at the damaged value, having assigned the one before.
  np.testing.assert_array_equal(results["tf"][1]["a"], _VALUES["a"])


def test_graph_warm_start_fails_when_its_initializers_run(tmp_path):
  path = _write(tmp_path)
  _flip_middle_of(path, _BROKEN)

  def warm_start(program):
    for name, value in _VALUES.items():
      program.variable(name, np.zeros_like(value))
    program.lib.checkpoint_utils.init_from_checkpoint(path, {"/": "/"})
    return type(tl.outcome(program.initialize).error)

  errors = tl.in_graph_programs(warm_start)
  assert issubclass(errors["ours"], tf.errors.OpError)
  assert issubclass(errors["tf"], tf.errors.OpError)
