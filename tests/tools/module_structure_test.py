"""Checks the shape of the package: layers, one I/O engine, no import cycles.

Every module starts with a docstring saying its job and stays under 1,000
lines; imports between tf_objckpt modules, lazy ones included, form no
cycle; and only the I/O engine (`functional_saver`) issues checkpoint file
ops or opens checkpoints for reading.
"""

import ast
import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_MODULES = sorted(glob.glob(os.path.join(ROOT, "tf_objckpt", "*.py")))
_ENGINE = "functional_saver"
# TensorFlow's modules whose ops read or write checkpoint files, its
# checkpoint readers, and file ops added by name (as to a FunctionDef).
_FILE_IO = re.compile(
    r"\b(gen_io_ops|io_ops|py_checkpoint_reader)\b|"
    r"NewCheckpointReader|load_checkpoint|"
    r"op(_type)?=\"(SaveV2|RestoreV2|MergeV2Checkpoints|ShardedFilename|"
    r"ShardedFilespec|SaveSlices)\"")


def _name(path):
  return os.path.splitext(os.path.basename(path))[0]


def _imported_modules(path):
  """The tf_objckpt modules `path` imports, at any depth of its code."""
  imported = set()
  for node in ast.walk(ast.parse(open(path).read())):
    if isinstance(node, ast.ImportFrom) and node.module:
      if node.module == "tf_objckpt":
        imported.update(alias.name for alias in node.names)
      elif node.module.startswith("tf_objckpt."):
        imported.add(node.module.split(".")[1])
    elif isinstance(node, ast.Import):
      imported.update(alias.name.split(".")[1] for alias in node.names
                      if alias.name.startswith("tf_objckpt."))
  return imported - {_name(path)}


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
  graph = {_name(path): _imported_modules(path) for path in _MODULES
           if _name(path) != "__init__"}
  assert _cycle(graph) is None, " -> ".join(_cycle(graph))


@pytest.mark.parametrize("path", _MODULES, ids=_name)
def test_module_is_small_and_says_its_job(path):
  source = open(path).read()
  assert source.count("\n") <= 1000, f"{_name(path)} is over 1,000 lines"
  docstring = ast.get_docstring(ast.parse(source))
  assert docstring and docstring.split("\n")[0].strip(), (
      f"{_name(path)} has no docstring saying its job")


@pytest.mark.parametrize("path", _MODULES, ids=_name)
def test_only_the_engine_touches_checkpoint_files(path):
  if _name(path) == _ENGINE:
    assert _FILE_IO.search(open(path).read())
    return
  offending = [f"{number}: {line.strip()}" for number, line in
               enumerate(open(path).read().split("\n"), start=1)
               if _FILE_IO.search(line)]
  assert not offending, "\n".join(offending)
