"""Repository-wide pytest setup: quiet TensorFlow's C++ logging; Keras 3.

Tests of Keras 3 are marked `keras3`: explicitly, or by "keras3" in their
name, parameters or file name. Where `keras` is Keras 2
(TensorFlow 2.15), they do not apply and are deselected.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _is_keras3_test(item):
  return bool(item.get_closest_marker("keras3")) or "keras3" in (
      item.name + os.path.basename(str(item.fspath)))


def pytest_collection_modifyitems(config, items):
  for item in items:
    if _is_keras3_test(item):
      item.add_marker("keras3")
  import testlib  # pylint: disable=g-import-not-at-top
  if testlib.KERAS_3:
    return
  deselected = [item for item in items if "keras3" in item.keywords]
  if deselected:
    config.hook.pytest_deselected(items=deselected)
    items[:] = [item for item in items if "keras3" not in item.keywords]
