"""`python -m tf_objckpt run SCRIPT [ARGS...]` runs a script as Python would.

Each script runs both ways, `python SCRIPT ARGS...` and through `run`, from
the same working directory: it sees the same `__name__`, `__file__`,
arguments and `sys.path[0]`, prints the same, and exits the same (status,
`sys.exit` message, traceback of an uncaught exception), except that under
`run` TensorFlow's checkpoint classes are ours. The console script
`tf-objckpt run` does the same.
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
    "name": __name__, "file": __file__, "argv": sys.argv[1:],
    "argv0": os.path.abspath(sys.argv[0]), "path0": sys.path[0],
    "checkpoint": tf.train.Checkpoint.__module__}))
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
  return subprocess.run(command, capture_output=True, text=True, cwd=cwd,
                        env=tl.child_env(TF_CPP_MIN_LOG_LEVEL="3"),
                        timeout=300, check=False)


def _python(script, *args, cwd):
  return _run([sys.executable, script, *args], cwd)


def _patched(script, *args, cwd):
  return _run([sys.executable, "-m", "tf_objckpt", "run", script, *args], cwd)


def _without_tensorflow_start_up(stderr):
  """stderr without the C++ lines TensorFlow logs as it starts."""
  return [line for line in stderr.splitlines()
          if not line.startswith(("WARNING: All log messages", "I0000",
                                  "E0000", "W0000"))]


def test_the_script_sees_what_python_shows_it_but_our_classes(tmp_path):
  script = _write_script(tmp_path, _SHOW)
  args = ["data.csv", "--epochs", "3", "--help"]
  expected = _python(script, *args, cwd=tmp_path)
  actual = _patched(script, *args, cwd=tmp_path)
  assert expected.returncode == actual.returncode == 0, actual.stderr[-3000:]
  expected_view, actual_view = (json.loads(expected.stdout),
                                json.loads(actual.stdout))
  assert expected_view.pop("checkpoint") == "tensorflow.python.checkpoint.checkpoint"
  assert actual_view.pop("checkpoint") == "tf_objckpt.checkpoint"
  assert actual_view == expected_view
  assert actual_view["name"] == "__main__"
  assert actual_view["path0"] == str(tmp_path / "project")
  assert _without_tensorflow_start_up(actual.stderr) == (
      _without_tensorflow_start_up(expected.stderr))


@pytest.mark.parametrize("how", sorted(_EXITS))
def test_exit_status_and_errors_are_the_scripts(tmp_path, how):
  text, code = _EXITS[how]
  script = _write_script(tmp_path, text)
  expected = _python(script, cwd=tmp_path)
  actual = _patched(script, cwd=tmp_path)
  assert expected.returncode == actual.returncode == code
  assert actual.stdout == expected.stdout
  assert _without_tensorflow_start_up(actual.stderr) == (
      _without_tensorflow_start_up(expected.stderr))


def test_a_missing_script_is_a_usage_error(tmp_path):
  result = _patched("missing.py", cwd=tmp_path)
  assert result.returncode == 2
  assert "can't open file" in result.stderr
  assert "missing.py" in result.stderr


def test_the_console_script_runs_it_too(tmp_path):
  console_script = os.path.join(os.path.dirname(sys.executable), "tf-objckpt")
  if not os.path.exists(console_script):
    pytest.skip("tf-objckpt is not installed next to this Python")
  script = _write_script(tmp_path, _SHOW + "sys.exit(5)\n")
  result = _run([console_script, "run", script, "x"], tmp_path)
  assert result.returncode == 5, result.stderr[-3000:]
  view = json.loads(result.stdout)
  assert view["checkpoint"] == "tf_objckpt.checkpoint"
  assert view["argv"] == ["x"]
  assert view["path0"] == str(tmp_path / "project")
