"""Checks the shape of the package: layers, one I/O engine, no import cycles.

`LAYERS` is the package's one layer table: every module, or the subpackage
holding it, has a layer, and a module imports only modules of its own layer
or of layers below it, lazy imports included. Each subpackage's docstring
names its layer. Every module starts with a docstring saying its job and
is at most 600 lines long; imports between tf_objckpt modules form no
cycle; and only the I/O engine's reads, writes and graph-mode restore
functions issue checkpoint file ops or open checkpoints for reading.

The modules at the top of the package keep TensorFlow's names and only
re-export: they define no function or class, and no module imports them
(code imports from where it lives). A class or function that moved out of
one keeps it as its `__module__`, and the module re-exports it.

Covers: no module; it checks the package's layout.
"""

import ast
import glob
import importlib
import os
import re

import pytest

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_MODULES = sorted(
    glob.glob(os.path.join(ROOT, "tf_objckpt", "**", "*.py"), recursive=True))
# The engine's modules that read or write checkpoint files.
_FILE_IO_MODULES = ("tf_objckpt.engine.graph_restores",
                    "tf_objckpt.engine.reads", "tf_objckpt.engine.writes")
# TensorFlow's modules whose ops read or write checkpoint files, its
# checkpoint readers (`tf.train.load_checkpoint` and its kin: ours, in
# `inspection.checkpoint_reader`, share their names), and file ops added by
# name (as to a FunctionDef).
_FILE_IO = re.compile(
    r"\b(gen_io_ops|io_ops|py_checkpoint_reader)\b|NewCheckpointReader|"
    r"\b(train|checkpoint_utils)\.(load_checkpoint|load_variable|"
    r"list_variables)\b|"
    r"tensorflow\.python\.training(\.checkpoint_utils | import "
    r"checkpoint_utils\b)|"
    r"op(_type)?=\"(SaveV2|RestoreV2|MergeV2Checkpoints|ShardedFilename|"
    r"ShardedFilespec|SaveSlices)\"")

# The layers, lowest first: a module may import its own layer and those
# before it. The foundation is what every layer shares.
LAYER_ORDER = ("foundation", "engine", "plans", "objects", "api", "tools")
# Each top-level module (TensorFlow's names) and each subpackage, by layer.
LAYERS = {
    "tf_objckpt.version": "foundation",
    "tf_objckpt.object_identity": "foundation",
    "tf_objckpt.trackable_utils": "foundation",
    "tf_objckpt.foundation": "foundation",
    "tf_objckpt.engine": "engine",
    "tf_objckpt.functional_saver": "engine",
    "tf_objckpt.saveable_object": "engine",
    "tf_objckpt.sharding_policies": "engine",
    "tf_objckpt.restoring": "plans",
    "tf_objckpt.restore": "plans",
    "tf_objckpt.saveable_object_util": "plans",
    "tf_objckpt.base": "objects",
    "tf_objckpt.tracking": "objects",
    "tf_objckpt.data_structures": "objects",
    "tf_objckpt.graph_view": "objects",
    "tf_objckpt.objects": "objects",
    "tf_objckpt.api": "api",
    "tf_objckpt.inspection": "api",
    "tf_objckpt.v1": "api",
    "tf_objckpt.util": "api",
    "tf_objckpt.checkpoint": "api",
    "tf_objckpt.saver": "api",
    "tf_objckpt.checkpoint_management": "api",
    "tf_objckpt.checkpoint_utils": "api",
    "tf_objckpt.tools": "tools",
    "tf_objckpt.__main__": "tools",
    # The package's root loads its public names lazily, by name.
    "tf_objckpt": "tools",
}

# Top-level modules that are not TensorFlow's names: the package's version
# (setup.py reads the file), and the entry point of `python -m tf_objckpt`.
_NOT_TENSORFLOWS = ("tf_objckpt.version", "tf_objckpt.__main__")
# The most lines a module may have.
MAX_LINES = 600


def module_name(path):
  """`tf_objckpt/engine/commit.py` -> `tf_objckpt.engine.commit`."""
  relative = os.path.relpath(os.path.splitext(path)[0], ROOT)
  name = relative.replace(os.sep, ".")
  return name[:-len(".__init__")] if name.endswith(".__init__") else name


_KNOWN = {module_name(path) for path in _MODULES}


