"""How code that moved out of a TensorFlow-named module keeps its name.

TensorFlow's module names stay at the top of the package (`checkpoint`,
`saver`, `base`, ...) as re-exports of code that lives in subpackages. A
class (or function) that moved from one of them keeps that module as its
`__module__`: pickles and reprs name it as before, and a pickle loads
through the re-export (tests/tools/module_structure_test.py checks that
the module named re-exports it).
"""

from typing import Any


def keep_module_name(module_name: str, *moved: Any) -> None:
  """Names `module_name`, a top-level module, as the module of `moved`."""
  for obj in moved:
    obj.__module__ = module_name
