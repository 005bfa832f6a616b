"""Checks that the docs stay true: links resolve, pinned tests exist.

README.md and CONTRIBUTING.md link to files of the repository, API.md
names the tests that pin each departure from TensorFlow, and ARCHITECTURE.md
names the modules a save and a restore go through; a renamed file, module
or test must not leave them pointing at nothing. The layer tables of
ARCHITECTURE.md and CONTRIBUTING.md list what `LAYERS` of
module_structure_test.py, the one enforced, says.

Covers: no module; it checks the docs.
"""

import ast
import os
import re

import pytest

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_DOCS = ("README.md", "CONTRIBUTING.md", "API.md", "ARCHITECTURE.md")
# Paths of the package's modules, as ARCHITECTURE.md names them.
_MODULE_PATH = re.compile(r"`((?:[a-z0-9_]+/)*[a-z0-9_]+\.py)`")
_LINK = re.compile(r"\]\(([^)#\s]+)[^)]*\)")
_TEST_REFERENCE = re.compile(r"`(tests/[\w/]+_test\.py)(?:::(\w+))?`")
# A row of a layer table: "| 3. objects | ... |".
_LAYER_ROW = re.compile(r"^\| (\d)\. (\w+) \|(.*)\|$", re.MULTILINE)
_BACKTICKED = re.compile(r"`([a-z0-9_]+/?)`")


def _read(name):
  with open(os.path.join(ROOT, name)) as f:
    return f.read()


def _relative_links(doc):
  return [link for link in _LINK.findall(_read(doc)) if "://" not in link]


def _named_tests():
  """`(path, test name or "")` of the tests API.md names."""
  return _TEST_REFERENCE.findall(_read("API.md"))


def files_read():
  """The files these tests read besides the docs: links and named tests.

  tests/tools/build_targets_test.py checks that Bazel gives them to
  docs_test.
  """
  return sorted({link for doc in _DOCS for link in _relative_links(doc)} |
                {path for path, _ in _named_tests()})


@pytest.mark.parametrize("doc", _DOCS)
def test_relative_links_resolve(doc):
  missing = [
      link for link in _relative_links(doc)
      if not os.path.exists(os.path.join(ROOT, link))
  ]
  assert not missing, f"{doc} links to missing files: {missing}"


def test_architecture_names_modules_that_exist():
  named = _MODULE_PATH.findall(_read("ARCHITECTURE.md"))
  assert len(named) > 20
  missing = [
      path for path in named
      if not os.path.exists(os.path.join(ROOT, "tf_objckpt", path)) and
      not os.path.exists(os.path.join(ROOT, path))
  ]
  assert not missing, f"ARCHITECTURE.md names missing modules: {missing}"


def test_readme_links_the_api_reference():
  assert "(API.md)" in _read("README.md")


def test_api_reference_names_tests_that_exist():
  references = _named_tests()
  assert len(references) > 10
  missing = []
  for path, test_name in references:
    full_path = os.path.join(ROOT, path)
    if not os.path.exists(full_path):
      missing.append(path)
    elif test_name and not re.search(rf"^def {test_name}\(", _read(path),
                                     re.MULTILINE):
      missing.append(f"{path}::{test_name}")
  assert not missing, f"API.md names tests that do not exist: {missing}"


def _enforced_layers():
  """`{layer: set of modules and subpackages}` from module_structure_test.

  Read from its source, as data: the package's root and its `__main__`
  belong to the tools layer but are no row's business.
  """
  source = _read(os.path.join("tests", "tools", "module_structure_test.py"))
  values = {}
  for node in ast.parse(source).body:
    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
      if node.targets[0].id in ("LAYERS", "LAYER_ORDER"):
        values[node.targets[0].id] = ast.literal_eval(node.value)
  layers = {layer: set() for layer in values["LAYER_ORDER"]}
  for module, layer in values["LAYERS"].items():
    if module not in ("tf_objckpt", "tf_objckpt.__main__"):
      layers[layer].add(module)
  return values["LAYER_ORDER"], layers


def _documented_layers(doc, modules_column, folders_column):
  """`{(number, layer): set of modules}` from the layer table of `doc`.

  In the cell `modules_column` (counted after the layer's), a backticked
  `name` is a top-level module and `name/` a subpackage; in the cell
  `folders_column`, only subpackages count (other names are its content).
  """
  layers = {}
  for number, layer, cells in _LAYER_ROW.findall(_read(doc)):
    cells = cells.split("|")
    names = _BACKTICKED.findall(cells[modules_column]) + [
        name for name in _BACKTICKED.findall(cells[folders_column])
        if name.endswith("/")
    ]
    layers[(int(number),
            layer)] = {"tf_objckpt." + name.rstrip("/") for name in names}
  return layers


@pytest.mark.parametrize("doc, modules_column, folders_column",
                         [("ARCHITECTURE.md", 1, 1), ("CONTRIBUTING.md", 0, 1)])
def test_layer_tables_agree_with_the_enforced_layers(doc, modules_column,
                                                     folders_column):
  order, enforced = _enforced_layers()
  documented = _documented_layers(doc, modules_column, folders_column)
  assert {
      (order.index(layer), layer): modules
      for layer, modules in enforced.items()
  } == documented, doc
