"""`python -m tf_objckpt run SCRIPT [ARGS...]` runs a script as Python would.

Each script runs both ways, `python SCRIPT ARGS...` and through `run`, from
the same working directory: it sees the same `__name__`, `__file__`,
arguments (`sys.argv[0]` as typed) and `sys.path[0]`, prints the same, logs
the same (each line once, when it configures `logging` itself or runs
under pytest's log capture), and exits the same (status, `sys.exit`
message, traceback of an uncaught exception), except that under `run`
TensorFlow's checkpoint classes are ours, from the moment TensorFlow is
imported, by the script or by a module it imports. A script that never
imports TensorFlow runs without it; a script that cannot be opened is
reported before TensorFlow could log. The console script `tf-objckpt run`
does the same.

Covers: tf_objckpt.tools.run_script, tf_objckpt.tools.patching,
tf_objckpt.foundation.module_names.
"""

import json
import os
import subprocess
import sys

import pytest

import testlib as tl

_SHOW = """
import json
import os
import sys

import tensorflow as tf

print(json.dumps({
    "name": __name__, "file": __file__, "argv": sys.argv,
    "path0": sys.path[0], "checkpoint": tf.train.Checkpoint.__module__}))
"""

_EXITS = {
    "code": ("import sys\nprint('bye')\nsys.exit(3)\n", 3),
    "message": ("import sys\nsys.exit('stopped: no data')\n", 1),
    "exception": ("def fail():\n  raise ValueError('no data')\n\nfail()\n", 1),
    "syntax": ("x = (\n", 1),
}


def _write_script(tmp_path, text):
  script = tmp_path / "project" / "train.py"
  script.parent.mkdir(exist_ok=True)
  script.write_text(text)
  return os.path.join("project", "train.py")


def _run(command, cwd):
  return subprocess.run(command,
                        capture_output=True,
                        text=True,
                        cwd=cwd,
                        env=tl.child_env(TF_CPP_MIN_LOG_LEVEL="3"),
                        timeout=300,
                        check=False)


def _python(script, *args, cwd):
  return _run([sys.executable, script, *args], cwd)


def _patched(script, *args, cwd):
  return _run([sys.executable, "-m", "tf_objckpt", "run", script, *args], cwd)


def _without_tensorflow_start_up(stderr):
  """stderr without the C++ lines TensorFlow logs as it starts."""
  return [
      line for line in stderr.splitlines()
      if not line.startswith(("WARNING: All log messages", "I0000", "E0000",
                              "W0000"))
  ]


def test_the_script_sees_what_python_shows_it_but_our_classes(tmp_path):
  script = _write_script(tmp_path, _SHOW)
  args = ["data.csv", "--epochs", "3", "--help"]
  expected = _python(script, *args, cwd=tmp_path)
  actual = _patched(script, *args, cwd=tmp_path)
  assert expected.returncode == actual.returncode == 0, actual.stderr[-3000:]
  expected_view, actual_view = (json.loads(expected.stdout),
                                json.loads(actual.stdout))
  assert expected_view.pop(
      "checkpoint") == "tensorflow.python.checkpoint.checkpoint"
  assert actual_view.pop("checkpoint") == "tf_objckpt.checkpoint"
  assert actual_view == expected_view
  assert actual_view["argv"][0] == script  # As typed, relative.
  assert actual_view["name"] == "__main__"
  assert actual_view["path0"] == str(tmp_path / "project")
  assert _without_tensorflow_start_up(
      actual.stderr) == (_without_tensorflow_start_up(expected.stderr))


@pytest.mark.parametrize("how", sorted(_EXITS))
def test_exit_status_and_errors_are_the_scripts(tmp_path, how):
  text, code = _EXITS[how]
  script = _write_script(tmp_path, text)
  expected = _python(script, cwd=tmp_path)
  actual = _patched(script, cwd=tmp_path)
  assert expected.returncode == actual.returncode == code
  assert actual.stdout == expected.stdout
  assert _without_tensorflow_start_up(
      actual.stderr) == (_without_tensorflow_start_up(expected.stderr))


def test_a_missing_script_is_reported_before_anything_runs(tmp_path):
  expected = _python("missing.py", cwd=tmp_path)
  result = _run([
      sys.executable, "-X", "importtime", "-m", "tf_objckpt", "run",
      "missing.py"
  ], tmp_path)
  assert expected.returncode == result.returncode == 2
  message = expected.stderr.split(": ", 1)[1]
  assert message.startswith("can't open file ")
  lines = result.stderr.splitlines()
  assert lines[-1] == "tf-objckpt run: " + message.rstrip("\n")
  assert not _imported_tensorflow(lines)


def _imported_tensorflow(stderr_lines):
  """The TensorFlow modules `-X importtime` lines show imported."""
  return [
      line for line in stderr_lines if line.startswith("import time:") and
      line.rsplit("|", 1)[-1].strip().startswith("tensorflow")
  ]


