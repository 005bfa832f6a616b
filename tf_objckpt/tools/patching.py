"""Makes TensorFlow and tf_keras build tf_objckpt's checkpoints.

`patch_tensorflow()` sets the attributes through which TensorFlow's and
tf_keras's own code finds its checkpoint classes (`Scaffold`,
`CheckpointSaverHook`, `Model.save_weights`, `BackupAndRestore`,
`PreemptionCheckpointHandler`, ...) and the public names users call
(`tf.train.Checkpoint`, ...) to tf_objckpt's. `unpatch_tensorflow()` puts
TensorFlow's objects back. API.md lists every attribute and who looks it up.

Both calls change all attributes or none: before changing anything they
check that each attribute exists and holds the object expected (TensorFlow's
to patch, ours to unpatch), and raise `RuntimeError` otherwise.
"""

import importlib
import threading
import typing

from tensorflow.python.checkpoint import checkpoint as tf_checkpoint_lib

from tf_objckpt.api import checkpoint_manager
from tf_objckpt.api import checkpoint_polling
from tf_objckpt.api import load_status
from tf_objckpt.api import object_checkpoints
from tf_objckpt.engine import state_file
from tf_objckpt.inspection import checkpoint_reader
from tf_objckpt.v1 import name_based_saver as saver_lib
from tf_objckpt.v1 import warm_start


def _streaming_restore(status, session=None):
  """Streams the restore of a load status, ours or TensorFlow's.

  Models built before the patch hold TensorFlow's checkpoints, whose load
  statuses TensorFlow's own function streams.
  """
  if isinstance(status, load_status.LoadStatus):
    return object_checkpoints.streaming_restore(status, session=session)
  return tf_checkpoint_lib.streaming_restore(status, session=session)


class _Role(typing.NamedTuple):
  """One object TensorFlow defines, and the one of ours that replaces it."""
  tf_module: str  # Where TensorFlow defines it.
  tf_name: str
  ours: typing.Any


_CHECKPOINT = _Role("tensorflow.python.checkpoint.checkpoint", "Checkpoint",
                    object_checkpoints.Checkpoint)
_CHECKPOINT_V1 = _Role("tensorflow.python.checkpoint.checkpoint",
                       "CheckpointV1", object_checkpoints.CheckpointV1)
_MANAGER = _Role("tensorflow.python.checkpoint.checkpoint_management",
                 "CheckpointManager", checkpoint_manager.CheckpointManager)
_SAVER = _Role("tensorflow.python.training.saver", "Saver", saver_lib.Saver)
_UPDATE_STATE = _Role("tensorflow.python.checkpoint.checkpoint_management",
                      "update_checkpoint_state_internal",
                      state_file.update_checkpoint_state_internal)
_STREAMING_RESTORE = _Role("tensorflow.python.checkpoint.checkpoint",
                           "streaming_restore", _streaming_restore)


class _Target(typing.NamedTuple):
  """A module attribute to patch: `module` is a dotted path of attributes."""
  module: str
  attribute: str
  role: _Role


# Internal modules are imported by name; API modules (tf.train, ...) are
# reached by attributes from `tensorflow`, as users and tf_keras reach them.
_TARGETS: typing.Tuple[_Target, ...] = (
    # Scaffold (_get_saver_or_default), the SavedModel builder, TensorFlow's
    # name-based restore and meta graph import build this module's Saver.
    _Target("tensorflow.python.training.saver", "Saver", _SAVER),
    # PreemptionCheckpointHandler and tf.data's save op build these, and
    # check isinstance against them (Scaffold too).
    _Target("tensorflow.python.checkpoint.checkpoint", "Checkpoint",
            _CHECKPOINT),
    _Target("tensorflow.python.checkpoint.checkpoint_management",
            "CheckpointManager", _MANAGER),
    _Target("tensorflow.train", "Checkpoint", _CHECKPOINT),
    _Target("tensorflow.train", "CheckpointManager", _MANAGER),
    _Target("tensorflow.compat.v1.train", "Checkpoint", _CHECKPOINT_V1),
    _Target("tensorflow.compat.v1.train", "CheckpointManager", _MANAGER),
    _Target("tensorflow.compat.v1.train", "Saver", _SAVER),
    # tf_keras imports tensorflow.compat.v2, whose modules are its own.
    _Target("tensorflow.compat.v2.train", "Checkpoint", _CHECKPOINT),
    _Target("tensorflow.compat.v2.train", "CheckpointManager", _MANAGER),
    _Target("tensorflow.compat.v2.__internal__.train",
            "update_checkpoint_state", _UPDATE_STATE),
    _Target("tensorflow.compat.v2.__internal__.tracking", "streaming_restore",
            _STREAMING_RESTORE),
)

# TensorFlow's `checkpoint_utils` functions, at each place TensorFlow
# exposes them: the module (where TensorFlow's warm starting and feature
# columns look `init_from_checkpoint` up), `tf.train` (and `tf.compat.v2`'s,
# which tf_keras reads checkpoints through) and `tf.compat.v1.train`.
_CHECKPOINT_UTILS = "tensorflow.python.training.checkpoint_utils"
_UTILS_ROLES = {
    name: _Role(_CHECKPOINT_UTILS, name, ours)
    for name, ours in (("load_checkpoint", checkpoint_reader.load_checkpoint),
                       ("list_variables", checkpoint_reader.list_variables),
                       ("load_variable", checkpoint_reader.load_variable),
                       ("checkpoints_iterator",
                        checkpoint_polling.checkpoints_iterator),
                       ("wait_for_new_checkpoint",
                        checkpoint_polling.wait_for_new_checkpoint),
                       ("init_from_checkpoint",
                        warm_start.init_from_checkpoint))
}
_V2_UTILS = ("load_checkpoint", "list_variables", "load_variable",
             "checkpoints_iterator")
