"""How damage is reported: once per cause, with the keys it costs.

The real command runs on real damaged files. A truncated data file is one
problem followed by the keys it loses (those TensorFlow's reader cannot
read), in `verify`, in `diff` (which still compares every other value) and,
in one short line, in `restore_or_initialize()`'s warning. `verify DIR
--all` lists each checkpoint once, whether the state file holds absolute
paths (the v1 `Saver`'s) and DIR is relative or not. A file that is not a
checkpoint is not reported as a damaged index that does not exist.

Covers: tf_objckpt.inspection.verify_checkpoint,
tf_objckpt.inspection.checkpoint_listing, tf_objckpt.tools.cli,
tf_objckpt.tools.diff_checkpoints, tf_objckpt.api.self_healing.
"""

import logging
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt
from tf_objckpt.engine import bundle_index

_DATA = ".data-00000-of-00001"
_VARIABLES = 20


def _key(index):
  return f"model/{index}/.ATTRIBUTES/VARIABLE_VALUE"


def _model(value=0.0):
  return [
      tf.Variable(np.full([16], value + index, np.float32))
      for index in range(_VARIABLES)
  ]


@pytest.fixture(name="saved")
def _saved(tmp_path):
  """ckpt-1 and ckpt-2 of a manager; ckpt-2's values are 1 higher."""
  directory = str(tmp_path / "saved")
  model = _model()
  manager = tf_objckpt.CheckpointManager(tf_objckpt.Checkpoint(model=model),
                                         directory,
                                         max_to_keep=2)
  manager.save()
  for variable in model:
    variable.assign_add(tf.ones([16]))
  manager.save()
  return directory