def test_a_script_without_tensorflow_runs_without_it(tmp_path):
  script = _write_script(
      tmp_path, "import sys\nprint(sorted(sys.modules) == "
      "sorted(m for m in sys.modules if 'tensorflow' not "
      "in m))\n")
  result = _run(
      [sys.executable, "-X", "importtime", "-m", "tf_objckpt", "run", script],
      tmp_path)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout == "True\n"
  assert not _imported_tensorflow(result.stderr.splitlines())


_IMPORTED_BY_A_MODULE = """
import helper
import tensorflow as tf
print(helper.CHECKPOINT, tf.train.Checkpoint.__module__)
"""

_HELPER = """
from tensorflow import train
CHECKPOINT = train.Checkpoint.__module__
"""


def test_patched_when_a_module_the_script_imports_imports_tensorflow(tmp_path):
  script = _write_script(tmp_path, _IMPORTED_BY_A_MODULE)
  (tmp_path / "project" / "helper.py").write_text(_HELPER)
  result = _patched(script, cwd=tmp_path)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout == "tf_objckpt.checkpoint tf_objckpt.checkpoint\n"


_CONFIGURES_LOGGING = """
import logging
import sys

if sys.argv[1] == "configured":
  logging.basicConfig(level=logging.INFO, format="%(name)s| %(message)s")

import tensorflow as tf

tf.get_logger().warning("a line from TensorFlow's logger")
tf.compat.v1.logging.warning("and one through tf.compat.v1.logging")
print(tf.train.Checkpoint.__module__)
"""


@pytest.mark.parametrize("how", ["configured", "not_configured"])
def test_logging_as_under_python(tmp_path, how):
  """A script configuring logging first gets each line once, as in Python.

  TensorFlow's logger takes a handler of its own only when the root logger
  has none the first time TensorFlow logs.
  """
  script = _write_script(tmp_path, _CONFIGURES_LOGGING)
  expected, actual = (
      run(script, how, cwd=tmp_path) for run in (_python, _patched))
  assert expected.returncode == actual.returncode == 0, actual.stderr
  assert _without_tensorflow_start_up(
      actual.stderr) == (_without_tensorflow_start_up(expected.stderr))
  lines = [
      line for line in actual.stderr.splitlines()
      if "a line from TensorFlow's" in line
  ]
  assert len(lines) == 1, actual.stderr
  assert actual.stdout == "tf_objckpt.checkpoint\n"


_PYTEST_FILE = """
import tensorflow as tf

def test_logs():
  tf.get_logger().warning("logged %s", "in a test")
  assert tf.train.Checkpoint.__module__ == "fails to show the captured log"
"""


def test_pytest_captures_each_line_once(tmp_path):
  (tmp_path / "logs_test.py").write_text(_PYTEST_FILE)
  pytest_script = os.path.join(os.path.dirname(sys.executable), "pytest")
  if not os.path.exists(pytest_script):
    pytest.skip("pytest is not installed next to this Python")
  args = [pytest_script, "-q", "-p", "no:cacheprovider", "logs_test.py"]
  expected, actual = (run(*args, cwd=tmp_path) for run in (_python, _patched))
  assert expected.returncode == actual.returncode == 1
  assert "AssertionError: assert 'tf_objckpt.checkpoint' == " in actual.stdout
  logged = [[
      line for line in output.stdout.splitlines() if "logged in a test" in line
  ] for output in (expected, actual)]
  assert logged[1] == logged[0]
  assert len(logged[1]) == 1, actual.stdout


def test_usage_shows_the_arguments_optional(tmp_path):
  result = tl.run_cli("run")
  assert result.returncode == 2
  assert result.stderr == (
      "usage: tf-objckpt run [-h] SCRIPT [ARGS ...]\n"
      "tf-objckpt run: error: the following arguments are required: SCRIPT\n")
  script = _write_script(tmp_path, "print('no arguments')\n")
  result = tl.run_cli("run", script, cwd=tmp_path)
  assert (result.returncode, result.stdout) == (0, "no arguments\n")


def test_the_console_script_runs_it_too(tmp_path):
  console_script = os.path.join(os.path.dirname(sys.executable), "tf-objckpt")
  if not os.path.exists(console_script):
    pytest.skip("tf-objckpt is not installed next to this Python")
  script = _write_script(tmp_path, _SHOW + "sys.exit(5)\n")
  result = _run([console_script, "run", script, "x"], tmp_path)
  assert result.returncode == 5, result.stderr[-3000:]
  view = json.loads(result.stdout)
  assert view["checkpoint"] == "tf_objckpt.checkpoint"
  assert view["argv"] == [script, "x"]
  assert view["path0"] == str(tmp_path / "project")
