"""Checks that the docs stay true: links resolve, pinned tests exist.

README.md and CONTRIBUTING.md link to files of the repository, API.md
names the tests that pin each departure from TensorFlow, and ARCHITECTURE.md
names the modules a save and a restore go through; a renamed file, module
or test must not leave them pointing at nothing.

Covers: no module; it checks the docs.
"""

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_DOCS = ("README.md", "CONTRIBUTING.md", "API.md", "ARCHITECTURE.md")
# Paths of the package's modules, as ARCHITECTURE.md names them.
_MODULE_PATH = re.compile(r"`((?:[a-z0-9_]+/)*[a-z0-9_]+\.py)`")
_LINK = re.compile(r"\]\(([^)#\s]+)[^)]*\)")
_TEST_REFERENCE = re.compile(r"`(tests/[\w/]+_test\.py)(?:::(\w+))?`")


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
  return sorted({link for doc in _DOCS for link in _relative_links(doc)}
                | {path for path, _ in _named_tests()})


@pytest.mark.parametrize("doc", _DOCS)
def test_relative_links_resolve(doc):
  missing = [link for link in _relative_links(doc)
             if not os.path.exists(os.path.join(ROOT, link))]
  assert not missing, f"{doc} links to missing files: {missing}"


def test_architecture_names_modules_that_exist():
  named = _MODULE_PATH.findall(_read("ARCHITECTURE.md"))
  assert len(named) > 20
  missing = [path for path in named
             if not os.path.exists(os.path.join(ROOT, "tf_objckpt", path))
             and not os.path.exists(os.path.join(ROOT, path))]
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
    elif test_name and not re.search(
        rf"^def {test_name}\(", _read(path), re.MULTILINE):
      missing.append(f"{path}::{test_name}")
  assert not missing, f"API.md names tests that do not exist: {missing}"
