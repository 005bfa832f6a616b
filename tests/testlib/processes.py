"""Child processes: Python, the command line tool, time limits.

Children import tf_objckpt and testlib (`child_env`). Long-running ones
start in their own process group and die with the test process
(`start_python`), so nothing outlives a failed or interrupted test.
"""

import contextlib
import ctypes
import functools
import os
import random
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback

# The checkout (or Bazel's runfiles tree) the tests run from.
REPO_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PR_SET_PDEATHSIG = 1


@contextlib.contextmanager
def time_limit(seconds, what="the block"):
  """Raises `TimeoutError` in the block once it has run `seconds` (SIGALRM)."""

  def expire(signum, frame):
    del signum, frame
    raise TimeoutError(f"{what} ran over {seconds} seconds")

  previous = signal.signal(signal.SIGALRM, expire)
  signal.alarm(seconds)
  try:
    yield
  finally:
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def run_python(script, *args, timeout=300, wrapper=()):
  """Runs `script` in a new Python with tf_objckpt and testlib importable.

  `wrapper` is a command line that runs the Python command line appended to
  it (for example, in a namespace of its own).

  Returns:
    Its `subprocess.CompletedProcess`; output is captured as text.
  """
  return subprocess.run(
      [*wrapper, sys.executable, "-c", script, *map(str, args)],
      capture_output=True,
      text=True,
      env=child_env(),
      timeout=timeout,
      check=False)


def child_env(**extra):
  """The environment of a child Python importing tf_objckpt and testlib."""
  path = os.pathsep.join([
      REPO_ROOT,
      os.path.join(REPO_ROOT, "tests"),
      os.environ.get("PYTHONPATH", "")
  ])
  return dict(os.environ, **{
      "PYTHONPATH": path,
      "TF_CPP_MIN_LOG_LEVEL": "2",
      **extra
  })


def run_cli(*args, timeout=300, cwd=None, console_script=False):
  """Runs the command line tool, `python -m tf_objckpt ARGS...`.

  Modules in `cwd` (the working directory) can be imported by the command.
  With `console_script`, the `tf-objckpt` script that pip makes of the
  package's entry point runs instead (its own folder first on `sys.path`).
  TF_CPP_MIN_LOG_LEVEL is not set: the tool keeps TensorFlow quiet itself.

  Returns:
    Its `subprocess.CompletedProcess`; output is captured as text.
  """
  env = child_env()
  del env["TF_CPP_MIN_LOG_LEVEL"]
  command = ([sys.executable, _console_script()]
             if console_script else [sys.executable, "-m", "tf_objckpt"])
  return subprocess.run([*command, *map(str, args)],
                        capture_output=True,
                        text=True,
                        env=env,
                        cwd=cwd,
                        timeout=timeout,
                        check=False)


@functools.cache
def _console_script():
  """A `tf-objckpt` script as pip writes it for the entry point `cli:run`."""
  path = os.path.join(tempfile.mkdtemp(), "tf-objckpt")
  with open(path, "w") as f:
    f.write("import sys\nfrom tf_objckpt.tools.cli import run\n"
            "if __name__ == '__main__':\n  sys.exit(run())\n")
  return path


def _die_with_parent():
  """In a child before exec: own process group, killed when the parent dies."""
  os.setpgrp()
  libc = ctypes.CDLL(None, use_errno=True)
  libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def start_python(args, env=None, capture=True, stdin=None, stderr=None):
  """Starts Python on `args` in its own process group, dying with us.

  Args:
    args: The script and its arguments.
    env: Its environment (default: `child_env()`).
    capture: Whether to pipe its output (to be read); otherwise dropped,
      so that a long-running server never blocks on a full pipe.
    stdin: Its standard input (`subprocess.PIPE` to write to it).
    stderr: Where its standard error goes instead (a file, say, for a
      child whose output is read line by line while it runs).

  Returns:
    The `subprocess.Popen`; stop it with `kill_group`.
  """
  output = subprocess.PIPE if capture else subprocess.DEVNULL
  return subprocess.Popen(
      [sys.executable, *map(str, args)],
      stdin=stdin,
      stdout=output,
      stderr=output if stderr is None else stderr,
      text=True,
      env=env or child_env(),
      preexec_fn=_die_with_parent)  # noqa: PLW1509  # Two system calls.


def read_line(process, timeout):
  """The next line `process` prints, stripped; fails after `timeout` s."""
  ready, _, _ = select.select([process.stdout], [], [], timeout)
  assert ready, f"no line from the child in {timeout} s"
  line = process.stdout.readline()
  assert line, f"the child ended (exit code {process.wait()})"
  return line.strip()


def kill_group(process):
  """Kills `process` and everything in its process group."""
  try:
    os.killpg(process.pid, signal.SIGKILL)
  except ProcessLookupError:
    pass
  process.wait()


def finish(process, timeout):
  """Waits for `process` (killing its group on timeout); returns its output.

  Returns:
    (return code, stdout, stderr); the code is None after a timeout.
  """
  try:
    stdout, stderr = process.communicate(timeout=timeout)
    return process.returncode, stdout, stderr
  except subprocess.TimeoutExpired:
    kill_group(process)
    stdout, stderr = process.communicate()
    return None, stdout, stderr
  finally:
    if process.poll() is None:
      kill_group(process)


def terminate_after_line(process, line, timeout=60):
  """Sends SIGTERM to `process` once it prints `line`; waits for its end.

  Returns:
    (return code, stderr); the code is None after a timeout.
  """
  for printed in process.stdout:
    if printed.strip() == line:
      process.send_signal(signal.SIGTERM)
      break
  code, _, stderr = finish(process, timeout)
  return code, stderr


def kill_forked_workers(work, kills, seed, ready, after_kill=None):
  """Forks `work` `kills` times, each killed with SIGKILL at a random moment.

  For a child program that imported TensorFlow once: each worker is a fork
  running `work()`, which never returns (an exception exits it with status
  2). Once `ready()` is true (a worker saved, say; at most 120 s later, on
  a loaded machine), it is killed after 0.1 to 0.6 s, drawn from `seed`.

  Returns:
    Per worker, how it ended (minus the signal that killed it, or its exit
    status) and what `after_kill()` returned once it was dead (or None).
  """
  rng = random.Random(seed)
  ends = []
  for _ in range(kills):
    pid = os.fork()
    if pid == 0:
      try:
        work()
      except BaseException:  # pylint: disable=broad-except
        traceback.print_exc()
      os._exit(2)  # pylint: disable=protected-access
    deadline = time.time() + 120
    while not ready() and time.time() < deadline:
      time.sleep(0.01)
    time.sleep(rng.uniform(0.1, 0.6))
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    ended = (-os.WTERMSIG(status)
             if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
    ends.append((ended, after_kill() if after_kill else None))
  return ends
