"""`tf-objckpt run SCRIPT [ARGS...]`: a script run as Python runs it, patched.

The script runs in this process with `patch_tensorflow()` on, as `python
SCRIPT ARGS...` would run it: as `__main__`, with its absolute path as
`__file__` and `sys.argv[0]`, its arguments in `sys.argv[1:]` and its
folder first on `sys.path`. Its exit status is the command's, an uncaught
exception is reported as Python reports it (traceback from the script's
own frames on, exit status 1), and nothing else is printed. Processes the
script starts are not patched unless they call `patch_tensorflow()`.
"""

import os
import runpy
import sys

from tf_objckpt.tools import patching

EXIT_UNCAUGHT_EXCEPTION = 1
EXIT_CANNOT_OPEN = 2  # As Python's, for a script it cannot open.


def _from_script_frames(traceback, path):
  """The part of `traceback` from the script's first frame on (or None)."""
  while traceback is not None and (
      traceback.tb_frame.f_code.co_filename != path):
    traceback = traceback.tb_next
  return traceback


def run(script, args):
  """Runs `script` with `args` as `__main__`; returns its exit status.

  A `SystemExit` raised by the script propagates, as in Python.
  """
  path = os.path.abspath(script)
  if not os.path.isfile(path):
    print(f"tf-objckpt run: can't open file {path!r}: no such file",
          file=sys.stderr)
    return EXIT_CANNOT_OPEN
  patching.patch_tensorflow()
  saved_argv, saved_path = sys.argv[:], sys.path[:]
  sys.argv[:] = [path, *args]
  sys.path[0] = os.path.dirname(os.path.realpath(path))
  try:
    runpy.run_path(path, run_name="__main__")
  except Exception as error:  # pylint: disable=broad-except
    # Python's hook prints the traceback the exception holds.
    error = error.with_traceback(
        _from_script_frames(error.__traceback__, path))
    sys.excepthook(type(error), error, error.__traceback__)
    return EXIT_UNCAUGHT_EXCEPTION
  finally:
    sys.argv[:], sys.path[:] = saved_argv, saved_path
  return 0
