"""A truncated or missing data file is told in the same words everywhere.

`verify`'s words, "data file is truncated: N bytes, the index places
values up to byte M" (or "data file is missing"), with the file's name,
are what a named restore (eager and graph-mode `Checkpoint`, the v1
`Saver`), the readers (`load_variable`, `load_checkpoint`), `inspect`,
`verify`, `checkpoints_iterator` and `restore_or_initialize()` say,
keeping TensorFlow's own words (which its error for the same read holds)
after them. `inspect` of a damaged checkpoint shows what its index holds,
marking the values it cannot give, and exits 1. A `restore_or_initialize()`
that skipped a damaged checkpoint and restored an older one warns of no
unrestored values when it is collected.

Covers: tf_objckpt.engine.bundle_index, tf_objckpt.engine.reads,
tf_objckpt.inspection.verify_checkpoint, tf_objckpt.tools.inspect_checkpoint,
tf_objckpt.inspection.checkpoint_reader, tf_objckpt.api.checkpoint_polling,
tf_objckpt.api.self_healing, tf_objckpt.api.trackable_saver.
"""

import gc
import logging
import os
import re

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt
from tf_objckpt.engine import bundle_index

_VALUE_KEY = "v/.ATTRIBUTES/VARIABLE_VALUE"


def _variable(value=0.0):
  return tf.Variable(np.full([64, 64], value, np.float32))


@pytest.fixture(name="saved")
def _saved(tmp_path):
  """Three checkpoints of a manager; returns the directory."""
  directory = str(tmp_path / "saved")
  variable = _variable()
  manager = tf_objckpt.CheckpointManager(tf_objckpt.Checkpoint(v=variable),
                                         directory,
                                         max_to_keep=3)
  for _ in range(3):
    variable.assign_add(tf.ones([64, 64]))
    manager.save()
  return directory