def _truncate(prefix):
  """Cuts the data file inside its middle value; returns its new size."""
  offsets = sorted(
      entry.offset
      for entry in bundle_index.read_bundle_index(prefix).entries.values())
  size = offsets[len(offsets) // 2] + 3
  os.truncate(prefix + _DATA, size)
  return size


def _keys_tensorflow_cannot_read(prefix):
  reader = tf.train.load_checkpoint(prefix)
  unreadable = []
  for key in reader.get_variable_to_shape_map():
    try:
      reader.get_tensor(key)
    except Exception:  # pylint: disable=broad-except
      unreadable.append(key)
  return sorted(unreadable)


def test_verify_names_a_truncation_once_then_the_keys_it_loses(saved):
  prefix = os.path.join(saved, "ckpt-2")
  full = os.path.getsize(prefix + _DATA)
  size = _truncate(prefix)
  lost = _keys_tensorflow_cannot_read(prefix)
  assert 1 < len(lost) < _VARIABLES
  result = tl.run_cli("verify", prefix)
  assert result.returncode == 1
  *lines, summary = result.stdout.splitlines()
  assert lines == [
      f"error: {prefix + _DATA}: data file is truncated: {size} bytes, the "
      f"index places values up to byte {full}; {len(lost)} values beyond "
      "its end cannot be read", *(f"  {key}" for key in lost)
  ]
  assert summary.endswith(f"; {len(lost)} problems found")


def test_restore_or_initialize_warns_in_one_short_line(saved):
  prefix = os.path.join(saved, "ckpt-2")
  full = os.path.getsize(prefix + _DATA)
  size = _truncate(prefix)
  manager = tf_objckpt.CheckpointManager(tf_objckpt.Checkpoint(model=_model()),
                                         saved,
                                         max_to_keep=2)
  with tl.captured_logs(logging.WARNING) as messages:
    assert manager.restore_or_initialize() == os.path.join(saved, "ckpt-1")
  lost = len(_keys_tensorflow_cannot_read(prefix))
  assert messages == [
      f"Skipped damaged checkpoint {prefix}: error: {prefix + _DATA}: data "
      f"file is truncated: {size} bytes, the index places values up to byte "
      f"{full}; {lost} values beyond its end cannot be read"
  ]


def _flip_value(prefix, key):
  entry = bundle_index.read_bundle_index(prefix).entries[key]
  with open(prefix + _DATA, "r+b") as f:
    f.seek(entry.offset + entry.size // 2)
    f.write(b"\xa5\xa5\xa5\xa5")


def test_diff_names_damaged_keys_and_compares_the_rest(saved, tmp_path):
  first, second = (os.path.join(saved, f"ckpt-{n}") for n in (1, 2))
  damaged = str(tmp_path / "damaged")
  for name in os.listdir(saved):
    if name.startswith("ckpt-2."):
      shutil.copy(os.path.join(saved, name), tmp_path / f"damaged.{name[7:]}")
  _flip_value(damaged, _key(3))
  assert _keys_tensorflow_cannot_read(damaged) == [_key(3)]
  result = tl.run_cli("diff", first, damaged)
  assert result.returncode == 1, result.stderr
  lines = result.stdout.splitlines()
  assert lines[:4] == [
      f"A: {first}", f"B: {damaged}", "Damaged, not compared (1 value):",
      f"  B: {damaged + _DATA}: {_key(3)}: cannot be read: DataLossError: " +
      lines[3].split("DataLossError: ", 1)[-1]
  ]
  assert "Checksum does not match" in lines[3]
  changed = [line for line in lines if line.startswith("  ~ model/")]
  assert changed == [
      f"  ~ {_key(index)}: max abs diff 1"
      for index in sorted(set(range(_VARIABLES)) - {3}, key=str)
  ]
  assert result.stderr == ""


def test_diff_lists_a_truncated_files_keys_under_it(saved):
  first, second = (os.path.join(saved, f"ckpt-{n}") for n in (1, 2))
  _truncate(second)
  lost = _keys_tensorflow_cannot_read(second)
  result = tl.run_cli("diff", first, second)
  assert result.returncode == 1, result.stderr
  lines = result.stdout.splitlines()
  assert lines[2] == f"Damaged, not compared ({len(lost)} values):"
  assert lines[3].startswith(f"  B: {second + _DATA}: data file is truncated")
  assert lines[4:4 + len(lost)] == [f"    {key}" for key in lost]
  compared = [key for key in map(_key, range(_VARIABLES)) if key not in lost]
  assert compared
  assert sorted(
      line.split(":")[0][4:]
      for line in lines
      if line.startswith("  ~ model/")) == sorted(compared)


def _save_with_saver(impl, directory):
  """Three saves of a v1 `Saver`, whose state file holds absolute paths."""
  os.makedirs(directory)
  with tf.Graph().as_default():
    tf.compat.v1.get_variable("v", initializer=[1.0, 2.0])
    saver = tl.IMPLS[impl].Saver(max_to_keep=3)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      for step in (1, 2, 3):
        saver.save(session, os.path.join(directory, "model"), global_step=step)


@pytest.mark.parametrize("impl", ["tf", "ours"])
def test_verify_all_lists_each_checkpoint_once(tmp_path, impl):
  _save_with_saver(impl, str(tmp_path / "saves"))
  with open(tmp_path / "saves" / "checkpoint") as f:
    assert f'model_checkpoint_path: "{tmp_path}' in f.read()
  expected = [
      f"{tmp_path / 'saves' / f'model-{step}'}: intact" for step in (3, 2, 1)
  ]
  for directory in ("saves", str(tmp_path / "saves"), "./saves/"):
    result = tl.run_cli("verify", directory, "--all", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == expected


def test_a_file_that_is_no_checkpoint_is_not_a_damaged_index(tmp_path):
  notes = tmp_path / "notes.txt"
  notes.write_text("learning rate 0.1 worked best\n")
  result = tl.run_cli("inspect", "notes.txt", cwd=tmp_path)
  assert result.returncode == 1
  assert result.stderr == (
      "tf-objckpt inspect: DataLossError: Cannot read a checkpoint at "
      "'notes.txt': there is no index file 'notes.txt.index' (a V2 "
      "checkpoint's), and 'notes.txt' itself is not a readable V1 checkpoint "
      "(it is damaged, or not a checkpoint at all): " +
      result.stderr.split("at all): ", 1)[-1])
  errors = tl.errors_by_impl(
      lambda checkpoint: checkpoint().restore(str(notes)))
  tl.assert_same_error_type(errors, tf.errors.DataLossError)
  assert "there is no index file" in str(errors["ours"])
