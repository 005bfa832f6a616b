"""Messages a person can act on: assertion texts, restore reports, logging.

Where TensorFlow has the same situation, both libraries raise the same
error types; ours say more: object paths with shapes and dtypes, one per
line, and, for a directory given as a prefix, its latest checkpoint.

Covers: tf_objckpt.restoring.restore_report, tf_objckpt.api.load_status,
tf_objckpt.engine.transfer_log, tf_objckpt.engine.state_file.
"""

import logging as py_logging
import os
import re

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt
from tf_objckpt.restoring import restore_report


def _tree(impl, with_bias=True, with_extra=True, other=False):
  root = tl.IMPLS[impl].AutoTrackable()
  root.inner = tl.IMPLS[impl].AutoTrackable()
  root.inner.kernel = tf.Variable(np.ones((3, 4), np.float32))
  if with_bias:
    root.inner.bias = tf.Variable([1.0])
  if with_extra:
    root.extra = tf.Variable(3)
  if other:
    root.other = tf.Variable([5.0, 6.0])
  return root


@pytest.fixture(name="written")
def _written(tmp_path):
  return tf_objckpt.Checkpoint(model=_tree("ours")).write(str(tmp_path /
                                                              "ckpt"))


def _restore_both(path, **tree_args):
  """`{impl: status}` of reading `path` into the same partial program."""
  return {
      impl: tl.IMPLS[impl].Checkpoint(model=_tree(impl, **tree_args)).read(path)
      for impl in ("tf", "ours")
  }


def test_report_says_what_was_restored_and_what_was_not(written):
  status = tf_objckpt.Checkpoint(model=_tree(
      "ours", with_bias=False, with_extra=False, other=True)).read(written)
  report = status.report()
  assert [str(value) for value in report.restored
         ] == ["model/inner/kernel (3, 4) float32"]
  assert [value.key for value in report.unmatched] == [
      "model/extra/.ATTRIBUTES/VARIABLE_VALUE",
      "model/inner/bias/.ATTRIBUTES/VARIABLE_VALUE"
  ]
  assert report.objects_without_values == ("model/other (2,) float32",)
  assert not report.complete
  assert str(report) == (
      f"Restore from {written!r}: 1 value restored, 2 checkpoint values "
      "unmatched, 1 object without a value.\n"
      "Restored:\n  model/inner/kernel (3, 4) float32\n"
      "In the checkpoint, not restored:\n  model/extra () int32\n"
      "  model/inner/bias (1,) float32\n"
      "Objects without a value:\n  model/other (2,) float32")
  status.expect_partial()

  complete = tf_objckpt.Checkpoint(model=_tree("ours")).read(written).report()
  assert complete.complete and len(complete.restored) == 3
  assert set(
      tf_objckpt.Checkpoint(model=_tree("ours")).restore(
          None).report().objects_without_values) == {
              "model/inner/kernel (3, 4) float32",
              "model/inner/bias (1,) float32", "model/extra () int32",
              "save_counter () int64"
          }


def test_unrestored_values_are_listed_by_object_path(written):
  statuses = _restore_both(written, with_bias=False, with_extra=False)
  outcomes = {
      impl: tl.outcome(status.assert_consumed)
      for impl, status in statuses.items()
  }
  assert outcomes["tf"].name == outcomes["ours"].name == "AssertionError"
  assert str(outcomes["ours"].error) == (
      f"Unresolved object in checkpoint (root).model.extra: 2 values "
      f"in checkpoint {written!r} were not restored (no object of the "
      "program matched them):\n  model/extra () int32\n"
      "  model/inner/bias (1,) float32")
  for status in statuses.values():
    status.assert_existing_objects_matched().expect_partial()
  one = _restore_both(written, with_extra=False)["ours"]
  assert str(tl.outcome(one.assert_consumed).error).startswith(
      "Unresolved object in checkpoint (root).model.extra: 1 value in "
      f"checkpoint {written!r} was not restored (no object of the program "
      "matched them):")
  one.expect_partial()


def test_unmatched_objects_are_listed_by_object_path(written):
  statuses = _restore_both(written, other=True)
  outcomes = {
      impl: tl.outcome(status.assert_existing_objects_matched)
      for impl, status in statuses.items()
  }
  assert outcomes["tf"].name == outcomes["ours"].name == "AssertionError"
  message = str(outcomes["ours"].error)
  assert message.startswith("Found 1 Python objects that were not bound to "
                            "checkpointed values")
  assert message.endswith(":\n  model/other (2,) float32")
  assert "numpy=" not in message


