"""Checks that each module has tests, and that tests name what they cover.

Each test file's docstring ends its list of what it checks with one
paragraph that starts `Covers:` and names, by dotted path, the modules of
the package whose behaviour its tests check, separated by commas and ended
by a period (the paragraph may wrap):

    Covers: tf_objckpt.engine.reads, tf_objckpt.api.self_healing.

A test of the repository rather than the package says `Covers: no module;`
and what it checks instead. Every module of `tf_objckpt/`, read from the
disk when the tests run, must be named by a test file, except the
subpackages' `__init__`s in `EXEMPT`; and every name must be a module that
exists, so a module renamed or moved fails here until the tests that cover
it say so.

Covers: no module; it checks the tests' docstrings against the package.
"""

import ast
import glob
import os
import re
import sys

import pytest

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TEST_FILES = sorted(
    os.path.relpath(path, ROOT)
    for path in glob.glob(os.path.join(ROOT, "tests", "**", "*_test.py"),
                          recursive=True))
# Modules no test file needs to name: subpackages' `__init__`s that hold
# nothing but their docstring (`test_exempt_modules_hold_only_a_docstring`
# keeps this true, so code added to one needs a test that names it).
EXEMPT = (
    "tf_objckpt.api",
    "tf_objckpt.engine",
    "tf_objckpt.foundation",
    "tf_objckpt.inspection",
    "tf_objckpt.objects",
    "tf_objckpt.restoring",
    "tf_objckpt.saveables",
    "tf_objckpt.tools",
    "tf_objckpt.v1",
)
_NAME = r"tf_objckpt(?:\.\w+)*"
_COVERS = re.compile(
    rf"Covers: (?:no module; .+|(?P<names>{_NAME}(?:, {_NAME})*))\.", re.DOTALL)


def _module_path(path, root):
  """`tf_objckpt/engine/commit.py` -> `tf_objckpt.engine.commit`."""
  name = os.path.splitext(os.path.relpath(path, root))[0].replace(os.sep, ".")
  return name[:-len(".__init__")] if name.endswith(".__init__") else name


def package_modules(root=ROOT):
  """Every module of the package under `root`, as on disk now."""
  return sorted(
      _module_path(path, root)
      for path in glob.glob(os.path.join(root, "tf_objckpt", "**", "*.py"),
                            recursive=True))


def covered_modules(docstring):
  """The modules a test file's docstring names in its `Covers:` paragraph.

  Raises:
    ValueError: There is no such paragraph, or more than one, or it is not
      `Covers: NAME, NAME.` or `Covers: no module; WHY.`.
  """
  found = [
      " ".join(paragraph.split())
      for paragraph in re.split(r"\n\s*\n", docstring or "")
      if paragraph.startswith("Covers:")
  ]  # Not indented examples.
  if len(found) != 1:
    raise ValueError(f"{len(found)} paragraphs start with 'Covers:', not 1")
  match = _COVERS.fullmatch(found[0])
  if not match:
    raise ValueError(f"not 'Covers: tf_objckpt.a, tf_objckpt.b.' nor "
                     f"'Covers: no module; why.': {found[0]!r}")
  names = match.group("names")
  return set(names.split(", ")) if names else set()


def _covered_by(test_file):
  with open(os.path.join(ROOT, test_file)) as f:
    return covered_modules(ast.get_docstring(ast.parse(f.read())))


def _coverage_map():
  """`{module: [test files naming it]}` over every test file that parses."""
  named = {}
  for test_file in _TEST_FILES:
    try:
      modules = _covered_by(test_file)
    except ValueError:
      continue  # test_each_test_file_says_what_it_covers reports it.
    for module in modules:
      named.setdefault(module, []).append(test_file)
  return named


@pytest.mark.parametrize("test_file", _TEST_FILES)
def test_each_test_file_says_what_it_covers(test_file):
  try:
    _covered_by(test_file)
  except ValueError as e:
    pytest.fail(f"{test_file}'s docstring: {e} (CONTRIBUTING.md, 'Where a "
                f"test goes', gives the form)")


@pytest.mark.parametrize("test_file", _TEST_FILES)
def test_each_named_module_exists(test_file):
  try:
    modules = _covered_by(test_file)
  except ValueError:
    pytest.skip("test_each_test_file_says_what_it_covers reports it")
  unknown = sorted(modules - set(package_modules()))
  assert not unknown, (
      f"{test_file} covers {', '.join(unknown)}, which the package does not "
      f"have (renamed or moved?); name the module's new path")


def test_each_module_is_named_by_a_test_file():
  named = _coverage_map()
  uncovered = [
      module for module in package_modules()
      if module not in EXEMPT and module not in named
  ]
  assert not uncovered, ("no test file's 'Covers:' paragraph names " +
                         ", ".join(uncovered) +
                         "; name each in the test files that check it, "
                         "or add a test")


def test_exempt_modules_hold_only_a_docstring():
  for module in EXEMPT:
    path = os.path.join(ROOT, *module.split("."), "__init__.py")
    assert os.path.exists(path), f"{module} is exempt but no package"
    with open(path) as f:
      body = ast.parse(f.read()).body
    assert len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(
        body[0].value, ast.Constant), (
            f"{module} holds more than its docstring: a test must name it, "
            f"and it must leave EXEMPT")


def test_the_form_is_read_as_documented():
  assert covered_modules("What it checks.\n\nCovers: tf_objckpt.engine.reads,\n"
                         "tf_objckpt.api.self_healing.\n") == {
                             "tf_objckpt.engine.reads",
                             "tf_objckpt.api.self_healing"
                         }
  assert covered_modules("Title.\n\nCovers: tf_objckpt.\n") == {"tf_objckpt"}
  assert covered_modules(
      "Title, and an example:\n\n    Covers: tf_objckpt.a.\n\n"
      "Covers: tf_objckpt.b.") == {"tf_objckpt.b"}
  assert covered_modules(
      "Title.\n\nCovers: no module; it checks the docs.") == set()
  for malformed in ("Title.\n\nWhat it checks, but not which modules.",
                    "Covers: tf_objckpt.a.\n\nCovers: tf_objckpt.b.",
                    "Title.\n\nCovers: tf_objckpt.engine.reads",
                    "Title.\n\nCovers: engine.reads.",
                    "Title.\n\nCovers: tf_objckpt.a and tf_objckpt.b.",
                    "Title.\n\nCovers: the reads.",
                    "Title.\n\nCovers `tf_objckpt.engine.reads`.", None):
    with pytest.raises(ValueError):
      covered_modules(malformed)


def test_modules_are_read_from_the_disk_when_the_tests_run(tmp_path):
  """A module renamed by a change is seen by the same run's checks."""
  package = tmp_path / "tf_objckpt"
  (package / "engine").mkdir(parents=True)
  for name in ("__init__.py", "engine/__init__.py", "engine/reads.py"):
    (package / name).write_text('"""Doc."""\n')
  assert package_modules(tmp_path) == [
      "tf_objckpt", "tf_objckpt.engine", "tf_objckpt.engine.reads"
  ]
  os.rename(package / "engine" / "reads.py", package / "engine" / "opening.py")
  assert "tf_objckpt.engine.reads" not in package_modules(tmp_path)


def main(modules):
  """Prints the test files that name each of `modules` (all, if none)."""
  named = _coverage_map()
  for module in modules or package_modules():
    print(f"{module}: {' '.join(sorted(named.get(module, []))) or '-'}")


if __name__ == "__main__":
  main(sys.argv[1:])
