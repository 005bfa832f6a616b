"""tf_objckpt: TensorFlow-compatible object-based checkpointing.

Checkpoints written here are TensorFlow checkpoints (same keys, same object
graph), and TensorFlow's checkpoints restore here. See README.md.

The names below are loaded on first use, so that `import tf_objckpt` (and
the command line's `--help`) does not import TensorFlow; the first class or
function used imports it. Submodules (`tf_objckpt.util`, ...) load the same
way. `patch_tensorflow()` makes TensorFlow use tf_objckpt's classes
(`tools.patching`).
"""

import importlib

from tf_objckpt.version import __version__

# Each public name, and the module defining it.
_EXPORTS = {
    "NoRestoreSaveable": "base",
    "PythonStringStateSaveable": "base",
    "Trackable": "base",
    "CheckpointManager": "checkpoint_management",
    "checkpoint_exists": "checkpoint_management",
    "get_checkpoint_mtimes": "checkpoint_management",
    "get_checkpoint_state": "checkpoint_management",
    "latest_checkpoint": "checkpoint_management",
    "meta_graph_filename": "checkpoint_management",
    "remove_checkpoint": "checkpoint_management",
    "update_checkpoint_state": "checkpoint_management",
    "NoDependency": "data_structures",
    "ParallelShardsPolicy": "engine.sharding_policies",
    "patch_tensorflow": "tools.patching",
    "unpatch_tensorflow": "tools.patching",
    "Saver": "saver",
    "export_meta_graph": "saver",
    "import_meta_graph": "saver",
    "AutoTrackable": "tracking",
    "add_variable": "checkpoint",
    "capture_dependencies": "checkpoint",
    "Checkpoint": "checkpoint",
    "CheckpointOptions": "checkpoint",
    "CheckpointV1": "checkpoint",
    "frozen_saver": "checkpoint",
    "gather_initializers": "checkpoint",
    "list_objects": "checkpoint",
    "object_metadata": "checkpoint",
    "saver_with_op_caching": "checkpoint",
    "streaming_restore": "checkpoint",
    "TrackableSaver": "checkpoint",
}

# Built from _EXPORTS, so ruff cannot read it.
__all__ = sorted(_EXPORTS) + ["__version__"]  # noqa: PLE0605


def __getattr__(name):
  """Loads a public name, or a submodule, on first use."""
  module = _EXPORTS.get(name)
  if module is not None:
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
  if name.startswith("__"):
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  try:
    return importlib.import_module(f"{__name__}.{name}")
  except ModuleNotFoundError as e:
    if e.name != f"{__name__}.{name}":
      raise
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | set(_EXPORTS))
