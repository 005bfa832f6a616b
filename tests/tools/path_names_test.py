"""Checks that the package's own parameters call a checkpoint's path one thing.

ARCHITECTURE.md's glossary: a checkpoint's path is `save_path` (a string);
`file_prefix` is only the same path as a string tensor, what the ops take.
A parameter of the package's own functions may not be called `prefix`,
`path`, `checkpoint_prefix`, `checkpoint_path` or `ckpt_path`, nor
`file_prefix` where it is not a tensor: a path of another kind says which
(`file_path`, `script_path`, ...). The exceptions are TensorFlow's (and
Python's) own signatures, which callers use by keyword, and the engine's
functions whose path is the ops' tensor: each is listed in `EXCEPTIONS`,
and must still exist.

Covers: no module; it checks the parameter names of the package's functions.
"""

import ast
import glob
import os

import pytest

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_MODULES = sorted(
    glob.glob(os.path.join(ROOT, "tf_objckpt", "**", "*.py"), recursive=True))
# Names of a checkpoint's path that the glossary replaces by `save_path`.
OTHER_NAMES = frozenset(
    {"prefix", "path", "checkpoint_prefix", "checkpoint_path", "ckpt_path"})
# The glossary's name for the path as a string tensor, the ops' argument.
TENSOR_NAME = "file_prefix"

# "module:function" (a method as "module:Class.method") -> its parameters
# named otherwise, each with why.
_TENSORFLOWS = "TensorFlow's signature"
_TENSOR = "the ops' string tensor"
EXCEPTIONS = {
    # TensorFlow's signatures: `Checkpoint.save(file_prefix)`, ...
    "api/object_checkpoints:CheckpointV1.write": {
        "file_prefix": _TENSORFLOWS
    },
    "api/object_checkpoints:CheckpointV1.save": {
        "file_prefix": _TENSORFLOWS
    },
    "api/object_checkpoints:Checkpoint.write": {
        "file_prefix": _TENSORFLOWS
    },
    "api/object_checkpoints:Checkpoint.save": {
        "file_prefix": _TENSORFLOWS
    },
    # TensorFlow's manager calls `checkpoint._write(prefix, options=...)`.
    "api/object_checkpoints:_CheckpointBase._write": {
        "file_prefix": _TENSORFLOWS
    },
    "api/trackable_saver:TrackableSaver.save": {
        "file_prefix": _TENSORFLOWS
    },
    "api/trackable_saver:TrackableSaver._save_cached_when_graph_building": {
        "file_prefix": _TENSOR
    },
    "engine/multi_device_saver:Saver.save": {
        "file_prefix": _TENSORFLOWS
    },
    "engine/multi_device_saver:Saver.restore": {
        "file_prefix": _TENSORFLOWS
    },
    "engine/multi_device_saver:Saver.restore_op": {
        "file_prefix": _TENSORFLOWS
    },
    "engine/state_file:checkpoint_exists_internal": {
        "checkpoint_prefix": _TENSORFLOWS
    },
    "engine/state_file:checkpoint_exists": {
        "checkpoint_prefix": _TENSORFLOWS
    },
    "engine/state_file:remove_checkpoint": {
        "checkpoint_prefix": _TENSORFLOWS
    },
    "saveables/trackable_saveables:TrackableSaveable.__init__": {
        "prefix": "TensorFlow's signature: the key's legacy prefix"
    },
    "v1/saver_builders:BaseSaverBuilder._AddShardedSaveOpsForV2": {
        "checkpoint_prefix": _TENSORFLOWS
    },
    "v1/name_based_saver:saver_from_object_based_checkpoint": {
        "checkpoint_path": _TENSORFLOWS
    },
    "v1/object_based_names:object_graph_key_mapping": {
        "checkpoint_path": _TENSORFLOWS
    },
    # Python's `importlib.abc.MetaPathFinder.find_spec`.
    "tools/run_script:PatchOnImport.find_spec": {
        "path": "Python's signature"
    },
    # The engine's functions of the ops' string tensor.
    "engine/graph_restores:restore_variables": {
        "file_prefix": _TENSOR
    },
    "engine/graph_restores:_call_restore_function": {
        "file_prefix": _TENSOR
    },
    "engine/multi_device_saver:_restore_group": {
        "file_prefix": _TENSOR
    },
    "engine/multi_device_saver:_restore_variable_batches": {
        "file_prefix": _TENSOR
    },
    "engine/multi_device_saver:execute_plan": {
        "file_prefix": _TENSOR
    },
    "engine/multi_device_saver:Saver._write_registered": {
        "file_prefix": _TENSOR
    },
    "engine/reads:restore_v2": {
        "file_prefix": _TENSOR
    },
    "engine/reads:eager_restore_v2": {
        "file_prefix": _TENSOR
    },
    "engine/registered_savers:RegisteredSave.save": {
        "file_prefix": _TENSOR
    },
    "engine/writes:save_v2": {
        "file_prefix": _TENSOR
    },
    "engine/writes:sharded_filespec": {
        "file_prefix": _TENSOR
    },
    "engine/writes:temp_shard_prefix": {
        "file_prefix": _TENSOR
    },
    "engine/writes:write_shards": {
        "file_prefix": _TENSOR
    },
}


