"""Runs the pytest files named on the command line; Bazel's py_test main."""

import os
import sys

import pytest


def _import_from_runfiles_only():
  """Drops the import finders of editable installs (`pip install -e`).

  The venv's editable install of tf_objckpt would otherwise supply a module
  missing from the runfiles from its checkout, hiding a module that the BUILD
  files leave out of the test's deps.
  """
  sys.meta_path[:] = [
      finder for finder in sys.meta_path
      if not getattr(finder, "__module__", "").startswith("__editable__")
  ]


if __name__ == "__main__":
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  _import_from_runfiles_only()
  sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
