"""Fixtures of the interop tests.

`patched` runs a test with `tf_objckpt.patch_tensorflow()` in effect, and
TensorFlow unpatched after it, for the tests of the patch and of what it
changes in TensorFlow's integrations.
"""

import pytest

import testlib as tl


@pytest.fixture(name="patched")
def _patched():
  with tl.tensorflow_patched():
    yield