def _module(path):
  return os.path.splitext(
      os.path.relpath(path, os.path.join(ROOT, "tf_objckpt")))[0]


def _functions(tree):
  """`(qualified name, function node)` of every function, lambdas aside."""
  found = []

  def visit(node, scope):
    for child in ast.iter_child_nodes(node):
      if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
        name = f"{scope}.{child.name}" if scope else child.name
        found.append((name, child))
        visit(child, name)
      elif isinstance(child, ast.ClassDef):
        visit(child, f"{scope}.{child.name}" if scope else child.name)
      else:
        visit(child, scope)

  visit(tree, "")
  return found


def _parameters(function):
  arguments = function.args
  return [
      argument.arg for argument in (arguments.posonlyargs + arguments.args +
                                    arguments.kwonlyargs)
  ]


def misnamed(source, module):
  """`"module:function(parameter)"` of each path parameter named otherwise
  than the glossary says, but for `EXCEPTIONS`; lambdas too."""
  tree = ast.parse(source)
  found = []
  for name, function in _functions(tree):
    allowed = EXCEPTIONS.get(f"{module}:{name}", {})
    for parameter in _parameters(function):
      if ((parameter in OTHER_NAMES or parameter == TENSOR_NAME) and
          parameter not in allowed):
        found.append(f"{module}:{name}({parameter})")
  for node in ast.walk(tree):
    if isinstance(node, ast.Lambda):
      found.extend(f"{module}:line {node.lineno}: lambda({parameter})"
                   for parameter in _parameters(node)
                   if parameter in OTHER_NAMES or parameter == TENSOR_NAME)
  return found


@pytest.mark.parametrize("path", _MODULES, ids=_module)
def test_a_checkpoints_path_is_called_save_path(path):
  found = misnamed(open(path).read(), _module(path))
  assert not found, (
      "a checkpoint's path is `save_path` (ARCHITECTURE.md's glossary; "
      "`file_prefix` only for the ops' string tensor), another path says "
      "what it is; TensorFlow's signatures are listed in EXCEPTIONS:\n" +
      "\n".join(found))


def test_the_check_catches_other_names():
  planted = ("def damage(prefix):\n  pass\n"
             "class Saver:\n  def save(self, file_prefix):\n    pass\n"
             "  def restore(self, save_path):\n    pass\n"
             "record = lambda path, save: None\n")
  assert misnamed(planted, "api/planted") == [
      "api/planted:damage(prefix)", "api/planted:Saver.save(file_prefix)",
      "api/planted:line 8: lambda(path)"
  ]


def test_exceptions_still_exist():
  """Each exception names a function that still has that parameter."""
  present = set()
  for path in _MODULES:
    module = _module(path)
    for name, function in _functions(ast.parse(open(path).read())):
      present.update(f"{module}:{name}({parameter})"
                     for parameter in _parameters(function))
  stale = [
      f"{function}({parameter})" for function, parameters in EXCEPTIONS.items()
      for parameter in parameters if f"{function}({parameter})" not in present
  ]
  assert not stale, "\n".join(stale)