def imported_modules(source, name):
  """The tf_objckpt modules `source` (module `name`) imports, at any depth."""
  imported = set()
  for node in ast.walk(ast.parse(source)):
    if isinstance(node,
                  ast.ImportFrom) and node.module and (node.module.split(".")[0]
                                                       == "tf_objckpt"):
      for alias in node.names:
        submodule = f"{node.module}.{alias.name}"
        imported.add(submodule if submodule in _KNOWN else node.module)
    elif isinstance(node, ast.Import):
      imported.update(alias.name
                      for alias in node.names
                      if alias.name.split(".")[0] == "tf_objckpt")
  return imported - {name}


def layer_of(name):
  """The layer of module `name`: its own entry, or its package's."""
  while name not in LAYERS:
    if "." not in name:
      raise KeyError(name)
    name = name.rsplit(".", 1)[0]
  return LAYERS[name]


def upward_imports(source, name):
  """`(imported, its layer)` for each import of `source` above its layer."""
  rank = LAYER_ORDER.index(layer_of(name))
  return sorted((imported, layer_of(imported))
                for imported in imported_modules(source, name)
                if LAYER_ORDER.index(layer_of(imported)) > rank)


def _cycle(graph):
  """A cycle of `graph` ({node: successors}) as a list, or None."""
  state = {}

  def visit(node, stack):
    state[node] = "open"
    stack.append(node)
    for successor in sorted(graph.get(node, ())):
      if state.get(successor) == "open":
        return stack[stack.index(successor):] + [successor]
      if successor not in state:
        found = visit(successor, stack)
        if found:
          return found
    stack.pop()
    state[node] = "done"
    return None

  for node in sorted(graph):
    if node not in state:
      found = visit(node, [])
      if found:
        return found
  return None


def test_cycle_finder_finds_cycles():
  assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
  assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycles():
  graph = {
      module_name(path): imported_modules(open(path).read(), module_name(path))
      for path in _MODULES
      if module_name(path) != "tf_objckpt"
  }
  assert _cycle(graph) is None, " -> ".join(_cycle(graph))


@pytest.mark.parametrize("path", _MODULES, ids=module_name)
def test_module_has_a_layer_and_imports_only_down(path):
  name = module_name(path)
  upward = upward_imports(open(path).read(), name)
  assert not upward, (
      f"{name} ({layer_of(name)}) imports a higher layer: " +
      ", ".join(f"{imported} ({layer})" for imported, layer in upward))


def test_layer_check_catches_an_upward_import():
  planted = ("def write():\n"
             "  from tf_objckpt import util  # Lazy, and up two layers.\n")
  assert upward_imports(planted, "tf_objckpt.engine.commit") == [
      ("tf_objckpt.util", "api")
  ]
  assert upward_imports(planted, "tf_objckpt.tools.cli") == []


def test_every_layer_entry_exists():
  assert not set(LAYERS) - _KNOWN


def test_exceptions_are_still_exceptions():
  """A module listed as not TensorFlow's name still exists."""
  assert set(_NOT_TENSORFLOWS) <= _KNOWN


@pytest.mark.parametrize(
    "package",
    sorted(name for name in LAYERS if name in _KNOWN and os.path.isdir(
        os.path.join(ROOT, *name.split("."))) and name != "tf_objckpt"))
def test_subpackage_docstring_states_its_layer(package):
  path = os.path.join(ROOT, *package.split("."), "__init__.py")
  docstring = ast.get_docstring(ast.parse(open(path).read()))
  layer = LAYERS[package]
  number = LAYER_ORDER.index(layer)
  assert f"Layer {number} of {len(LAYER_ORDER) - 1} ({layer}" in docstring, (
      f"{package}'s docstring does not say 'Layer {number} of "
      f"{len(LAYER_ORDER) - 1} ({layer}...'")


def top_level_imports(source, name):
  """The top-level modules `source` (module `name`) imports, but those
  that are not TensorFlow's names."""
  return sorted(
      imported for imported in imported_modules(source, name)
      if imported.count(".") == 1 and imported not in _NOT_TENSORFLOWS)


def own_code(source):
  """Lines of `source` that do more than import (docstring aside)."""
  body = ast.parse(source).body
  if body and isinstance(body[0], ast.Expr) and isinstance(
      body[0].value, ast.Constant):
    body = body[1:]
  return [
      f"{node.lineno}: {ast.unparse(node).splitlines()[0]}" for node in body
      if not isinstance(node, (ast.Import, ast.ImportFrom))
  ]