_TARGETS += tuple(
    _Target(module, name, _UTILS_ROLES[name])
    for module, names in ((_CHECKPOINT_UTILS, tuple(_UTILS_ROLES)),
                          ("tensorflow.train", _V2_UTILS),
                          ("tensorflow.compat.v2.train",
                           _V2_UTILS), ("tensorflow.compat.v1.train",
                                        _V2_UTILS + ("init_from_checkpoint",)))
    for name in names)

_LOCK = threading.Lock()
# TensorFlow's objects by role, kept while patched.
_originals: dict = {}


def _module(dotted):
  """The module at the dotted path: imported, or reached by attributes."""
  if dotted.startswith("tensorflow.python."):
    return importlib.import_module(dotted)
  module = importlib.import_module("tensorflow")
  for name in dotted.split(".")[1:]:
    module = getattr(module, name)
  return module


def _is_tensorflows(value, role):
  """Whether `value` is the object TensorFlow defines for `role`."""
  return (getattr(value, "__module__", None) == role.tf_module and
          getattr(value, "__qualname__", None) == role.tf_name)


def _describe(value):
  name = getattr(value, "__qualname__", None)
  module = getattr(value, "__module__", None)
  if name and module:
    return f"{module}.{name}"
  return repr(value)


def _holdings():
  """Each target with its module and value; raises if one is missing."""
  holdings = []
  missing = []
  for target in _TARGETS:
    try:
      module = _module(target.module)
      holdings.append((target, module, getattr(module, target.attribute)))
    except (ImportError, AttributeError):
      missing.append(f"{target.module}.{target.attribute}")
  if missing:
    raise RuntimeError("tf_objckpt does not know this TensorFlow: "
                       f"{', '.join(missing)} not found. Nothing was changed.")
  return holdings


def _foreign_to_tensorflow(holdings):
  """Lines naming each target that does not hold TensorFlow's object.

  All targets of a role must hold one and the same object.
  """
  lines = [
      f"  {target.module}.{target.attribute} is {_describe(value)}, not "
      f"TensorFlow's {target.role.tf_module}.{target.role.tf_name}"
      for target, _, value in holdings
      if not _is_tensorflows(value, target.role)
  ]
  values_by_role = {}
  for target, _, value in holdings:
    values_by_role.setdefault(target.role, {})[id(value)] = target
  lines.extend(
      f"  {', '.join(f'{t.module}.{t.attribute}' for t in targets.values())} "
      "hold different objects"
      for targets in values_by_role.values()
      if len(targets) > 1)
  return lines


def _changed_since_patch(holdings):
  """Lines naming each target that no longer holds our object."""
  return [
      f"  {target.module}.{target.attribute} is {_describe(value)}, not "
      f"tf_objckpt's {_describe(target.role.ours)}"
      for target, _, value in holdings
      if value is not target.role.ours
  ]


def _is_patched(holdings):
  return all(value is target.role.ours for target, _, value in holdings)


def _set_all(holdings, value_for):
  for target, module, _ in holdings:
    setattr(module, target.attribute, value_for(target.role))


def patch_tensorflow() -> None:
  """Makes TensorFlow and tf_keras use tf_objckpt's checkpoint classes.

  Objects created before the call keep their classes. Calling it again
  does nothing.

  Raises:
    RuntimeError: If an attribute to patch is missing or holds an object
      other than TensorFlow's (another patch, or TensorFlow internals that
      tf_objckpt does not know). Nothing is changed then.
  """
  with _LOCK:
    holdings = _holdings()
    if _is_patched(holdings):
      return
    problems = _foreign_to_tensorflow(holdings)
    if problems:
      raise RuntimeError(
          "tf_objckpt cannot patch TensorFlow: these attributes do not hold "
          "TensorFlow's objects (patched by someone else, or TensorFlow "
          "internals tf_objckpt does not know). Nothing was changed.\n" +
          "\n".join(problems))
    _originals.update((target.role, value) for target, _, value in holdings)
    _set_all(holdings, lambda role: role.ours)


def unpatch_tensorflow() -> None:
  """Puts TensorFlow's own objects back where `patch_tensorflow` set ours.

  Objects created from then on are TensorFlow's; those created while
  patched stay ours. Calling it when not patched does nothing.

  Raises:
    RuntimeError: If an attribute no longer holds our object (something
      patched it since). Nothing is changed then.
  """
  with _LOCK:
    if not _originals:
      return
    holdings = _holdings()
    problems = _changed_since_patch(holdings)
    if problems:
      raise RuntimeError(
          "tf_objckpt cannot unpatch TensorFlow: these attributes changed "
          "since patch_tensorflow() set them. Nothing was changed.\n" +
          "\n".join(problems))
    _set_all(holdings, _originals.get)
    _originals.clear()


def is_patched() -> bool:
  """Whether `patch_tensorflow` is in effect."""
  with _LOCK:
    return bool(_originals)
