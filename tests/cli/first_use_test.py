"""The command line as a newcomer meets it: quick, quiet, forgiving of paths.

Each test runs the real command in a fresh process. `--help`, `--version`
and usage errors answer without importing TensorFlow; commands print their
own output only, TensorFlow's log lines included only with `--verbose`; a
checkpoint's `.index` or data file stands for its prefix; a prefix without
its index is a damaged checkpoint; a directory without a state file lists
the checkpoints it holds.

Covers: tf_objckpt, tf_objckpt.__main__, tf_objckpt.version,
tf_objckpt.tools.cli, tf_objckpt.inspection.checkpoint_listing.
"""

import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt

_DATA = ".data-00000-of-00001"


def _python(*args):
  """Runs `python ARGS...` as the tool's tests do, with no log level set."""
  env = tl.child_env()
  del env["TF_CPP_MIN_LOG_LEVEL"]
  return subprocess.run([sys.executable, *args],
                        capture_output=True,
                        text=True,
                        env=env,
                        timeout=300,
                        check=False)


@pytest.fixture(name="written")
def _written(tmp_path):
  """Two checkpoints written by `write()` in one directory, no state file."""
  checkpoint = tf_objckpt.Checkpoint(kernel=tf.Variable(
      np.ones((3, 2), np.float32)),
                                     bias=tf.Variable([0.5]))
  return [checkpoint.write(str(tmp_path / name)) for name in ("one", "two")]


@pytest.mark.parametrize("args,code", [(["--help"], 0),
                                       (["verify", "--help"], 0),
                                       (["--version"], 0), (["inspect"], 2),
                                       (["diff", "a", "b", "--atol", "x"], 2)])
def test_help_version_and_usage_errors_do_not_import_tensorflow(args, code):
  start = time.monotonic()
  result = _python("-X", "importtime", "-m", "tf_objckpt", *args)
  seconds = time.monotonic() - start
  assert result.returncode == code, result.stderr[-2000:]
  imported = [
      line.rsplit("|", 1)[-1].strip()
      for line in result.stderr.splitlines()
      if line.startswith("import time:")
  ]
  assert "tf_objckpt" in imported
  assert not [name for name in imported if name.startswith("tensorflow")]
  assert seconds < 2, seconds  # Importing TensorFlow alone takes ~3 s here.
  if code == 0:
    assert "import time:" not in result.stdout
  else:
    assert "usage: tf-objckpt" in result.stderr


def test_the_version_is_one_for_the_package_the_command_and_setup_py():
  version = tf_objckpt.__version__
  assert re.fullmatch(r"\d+\.\d+\.\d+", version)
  for result in (tl.run_cli("--version"),
                 tl.run_cli("--version", console_script=True)):
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"tf-objckpt {version}\n"
    assert result.stderr == ""
  setup = subprocess.run([sys.executable, "setup.py", "--version"],
                         cwd=tl.REPO_ROOT,
                         capture_output=True,
                         text=True,
                         timeout=300,
                         check=False)
  assert setup.stdout.splitlines()[-1] == version, setup.stderr


def test_the_package_imports_tensorflow_only_when_a_name_needs_it():
  result = _python(
      "-c", "import sys, tf_objckpt\n"
      "print('tensorflow' in sys.modules)\n"
      "tf_objckpt.Checkpoint\n"
      "print('tensorflow' in sys.modules)\n"
      "print(tf_objckpt.Checkpoint is tf_objckpt.util.Checkpoint)")
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.split() == ["False", "True", "True"]


def test_commands_print_only_their_own_output(written, tmp_path):
  prefix = written[0]
  for args in (["inspect",
                prefix], ["inspect", prefix,
                          "--keys"], ["verify",
                                      prefix], ["diff", prefix, written[1]]):
    result = tl.run_cli(*args)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", args
  with open(prefix + _DATA, "r+b") as f:
    f.seek(2)
    byte = f.read(1)
    f.seek(2)
    f.write(bytes([byte[0] ^ 0xFF]))
  damaged = tl.run_cli("verify", prefix)
  assert damaged.returncode == 1
  assert damaged.stderr == ""
  assert "cannot be read: DataLossError" in damaged.stdout
  verbose = tl.run_cli("verify", prefix, "--verbose")
  assert verbose.returncode == 1
  assert verbose.stdout.split(" in ")[0] == damaged.stdout.split(" in ")[0]
  assert "OP_REQUIRES failed" in verbose.stderr


@pytest.mark.parametrize("suffix", [".index", _DATA])
def test_a_file_of_a_checkpoint_means_its_prefix(written, suffix):
  prefix = written[0]
  by_prefix = tl.run_cli("inspect", prefix)
  by_file = tl.run_cli("inspect", prefix + suffix)
  assert by_file.returncode == 0, by_file.stderr
  assert by_file.stdout == by_prefix.stdout
  assert by_file.stderr == (f"{prefix + suffix!r} is a file of checkpoint "
                            f"{prefix!r}; using that checkpoint.\n")
  verified = tl.run_cli("verify", prefix + suffix)
  assert verified.returncode == 0
  assert verified.stdout.startswith(
      f"{prefix}: read 2 values and the object graph (")


def test_a_prefix_without_its_index_is_a_damaged_checkpoint(written):
  prefix = written[0]
  os.remove(prefix + ".index")
  with pytest.raises(tf.errors.NotFoundError):
    tf.train.load_checkpoint(prefix)
  for path in (prefix, prefix + ".index", prefix + _DATA):
    result = tl.run_cli("verify", path)
    assert result.returncode == 1, result.stderr
    assert (f"tf-objckpt verify: DataLossError: Damaged checkpoint "
            f"{prefix!r}: {prefix + '.index'!r} is missing, while its data "
            f"files are there: {prefix + _DATA}.\n") in result.stderr
  absent = tl.run_cli("verify", prefix + "-7")
  assert absent.returncode == 2
  assert "No checkpoint found" in absent.stderr


def test_a_directory_without_a_state_file_lists_its_checkpoints(
    written, tmp_path):
  assert tf.train.latest_checkpoint(str(tmp_path)) is None
  result = tl.run_cli("inspect", tmp_path)
  assert result.returncode == 2
  assert result.stderr == (
      f"tf-objckpt inspect: {str(tmp_path)!r} is a directory without "
      "checkpoints (no 'checkpoint' state file names one); it holds 2 "
      f"checkpoints, give one as the path: {written[0]}, {written[1]}\n")
