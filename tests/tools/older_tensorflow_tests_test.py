"""Checks the subset CI runs on TensorFlow 2.15 and 2.16 (`.ci/run`).

`.ci/older_tensorflow_tests.txt` lists the test files run there, each on
both versions, or on the one version named after it. The subset is cut for
time, not to leave anything out: it must name existing test files, include
at least one file of every folder of `tests/` on each version, and include
the tests of what each version lacks (`tensorflow_versions_test.py`).

Covers: no module; it checks CI's list of test files.
"""

import glob
import os

import pytest

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUBSET_FILE = os.path.join(ROOT, ".ci", "older_tensorflow_tests.txt")
VERSIONS = ("2.15", "2.16")


def _subset():
  """`{version: [test file]}` of the subset file."""
  subset = {version: [] for version in VERSIONS}
  with open(SUBSET_FILE) as f:
    for line in f:
      fields = line.split("#")[0].split()
      if not fields:
        continue
      path, *only = fields
      assert set(only) <= set(VERSIONS), line
      for version in only or VERSIONS:
        subset[version].append(path)
  return subset


def _folders():
  return sorted({
      os.path.relpath(os.path.dirname(path), ROOT)
      for path in glob.glob(os.path.join(ROOT, "tests", "*", "*_test.py"))
  })


def test_ci_runs_the_subset_on_each_older_version():
  with open(os.path.join(ROOT, ".ci", "run")) as f:
    ci = f.read()
  assert "older_tensorflow_tests.txt" in ci
  assert "for version in " + " ".join(VERSIONS) in ci


@pytest.mark.parametrize("version", VERSIONS)
def test_subset_names_test_files_of_every_folder(version):
  paths = _subset()[version]
  missing = [
      path for path in paths if not (path.endswith("_test.py") and
                                     os.path.isfile(os.path.join(ROOT, path)))
  ]
  assert not missing, f"not test files: {missing}"
  assert len(set(paths)) == len(paths)
  uncovered = set(_folders()) - {os.path.dirname(path) for path in paths}
  assert not uncovered, f"no test of {sorted(uncovered)} on {version}"
  assert "tests/eager/tensorflow_versions_test.py" in paths