def test_only_root_matched_lists_the_objects_without_values(written):
  errors = {}
  for impl in ("tf", "ours"):
    status = tl.IMPLS[impl].Checkpoint(
        unrelated=tf.Variable([1.0, 2.0])).read(written)
    errors[impl] = tl.outcome(status.assert_nontrivial_match).error
    status.expect_partial()
  assert type(errors["tf"]) is type(errors["ours"]) is AssertionError
  assert str(errors["ours"]).endswith(
      "Objects without a checkpointed value:\n  unrelated (2,) float32")


def test_long_lists_are_cut_with_a_count(tmp_path):
  variables = {f"v{index:02d}": tf.Variable(float(index)) for index in range(30)}
  path = tf_objckpt.Checkpoint(**variables).write(str(tmp_path / "many"))
  statuses = {
      impl: tl.IMPLS[impl].Checkpoint().read(path) for impl in ("tf", "ours")
  }
  outcomes = {
      impl: tl.outcome(status.assert_consumed)
      for impl, status in statuses.items()
  }
  assert outcomes["tf"].name == outcomes["ours"].name == "AssertionError"
  lines = str(outcomes["ours"].error).split("\n")
  assert lines[0] == (
      f"Unresolved object in checkpoint (root).v00: 30 values in checkpoint "
      f"{path!r} were not restored (no object of the program matched them):")
  assert lines[1:3] == ["  v00 () float32", "  v01 () float32"]
  assert len(lines) == 1 + restore_report.MAX_LINES + 1
  assert lines[-1] == "  ... and 10 more"
  for status in statuses.values():
    status.expect_partial()


def test_name_based_messages_keep_tensorflows_phrase(tmp_path):
  with tl.GraphProgram("tf") as program:
    tf.compat.v1.get_variable("dense/kernel", initializer=[[1.0, 2.0]])
    program.session.run(tf.compat.v1.global_variables_initializer())
    path = tf.compat.v1.train.Saver().save(program.session,
                                           str(tmp_path / "names"))
  messages = {}
  for impl in ("tf", "ours"):
    module = tf.Module()
    module.kernel = tf.Variable([[0.0, 0.0]], name="dense/kernel")
    module.bias = tf.Variable([0.0], name="dense/bias")
    status = tl.IMPLS[impl].Checkpoint(model=module).restore(path)
    outcome = tl.outcome(status.assert_consumed)
    assert outcome.name == "AssertionError"
    messages[impl] = str(outcome.error)
  assert (messages["tf"].split(":")[0] == messages["ours"].split(":")[0] ==
          "Some objects had attributes which were not restored")
  assert messages["ours"].endswith(
      f"1 object found no value in checkpoint {path!r} for these names:\n"
      "  model/bias (1,) float32: dense/bias")
  report = status.report()
  assert [str(value) for value in report.restored
         ] == ["model/kernel (1, 2) float32 <- 'dense/kernel'"]
  assert report.objects_without_values == ("model/bias (1,) float32",)


@pytest.mark.parametrize("with_checkpoint", [True, False],
                         ids=["latest", "empty"])
def test_directory_given_as_a_prefix(tmp_path, with_checkpoint):
  directory = str(tmp_path)
  latest = None
  if with_checkpoint:
    latest = tf_objckpt.Checkpoint(v=tf.Variable(1.0)).save(
        os.path.join(directory, "ckpt"))
  errors = {}
  for impl in ("tf", "ours"):
    checkpoint = tl.IMPLS[impl].Checkpoint(v=tf.Variable(0.0))
    errors[impl, "restore"] = tl.outcome(checkpoint.restore, directory).error
    errors[impl, "read"] = tl.outcome(checkpoint.read, directory).error
    with tl.GraphProgram(impl) as program:
      variable = tf.compat.v1.get_variable("v", initializer=0.0)
      saver = tl.IMPLS[impl].Saver([variable])
      errors[impl, "Saver.restore"] = tl.outcome(saver.restore, program.session,
                                                 directory).error
  for call in ("restore", "read", "Saver.restore"):
    assert type(errors["tf", call]) is type(errors["ours", call]), call
    message = str(errors["ours", call])
    assert f"{directory!r} is a directory, not a checkpoint prefix" in message
    if with_checkpoint:
      assert f"its latest checkpoint is {latest!r}" in message
    else:
      assert "holds no checkpoint" in message


