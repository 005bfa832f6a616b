"""Errors and logs: what a call raised, and what it logged.

`outcome` is the one way tests catch what a call raises; the other helpers
compare what both implementations raised, or read what they logged.
"""

import contextlib
import logging as py_logging
import typing

from absl import logging as absl_logging
import tensorflow as tf

from testlib import impls


class Outcome(typing.NamedTuple):
  """What a call did: its result, or the exception it raised."""
  result: typing.Any
  error: typing.Optional[Exception]

  @property
  def name(self):
    """"ok", or the name of the exception's type (messages may differ)."""
    return "ok" if self.error is None else type(self.error).__name__

  @property
  def described(self):
    """"ok", or the exception's type name and its message up to a colon."""
    if self.error is None:
      return "ok"
    return self.name, str(self.error).split(":")[0]


def outcome(fn, *args, **kwargs):
  """Calls `fn(*args, **kwargs)`; returns an `Outcome`, never raises."""
  try:
    return Outcome(fn(*args, **kwargs), None)
  except Exception as e:  # pylint: disable=broad-except
    return Outcome(None, e)


STATUS_ASSERTIONS = ("assert_consumed", "assert_existing_objects_matched",
                     "assert_nontrivial_match")


def assertion_outcomes(status, names=STATUS_ASSERTIONS, messages=False):
  """For each method `names` of a load status: "ok", or what it raised.

  What it raised is the exception's type name, or with `messages` a
  (type name, message up to its first colon) pair.
  """
  found = [outcome(getattr(status, name)) for name in names]
  if messages:
    return [result.described for result in found]
  return [result.name for result in found]


def errors_by_impl(fn):
  """`{impl: exception or None}` from `fn(impl's Checkpoint class)`."""
  return {
      impl: outcome(fn, lib.Checkpoint).error
      for impl, lib in impls.IMPLS.items()
  }


def assert_same_error_type(errors, expected_type=None):
  """Both raised, exceptions of one type (and of `expected_type`)."""
  assert errors["tf"] is not None, "TensorFlow raised nothing"
  assert errors["ours"] is not None, "tf_objckpt raised nothing"
  assert type(errors["ours"]) is type(errors["tf"]), (
      f"TensorFlow raised {errors['tf']!r}, we raised {errors['ours']!r}")
  if expected_type is not None:
    assert isinstance(errors["ours"], expected_type), (
        f"both raised {type(errors['ours']).__name__}, not "
        f"{expected_type.__name__}: TensorFlow {errors['tf']!r}, "
        f"we {errors['ours']!r}")


def assert_names_the_value(error, path, *object_paths):
  """The message names `path`, and one of `object_paths` with its key."""
  message = str(error)
  assert path in message, message
  assert any(f"{object_path}/.ATTRIBUTES/VARIABLE_VALUE" in message and
             f"'{object_path}'" in message
             for object_path in object_paths), message


class _Collect(py_logging.Handler):

  def __init__(self):
    super().__init__(level=py_logging.DEBUG)
    self.messages = []

  def emit(self, record):
    self.messages.append(record.getMessage())


@contextlib.contextmanager
def captured_logs(level=py_logging.DEBUG):
  """Collects messages logged at `level` or above while the scope is open.

  Both absl's logger and TensorFlow's ("tensorflow", where TensorFlow's
  checkpointing logs) are captured. With `level` None the loggers keep
  their levels: what is captured is what a program logs by default.
  """
  handler = _Collect()
  loggers = [absl_logging.get_absl_logger(), tf.get_logger()]
  levels = [logger.level for logger in loggers]
  for logger in loggers:
    if level is not None:
      logger.setLevel(level)
    logger.addHandler(handler)
  try:
    yield handler.messages
  finally:
    for logger, level in zip(loggers, levels):
      logger.removeHandler(handler)
      logger.setLevel(level)
