"""The public API has type hints, and the package says so (PEP 561).

`scripts/lint.sh` type-checks the package with mypy; these tests keep the
hints there: every parameter and return of the functions and methods users
call is annotated, with TensorFlow's parameter names and defaults
(`tests/interop/public_api_test.py` checks those), and the package ships
`py.typed`, so a user's type checker reads the hints.

Covers: tf_objckpt.foundation.type_hints.
"""

import importlib
import inspect
import os

import pytest

import tf_objckpt

# The classes of the public API, with the methods users call.
_STATUS_METHODS = ("assert_consumed", "assert_existing_objects_matched",
                   "assert_nontrivial_match", "expect_partial",
                   "run_restore_ops", "initialize_or_restore", "report")
_METHODS = {
    "checkpoint.Checkpoint":
        ("__init__", "write", "save", "read", "restore", "sync"),
    "checkpoint.CheckpointV1": ("__init__", "write", "save", "restore"),
    "checkpoint.CheckpointOptions": ("__init__",),
    "checkpoint.TrackableSaver": ("__init__", "save", "restore"),
    "checkpoint.CheckpointLoadStatus": _STATUS_METHODS,
    "checkpoint.InitializationOnlyStatus": _STATUS_METHODS,
    "checkpoint.NameBasedSaverStatus": _STATUS_METHODS,
    "checkpoint_management.CheckpointManager":
        ("__init__", "save", "restore_or_initialize", "sync"),
    "saver.Saver": ("__init__", "build", "save", "restore"),
    "ParallelShardsPolicy": ("__init__", "__call__"),
}
# The functions of the public API.
_FUNCTIONS = (
    "checkpoint.streaming_restore",
    "checkpoint.frozen_saver",
    "checkpoint.saver_with_op_caching",
    "checkpoint.object_metadata",
    "checkpoint.list_objects",
    "checkpoint.gather_initializers",
    "checkpoint.add_variable",
    "checkpoint.capture_dependencies",
    "checkpoint_management.generate_checkpoint_state_proto",
    "checkpoint_management.update_checkpoint_state",
    "checkpoint_management.update_checkpoint_state_internal",
    "checkpoint_management.get_checkpoint_state",
    "checkpoint_management.latest_checkpoint",
    "checkpoint_management.checkpoint_exists",
    "checkpoint_management.checkpoint_exists_internal",
    "checkpoint_management.get_checkpoint_mtimes",
    "checkpoint_management.remove_checkpoint",
    "checkpoint_management.meta_graph_filename",
    "checkpoint_utils.load_checkpoint",
    "checkpoint_utils.list_variables",
    "checkpoint_utils.load_variable",
    "checkpoint_utils.checkpoints_iterator",
    "checkpoint_utils.wait_for_new_checkpoint",
    "checkpoint_utils.init_from_checkpoint",
    "saver.import_meta_graph",
    "saver.export_meta_graph",
    "patch_tensorflow",
    "unpatch_tensorflow",
    "tools.cli.main",
    "tools.cli.run",
)


def _resolve(dotted):
  """`tf_objckpt.<dotted>`: a module's attribute, or the package's."""
  module, _, name = f"tf_objckpt.{dotted}".rpartition(".")
  return getattr(importlib.import_module(module), name)


def _unannotated(function):
  """The parameters (and "return") of `function` without a hint."""
  signature = inspect.signature(function)
  missing = [
      name for name, parameter in signature.parameters.items()
      if name not in ("self",
                      "cls") and parameter.annotation is inspect.Parameter.empty
  ]
  if signature.return_annotation is inspect.Signature.empty:
    missing.append("return")
  return missing


@pytest.mark.parametrize("dotted", _FUNCTIONS)
def test_public_functions_are_annotated(dotted):
  assert not _unannotated(_resolve(dotted)), dotted


@pytest.mark.parametrize("dotted", sorted(_METHODS))
def test_public_methods_are_annotated(dotted):
  cls = _resolve(dotted)
  missing = {name: _unannotated(getattr(cls, name)) for name in _METHODS[dotted]}
  assert not {name: m for name, m in missing.items() if m}, dotted


def test_the_package_ships_its_hints():
  package = os.path.dirname(tf_objckpt.__file__)
  assert os.path.isfile(os.path.join(package, "py.typed"))
