"""Restores of a path the user names: no self-healing, but a pointer.

`checkpoint.restore(manager.latest_checkpoint)` or `saver.restore(sess,
tf.train.latest_checkpoint(directory))` restore the path given, damaged or
not: only code that chooses the checkpoint itself falls back past damage
(`CheckpointManager.restore_or_initialize()`, TensorFlow's
`SessionManager`; see `self_healing`). When a restore of a named path
fails on damage, `pointing_to_intact` raises the error again, of its type,
its message ending with the newest intact checkpoint the directory's state
file lists, the one `restore_or_initialize()` would have restored.

Finding it reads whole checkpoints (`self_healing.damage`), only after a
restore failed.
"""

import contextlib
import functools
import os

from tensorflow.python.framework import errors
from tensorflow.python.lib.io import file_io

from tf_objckpt.api import self_healing
from tf_objckpt.engine import bundle_index
from tf_objckpt.engine import checkpoint_opening
from tf_objckpt.engine import state_file

_POINTER = "CheckpointManager.restore_or_initialize() would have restored"


@contextlib.contextmanager
def pointing_to_intact(save_path):
  """Adds the intact alternative to a damage error of restoring `save_path`.

  Yields:
    Nothing; the body restores `save_path`.
  """
  try:
    yield
  except (errors.OpError, ValueError) as error:
    pointed = with_intact_alternative(error, save_path)
    if pointed is None:
      raise
    raise pointed from error


def restore_pointing_to_intact(restore):
  """Decorates a method `restore(self, save_path, ...)`: see module."""

  @functools.wraps(restore)
  def restore_named(self, save_path, *args, **kwargs):
    with pointing_to_intact(save_path):
      return restore(self, save_path, *args, **kwargs)

  return restore_named


def damage_named(save_path, error):
  """`checkpoint_opening.damage_named(save_path, error)`, pointing to an intact one too.

  For graph-mode restore ops, whose reads fail in a session.
  """
  named = checkpoint_opening.damage_named(save_path, error)
  return with_intact_alternative(named, save_path) or named


def with_intact_alternative(error, save_path):
  """`error` retold naming an intact checkpoint to restore instead.

  Args:
    error: What restoring `save_path` raised.
    save_path: The path restored.

  Returns:
    An error of `error`'s type, or None if `error` is not damage of
    `save_path` or its directory's state file lists no intact checkpoint
    besides it.
  """
  if isinstance(save_path, bytes):
    save_path = save_path.decode()
  if isinstance(save_path, os.PathLike):
    save_path = os.fspath(save_path)
  message = str(getattr(error, "message", error))
  if (not isinstance(save_path, str) or _POINTER in message or
      not _is_damage(error, save_path)):
    return None  # A restore within a restore (the v1 Saver's) points once.
  alternative, older = _newest_intact_listed(save_path)
  if alternative is None:
    return None
  directory = os.path.dirname(save_path) or os.curdir
  text = (f"{message}\nThe state file of {directory!r} lists an"
          f"{' older' if older else ''} intact checkpoint, {alternative!r}: "
          f"{_POINTER} it, skipping damaged ones. A restore of a path you "
          "name never falls back.")
  if isinstance(error, errors.OpError):
    return type(error)(error.node_def, error.op, text)
  return type(error)(text)


def _is_damage(error, save_path):
  """Whether `error` of a restore of `save_path` comes from damaged files.

  Damage is a `DataLossError` or `OutOfRangeError` (not a directory given
  as a prefix), or a missing `.index` beside the data files. Cheap: what
  `verify` would find is not looked for.
  """
  if file_io.is_directory(save_path):
    return False
  if isinstance(error, (errors.DataLossError, errors.OutOfRangeError)):
    return True
  return (bundle_index.file_size(bundle_index.index_file_name(save_path))
          is None and bool(file_io.get_matching_files(save_path + ".data-*")))


def _newest_intact_listed(save_path):
  """The newest intact checkpoint its state file lists besides `save_path`.

  Returns:
    Its path (None if there is none), and whether it is older than
    `save_path` (listed after it, newest first).
  """
  directory = os.path.dirname(save_path) or os.curdir
  try:
    state = state_file.get_checkpoint_state(directory)
  except (errors.OpError, ValueError):
    return None, False
  if state is None:
    return None, False
  listed = list(
      dict.fromkeys([
          state.model_checkpoint_path,
          *reversed(state.all_model_checkpoint_paths)
      ]))
  names = [state_file.comparable(path) for path in listed]
  named = state_file.comparable(save_path)
  position = names.index(named) if named in names else None
  for index, path in enumerate(listed):
    if names[index] != named and not self_healing.damage(path):
      return path, position is not None and index > position
  return None, False