def _damage(prefix, how):
  """Truncates or removes the data file; returns `verify`'s words for it."""
  data_file = bundle_index.data_file_name(prefix, 0, 1)
  needed = os.path.getsize(data_file)
  if how == "missing":
    os.remove(data_file)
    return f"{data_file}: data file is missing"
  os.truncate(data_file, needed // 2)
  return (f"{data_file}: data file is truncated: {needed // 2} bytes, the "
          f"index places values up to byte {needed}")


def _said_in_the_words(message, words):
  """Whether `message` tells the damage in `words`, the file quoted or not."""
  path, description = words.split(": ", 1)
  return f"{path!r}: {description}" in message or words in message


def _restore_errors(prefix):
  """What each way of restoring or reading `prefix` raises, by name."""
  errors = {
      "eager restore":
          tl.outcome(
              lambda: tf_objckpt.Checkpoint(v=_variable()).restore(prefix)),
      "load_variable":
          tl.outcome(tf_objckpt.checkpoint_utils.load_variable, prefix,
                     _VALUE_KEY),
  }
  with tl.GraphProgram("ours") as program:
    variable = program.variable("v", np.zeros([64, 64], np.float32))
    errors["graph restore"] = tl.outcome(lambda: program.lib.CheckpointV1(
        v=variable).restore(prefix).run_restore_ops(program.session))
    saver = program.lib.Saver({_VALUE_KEY: variable})
    errors["v1 Saver"] = tl.outcome(saver.restore, program.session, prefix)
  return {way: outcome.error for way, outcome in errors.items()}


@pytest.mark.parametrize("how", ["truncated", "missing"])
def test_restores_and_readers_say_what_verify_says(saved, how):
  prefix = os.path.join(saved, "ckpt-3")
  words = _damage(prefix, how)
  verified = tl.run_cli("verify", prefix)
  assert verified.returncode == 1
  assert f"error: {words}" in verified.stdout
  for way, error in _restore_errors(prefix).items():
    assert isinstance(error, tf.errors.DataLossError), (way, error)
    assert _said_in_the_words(str(error), words), (way, str(error))


def test_tensorflows_words_follow_ours(saved):
  prefix = os.path.join(saved, "ckpt-3")
  _damage(prefix, "truncated")
  theirs = tl.outcome(tf.train.Checkpoint(v=_variable()).restore, prefix)
  phrase = "Read less bytes than requested"
  assert phrase in str(theirs.error)
  for way, error in _restore_errors(prefix).items():
    assert phrase in str(error), way


def test_inspect_shows_the_index_and_marks_what_cannot_be_read(saved):
  prefix = os.path.join(saved, "ckpt-3")
  words = _damage(prefix, "truncated")
  result = tl.run_cli("inspect", prefix)
  assert result.returncode == 1
  lines = result.stdout.splitlines()
  assert lines[0] == (f"Checkpoint {prefix} (object-based; its object graph "
                      "cannot be read, see below: its values by key)")
  assert "    VARIABLE_VALUE: float32 (64, 64) 16.0 KiB (cannot be read)" in (
      lines)
  assert lines[-1] == (f"error: {words}; 3 values beyond its end cannot be "
                       "read")
  listed = tl.run_cli("inspect", prefix, "--json")
  assert listed.returncode == 1
  assert _VALUE_KEY in listed.stdout and "data file is truncated" in (
      listed.stdout)


def test_inspect_marks_only_the_values_a_short_data_file_loses(tmp_path):
  """A v1 `Saver` writing a data file per device; one of them truncated."""
  config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
  prefix = str(tmp_path / "names")
  with tl.GraphProgram("tf", config=config) as program:
    with tf.device("/cpu:0"):
      program.variable("first", np.ones([256], np.float32))
    with tf.device("/cpu:1"):
      program.variable("second", np.ones([256], np.float32))
    program.initialize()
    tf.compat.v1.train.Saver(sharded=True).save(program.session, prefix)
  data_file = bundle_index.data_file_name(prefix, 1, 2)
  holds = bundle_index.read_bundle_index(prefix).data_file_of
  assert holds("second") == data_file
  os.truncate(data_file, 100)
  result = tl.run_cli("inspect", prefix)
  assert result.returncode == 1
  assert "first: float32 (256,) 1.0 KiB\n" in result.stdout
  assert "second: float32 (256,) 1.0 KiB (cannot be read)\n" in result.stdout
  assert f"error: {data_file}: data file is truncated: 100 bytes" in (
      result.stdout)


def test_iterator_and_restore_or_initialize_warn_in_verifys_words(saved):
  prefix = os.path.join(saved, "ckpt-3")
  words = _damage(prefix, "truncated")
  with tl.captured_logs(logging.WARNING) as messages:
    assert list(
        tf_objckpt.checkpoint_utils.checkpoints_iterator(saved,
                                                         timeout=0)) == []
    manager = tf_objckpt.CheckpointManager(tf_objckpt.Checkpoint(v=_variable()),
                                           saved,
                                           max_to_keep=3)
    assert manager.restore_or_initialize().endswith("ckpt-2")
  warnings = [message for message in messages if words in message]
  assert len(warnings) == 2, messages
  assert all(
      warning.startswith(f"Skipped damaged checkpoint {prefix}: ")
      for warning in warnings)


@pytest.mark.parametrize("how", ["flipped", "truncated"])
def test_no_warning_of_unrestored_values_after_a_fallback(saved, how):
  prefix = os.path.join(saved, "ckpt-3")
  tl.damage(prefix, how, key=_VALUE_KEY)
  variable = _variable()
  gc.collect()  # Objects of earlier tests warn of their own values.
  with tl.captured_logs(logging.WARNING) as messages:
    manager = tf_objckpt.CheckpointManager(tf_objckpt.Checkpoint(v=variable),
                                           saved,
                                           max_to_keep=3)
    assert manager.restore_or_initialize().endswith("ckpt-2")
    del manager
    gc.collect()
  assert variable.numpy()[0, 0] == 2.0
  # Only this checkpoint's values count: an earlier test's garbage may be
  # collected meanwhile, and warn of its own.
  assert not [
      message for message in messages
      if re.search(r"\(root\)\.(v|save_counter)(?![.\w])", message)
  ], messages
  assert [message for message in messages if "Skipped damaged" in message]
