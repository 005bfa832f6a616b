"""Checks that modules talk through public names and declared protocols.

A module of the package reaches no other module's private names: every
attribute `x._name` it reads or writes (`x` other than `self`, `cls` or
`super()`), and every `getattr`, `hasattr` or `setattr` of a literal
`"_name"`, names one of TensorFlow's private names (the one list:
`foundation.tensorflow_internals.PRIVATE_NAMES`), one of Python's
(`namedtuple`'s `_replace`, ...), or a name the module defines itself (a
class of its own touching another instance's state). No module looks up a
private name of ours with `getattr`. At most `MAX_DISABLES` lines (or
blocks) are marked `pylint: disable=protected-access`, and each marked line
reaches one of TensorFlow's names.

Covers: tf_objckpt.foundation.tensorflow_internals.
"""

import ast
import glob
import os
import re

import pytest

from tf_objckpt.foundation import tensorflow_internals

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_MODULES = sorted(
    glob.glob(os.path.join(ROOT, "tf_objckpt", "**", "*.py"), recursive=True))
# Python's own names with a leading underscore (not private: namedtuple's
# API keeps its names out of the fields' way; the caller's frame).
PYTHON_NAMES = frozenset({"_asdict", "_fields", "_make", "_replace"})
# The most `protected-access` disables the package may hold.
MAX_DISABLES = 30
_DISABLE = "pylint: disable=protected-access"
_LOOKUPS = ("getattr", "hasattr", "setattr", "delattr")


def _is_private(name):
  return name.startswith("_") and not name.startswith("__")


def _relative(path):
  return os.path.relpath(path, ROOT)


def own_names(tree):
  """The private names a module defines: functions, classes, attributes
  assigned on `self` or `cls`, and class-level assignments."""
  names = set()
  for node in ast.walk(tree):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
      names.add(node.name)
    elif isinstance(
        node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(
            node.value, ast.Name) and (node.value.id in ("self", "cls")):
      names.add(node.attr)
    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
      names.add(node.id)
  return {name for name in names if _is_private(name)}


def _receiver_is_own(value):
  """Whether `value._x` is an access to one's own attribute."""
  if isinstance(value, ast.Name):
    return value.id in ("self", "cls")
  return (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and
          value.func.id == "super")


def private_reaches(source):
  """`(line, name, how)` for each private name `source` reaches on another
  object: `how` is "attribute" or the lookup function's name."""
  found = []
  for node in ast.walk(ast.parse(source)):
    if (isinstance(node, ast.Attribute) and _is_private(node.attr) and
        not _receiver_is_own(node.value)):
      found.append((node.lineno, node.attr, "attribute"))
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and
          node.func.id in _LOOKUPS and len(node.args) >= 2 and
          isinstance(node.args[1], ast.Constant) and
          isinstance(node.args[1].value, str) and
          _is_private(node.args[1].value)):
      found.append((node.lineno, node.args[1].value, node.func.id))
  return sorted(found)


def unlisted_reaches(source):
  """The reaches of `source` to names neither TensorFlow's, Python's nor
  the module's own; and its `getattr`s of its own private names."""
  own = own_names(ast.parse(source))
  problems = []
  for line, name, how in private_reaches(source):
    if name in tensorflow_internals.PRIVATE_NAMES or name in PYTHON_NAMES:
      continue
    if name not in own:
      problems.append(f"{line}: {name} ({how})")
    elif how != "attribute":
      problems.append(f"{line}: {how}(..., {name!r}) of an attribute of its "
                      "own: set it in __init__ and read it directly")
  return problems


@pytest.mark.parametrize("path", _MODULES, ids=_relative)
def test_modules_reach_only_tensorflows_private_names(path):
  problems = unlisted_reaches(open(path).read())
  assert not problems, (
      f"{_relative(path)} reaches private names that are not TensorFlow's "
      "(tensorflow_internals.PRIVATE_NAMES): use a public method or a "
      "declared protocol instead:\n" + "\n".join(problems))


def test_the_check_catches_reaches():
  planted = ('"""Doc."""\n'
             "class A:\n"
             "  def __init__(self):\n"
             "    self._own = 1\n"
             "  def f(self, other, manager):\n"
             "    other._own = 2\n"
             "    manager._save_planned()\n"
             "    getattr(other, '_own', None)\n"
             "    hasattr(manager, '_update_uid')\n"
             "    return other._update_uid, self._anything\n")
  assert unlisted_reaches(planted) == [
      "7: _save_planned (attribute)",
      "8: getattr(..., '_own') of an attribute of its own: set it in "
      "__init__ and read it directly"
  ]


def disabled_lines():
  """`(module, line number, line)` of each `protected-access` disable."""
  found = []
  for path in _MODULES:
    for number, line in enumerate(open(path).read().split("\n"), start=1):
      if _DISABLE in line:
        found.append((_relative(path), number, line))
  return found


def test_few_protected_access_disables():
  found = disabled_lines()
  assert len(found) <= MAX_DISABLES, (
      f"{len(found)} protected-access disables (at most {MAX_DISABLES}): "
      "reach TensorFlow's trackable protocol through "
      "foundation.tensorflow_internals\n" +
      "\n".join(f"{module}:{number}" for module, number, _ in found))


def test_each_disable_reaches_a_tensorflow_name():
  """A disable on a line of code marks a reach to one of TensorFlow's
  names; one on a line of its own covers its module (only
  `tensorflow_internals`, where every reach is checked above)."""
  problems = []
  for module, number, line in disabled_lines():
    code = line.split("#")[0]
    if not code.strip():
      if module != os.path.join("tf_objckpt", "foundation",
                                "tensorflow_internals.py"):
        problems.append(f"{module}:{number}: a block disable")
      continue
    names = set(re.findall(r"\.(_[A-Za-z]\w*)", code)) | set(
        re.findall(r"[\"'](_[A-Za-z]\w*)[\"']", code))
    if not names & tensorflow_internals.PRIVATE_NAMES:
      problems.append(f"{module}:{number}: {line.strip()}")
  assert not problems, "\n".join(problems)
