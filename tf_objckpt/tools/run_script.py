"""`tf-objckpt run SCRIPT [ARGS...]`: a script run as Python runs it, patched.

The script runs in this process as `python SCRIPT ARGS...` would run it: as
`__main__`, with its absolute path as `__file__`, `sys.argv` as typed
(`sys.argv[0]` is SCRIPT), and its folder first on `sys.path`. Its exit
status is the command's, an uncaught exception is reported as Python
reports it (traceback from the script's own frames on, exit status 1), and
nothing else is printed; a script that cannot be opened is reported before
anything runs.

TensorFlow is not imported for the script: `patch_tensorflow()` runs when
the script (or a module it imports, such as Keras) first imports
`tensorflow`, right after TensorFlow's package has loaded. So a script that
never imports TensorFlow starts as fast as with `python`, and TensorFlow's
logger is set up at the same moment as under `python` (a script that
configures `logging` gets each line once). Processes the script starts are
not patched unless they call `patch_tensorflow()`.
"""

import importlib.machinery
import io
import os
import sys
import types

EXIT_UNCAUGHT_EXCEPTION = 1
EXIT_CANNOT_OPEN = 2  # As Python's, for a script it cannot open.

_TENSORFLOW = "tensorflow"


def _patch_tensorflow():
  # Imported when used: patching imports TensorFlow.
  from tf_objckpt.tools import patching  # pylint: disable=g-import-not-at-top
  patching.patch_tensorflow()


class _PatchingLoader:
  """Loads TensorFlow's package with its own loader, then patches it.

  A loader as `importlib.abc.Loader` describes one, without importing that
  module (and `importlib.resources` with it), which would slow the start
  of every script.
  """

  def __init__(self, loader, on_loaded):
    self._loader = loader
    self._on_loaded = on_loaded

  def create_module(self, spec):
    return self._loader.create_module(spec)

  def exec_module(self, module):
    # TensorFlow's package sees its own loader, as without the hook.
    module.__loader__ = module.__spec__.loader = self._loader
    self._loader.exec_module(module)
    self._on_loaded()


class PatchOnImport:
  """Patches TensorFlow as soon as its package is first imported.

  Installed on `sys.meta_path` (`install`), it finds nothing itself: it
  hands the import of `tensorflow` to the finders after it, and wraps the
  loader they give so that `patch_tensorflow()` runs once TensorFlow's
  `__init__` has run. It removes itself then. (A finder as
  `importlib.abc.MetaPathFinder` describes one.)
  """

  def install(self):
    if _TENSORFLOW in sys.modules:
      _patch_tensorflow()
    else:
      sys.meta_path.insert(0, self)

  def uninstall(self):
    if self in sys.meta_path:
      sys.meta_path.remove(self)

  def find_spec(self, fullname, path, target=None):
    if fullname != _TENSORFLOW:
      return None
    for finder in sys.meta_path:
      if finder is self or not hasattr(finder, "find_spec"):
        continue
      spec = finder.find_spec(fullname, path, target)
      if spec is not None:
        if spec.loader is not None:
          spec.loader = _PatchingLoader(spec.loader, self._loaded)
        return spec
    return None

  def _loaded(self):
    self.uninstall()
    _patch_tensorflow()


def _run_as_main(script_path):
  """Runs the file `script_path` as Python runs a script: the module `__main__`.

  Not `runpy.run_path`, which makes `sys.argv[0]` the path it is given.
  """
  with io.open_code(script_path) as f:
    code = compile(f.read(), script_path, "exec", dont_inherit=True)
  main = types.ModuleType("__main__")
  main.__dict__.update(__file__=script_path,
                       __cached__=None,
                       __package__=None,
                       __spec__=None,
                       __loader__=importlib.machinery.SourceFileLoader(
                           "__main__", script_path))
  saved_main = sys.modules["__main__"]
  sys.modules["__main__"] = main
  try:
    exec(code, main.__dict__)  # pylint: disable=exec-used
  finally:
    sys.modules["__main__"] = saved_main


def _from_script_frames(traceback, script_path):
  """The part of `traceback` from the script's first frame on (or None)."""
  while traceback is not None and (traceback.tb_frame.f_code.co_filename
                                   != script_path):
    traceback = traceback.tb_next
  return traceback


def run(script, args):
  """Runs `script` with `args` as `__main__`; returns its exit status.

  A `SystemExit` raised by the script propagates, as in Python.
  """
  path = os.path.abspath(script)
  if not os.path.isfile(path):
    print(
        f"tf-objckpt run: can't open file {path!r}: [Errno 2] No such "
        "file or directory",
        file=sys.stderr)
    return EXIT_CANNOT_OPEN
  hook = PatchOnImport()
  hook.install()
  saved_argv, saved_path = sys.argv[:], sys.path[:]
  sys.argv[:] = [script, *args]
  sys.path[0] = os.path.dirname(os.path.realpath(path))
  try:
    _run_as_main(path)
  except Exception as error:  # pylint: disable=broad-except
    # Python's hook prints the traceback the exception holds.
    error = error.with_traceback(_from_script_frames(error.__traceback__, path))
    sys.excepthook(type(error), error, error.__traceback__)
    return EXIT_UNCAUGHT_EXCEPTION
  finally:
    hook.uninstall()
    sys.argv[:], sys.path[:] = saved_argv, saved_path
  return 0
