"""Explains a failed save: its checkpoint and, where it shows, the reason.

A save that fails with TensorFlow's error keeps its type; its message
starts with the checkpoint and, when the file system shows one, the reason
(`Cannot save checkpoint '<prefix>': directory '<dir>' is not writable.`),
then TensorFlow's own.
"""

import contextlib
import copy
import os

from tensorflow.python.framework import errors
from tensorflow.python.lib.io import file_io

from tf_objckpt.engine import local_paths

# Reasons an error's message gives (the C library's texts), in user terms.
_REASONS_BY_TEXT = (
    ("No space left on device", "no space is left on the device holding {}"),
    ("File too large", "a file in {} would outgrow this process's file size "
     "limit"),
)


@contextlib.contextmanager
def explaining_failures(save_path, state_file=None):
  """Leads the message of a TensorFlow error raised inside by the reason.

  The error keeps its type; its message becomes `Cannot save checkpoint
  '<prefix>': <reason>.` (the reason when one is found) and TensorFlow's.

  Args:
    save_path: The checkpoint being written.
    state_file: The name of the state file the save updates, if any.

  Yields:
    Nothing.
  """
  try:
    yield
  except errors.OpError as error:
    explained = _explained(error, save_path, state_file)
    if explained is error:
      raise
    raise explained.with_traceback(error.__traceback__) from None


def _explained(error, save_path, state_file):
  """A copy of `error` whose message names the checkpoint and the reason."""
  lead = f"Cannot save checkpoint {save_path!r}"
  if error.message.startswith(lead):
    return error  # Explained by an enclosing save already.
  reason = _reason(error, save_path, state_file)
  explained = copy.copy(error)
  explained._message = (  # pylint: disable=protected-access
      f"{lead}: {reason}.\n{error.message}"
      if reason else f"{lead}.\n{error.message}")
  return explained


def _reason(error, save_path, state_file):
  """Why a save of `save_path` failed, as the file system shows it, or None."""
  directory = os.path.dirname(save_path) or "."
  local = local_paths.local_path(directory)
  if local is not None:
    existing = _deepest_existing(local)
    if existing == os.path.abspath(local):
      existing = directory  # As the caller wrote it.
    if not os.path.isdir(existing):
      return f"{existing!r} is a file, not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
      return f"directory {existing!r} is not writable"
  if not _is_directory(directory):
    return f"directory {directory!r} does not exist"
  for text, reason in _REASONS_BY_TEXT:
    if text in error.message:
      return reason.format(f"directory {directory!r}")
  for path in (save_path + ".index", state_file and
               os.path.join(directory, state_file)):
    if path and _is_directory(path):
      return f"{path!r} is a directory, where the save writes a file"
  return None


def _deepest_existing(local):
  """`local` as an absolute path, or its deepest parent that exists."""
  path = os.path.abspath(local)
  while not os.path.lexists(path):
    path = os.path.dirname(path)
  return path


def _is_directory(file_path):
  try:
    return file_io.is_directory(file_path)
  except errors.OpError:
    return False
