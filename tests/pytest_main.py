"""Runs the pytest files named on the command line; Bazel's py_test main."""

import os
import sys

import pytest

if __name__ == "__main__":
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