_TOP_LEVEL = [
    path for path in _MODULES if module_name(path).count(".") == 1 and
    module_name(path) not in _NOT_TENSORFLOWS
]


@pytest.mark.parametrize("path", _MODULES, ids=module_name)
def test_no_module_imports_a_top_level_module(path):
  name = module_name(path)
  imported = top_level_imports(open(path).read(), name)
  assert not imported, (
      f"{name} imports {', '.join(imported)}, which only re-export: import "
      "from the module where the code lives")


def test_top_level_import_check_catches_one():
  planted = ("from tf_objckpt import checkpoint_management\n"
             "from tf_objckpt import restore\n"
             "from tf_objckpt.engine import state_file\n")
  assert top_level_imports(planted, "tf_objckpt.api.trackable_saver") == [
      "tf_objckpt.checkpoint_management", "tf_objckpt.restore"
  ]


@pytest.mark.parametrize("path", _TOP_LEVEL, ids=module_name)
def test_top_level_modules_only_reexport(path):
  code = own_code(open(path).read())
  assert not code, (
      f"{module_name(path)} keeps TensorFlow's name and only re-exports; "
      "put this in the subpackage of its layer:\n" + "\n".join(code))


def test_reexport_check_catches_a_function():
  assert own_code('"""Doc."""\nfrom a import b\n') == []
  assert own_code('"""Doc."""\nfrom a import b\n\ndef f():\n  pass\n') == [
      "4: def f():"
  ]


def test_moved_code_is_found_where_its_module_name_says():
  """What keeps a top-level module's name is re-exported there: pickles of
  it load, and reprs name the module TensorFlow's users know."""
  misplaced = []
  for name in sorted(_KNOWN - {"tf_objckpt.__main__"}):
    for value in list(vars(importlib.import_module(name)).values()):
      home = getattr(value, "__module__", None)
      if (not isinstance(home, str) or not home.startswith("tf_objckpt.") or
          not (isinstance(value, type) or callable(value))):
        continue
      found = getattr(importlib.import_module(home),
                      getattr(value, "__qualname__", ""), None)
      if found is not value:
        misplaced.append(f"{value!r} (in {name}) is not {home}."
                         f"{getattr(value, '__qualname__', '?')}")
  assert not misplaced, "\n".join(sorted(set(misplaced)))


@pytest.mark.parametrize("path", _MODULES, ids=module_name)
def test_module_is_small_and_says_its_job(path):
  source = open(path).read()
  assert source.count("\n") <= MAX_LINES, (
      f"{module_name(path)} is over {MAX_LINES} lines")
  docstring = ast.get_docstring(ast.parse(source))
  assert docstring and docstring.split("\n")[0].strip(), (
      f"{module_name(path)} has no docstring saying its job")


def test_file_io_check_catches_tensorflows_readers_not_ours():
  tensorflows = (
      "tf.train.load_checkpoint(path)",
      "tf.compat.v1.train.list_variables(path)",
      "checkpoint_utils.load_variable(path, key)",
      "from tensorflow.python.training import checkpoint_utils",
      "from tensorflow.python.training.checkpoint_utils import load_checkpoint",
      "py_checkpoint_reader.NewCheckpointReader(path)")
  ours = ("def load_checkpoint(ckpt_dir_or_file):",
          "from tf_objckpt.inspection.checkpoint_reader import load_checkpoint",
          'TARGET = ("tensorflow.python.training.checkpoint_utils", '
          '"load_checkpoint")',
          "reader = checkpoint_reader.load_checkpoint(path)")
  assert all(_FILE_IO.search(line) for line in tensorflows)
  assert not any(_FILE_IO.search(line) for line in ours)


@pytest.mark.parametrize("path", _MODULES, ids=module_name)
def test_only_the_engine_touches_checkpoint_files(path):
  if module_name(path) in _FILE_IO_MODULES:
    assert _FILE_IO.search(open(path).read())
    return
  offending = [
      f"{number}: {line.strip()}"
      for number, line in enumerate(open(path).read().split("\n"), start=1)
      if _FILE_IO.search(line)
  ]
  assert not offending, "\n".join(offending)