def _save_and_restore(impl, directory):
  checkpoint = tl.IMPLS[impl].Checkpoint(v=tf.Variable(np.zeros(256)))
  path = checkpoint.save(os.path.join(directory, "ckpt"))
  checkpoint.restore(path).assert_consumed()
  with tl.GraphProgram(impl) as program:
    variable = tf.compat.v1.get_variable("w", initializer=np.ones(8))
    saver = tl.IMPLS[impl].Saver([variable])
    program.session.run(variable.initializer)
    saved = saver.save(program.session, os.path.join(directory, "names"))
    saver.restore(program.session, saved)
  return path, saved


def test_nothing_more_is_logged_by_default(tmp_path):
  logged = {}
  for impl in ("tf", "ours"):
    with tl.captured_logs(level=None) as messages:
      _save_and_restore(impl, str(tmp_path / impl))
    logged[impl] = messages
  assert logged["ours"] == logged["tf"]


def test_each_save_and_restore_logs_one_info_line(tmp_path):
  with tl.captured_logs(py_logging.INFO) as messages:
    path, saved = _save_and_restore("ours", str(tmp_path))
  ours = [
      message for message in messages
      if re.match(r"(Saved|Restored) checkpoint ", message)
  ]
  number = r"[\d.]+"
  assert len(ours) == 4, messages
  data_bytes = {
      prefix: os.path.getsize(prefix + ".data-00000-of-00001")
      for prefix in (path, saved)
  }
  for message, (action, prefix, values,
                size) in zip(ours, [("Saved", path, 2, data_bytes[path]),
                                    ("Restored", path, 2, 256 * 8 + 8),
                                    ("Saved", saved, 1, data_bytes[saved]),
                                    ("Restored", saved, 1, 64)]):
    match = re.fullmatch(
        rf"{action} checkpoint {re.escape(prefix)}: {values} values, "
        rf"(\d+) bytes in {number} s \({number} MB/s\)", message)
    assert match, message
    assert int(match.group(1)) == size


def test_saves_inside_a_function_log_nothing(tmp_path):
  """A traced save writes when the function runs: the trace has no numbers."""
  checkpoint = tf_objckpt.Checkpoint(v=tf.Variable(np.zeros(4)))
  write = tf.function(checkpoint.write)
  with tl.captured_logs(py_logging.INFO) as messages:
    for name in ("first", "second"):
      write(str(tmp_path / name))
  assert not [
      message for message in messages
      if message.startswith(("Saved checkpoint", "Restored checkpoint"))
  ]
  for name in ("first", "second"):
    assert os.path.exists(tmp_path / f"{name}.index")


_DEPRECATED_CALLS = """
import logging
import os
import sys

import tensorflow as tf

import testlib as tl
import tf_objckpt

def _deprecated(messages):  # The functions they say are deprecated.
  return sorted(message.split(" (from ")[0].split(": ")[-1]
                for message in messages if "is deprecated" in message)


impl, directory = sys.argv[1:]
management = {"tf": tf.compat.v1.train, "ours": tf_objckpt}[impl]
with tl.captured_logs(logging.WARNING) as messages:
  with tf.Graph().as_default():
    tf.compat.v1.get_variable("v", [2])
    saver = tl.IMPLS[impl].Saver(max_to_keep=1)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      for step in (1, 2, 3):  # Removes the older ones.
        path = saver.save(session, os.path.join(directory, "model"),
                          global_step=step)
      saver.recover_last_checkpoints([path])  # Reads their times.
  print("INTERNAL", _deprecated(messages))
  del messages[:]
  management.get_checkpoint_mtimes([path])
  management.remove_checkpoint(path)
  print("USER", _deprecated(messages))
"""


@pytest.mark.parametrize("impl", ["tf", "ours"])
def test_deprecation_warnings_only_for_the_users_own_calls(tmp_path, impl):
  """The v1 Saver's own deletions warn of nothing the user could change.

  TensorFlow's Saver logs the deprecation of the functions it calls itself
  (and, as TensorFlow warns once per function and process, a user's later
  call of them is silent); ours does not, and the user's own call warns.
  Each runs in a new process.
  """
  result = tl.run_python(_DEPRECATED_CALLS, impl, tmp_path)
  assert result.returncode == 0, result.stderr[-3000:]
  internal, user = result.stdout.splitlines()
  both = "['get_checkpoint_mtimes', 'remove_checkpoint']"
  if impl == "ours":
    assert (internal, user) == ("INTERNAL []", f"USER {both}")
  else:
    assert (internal, user) == (f"INTERNAL {both}", "USER []")
