"""Distributed tests: a time limit per test, enforced with SIGALRM.

Each test's child processes are killed with their process groups when the
limit interrupts it (`testlib.finish`), and when pytest itself dies
(`PR_SET_PDEATHSIG`, see `testlib.start_python`).
"""

import signal

import pytest

# Seconds a distributed test may take, children included.
TIME_LIMIT_SECONDS = 180


@pytest.fixture(autouse=True)
def time_limit(request):
  """Fails the test (raising in it) once it has run `TIME_LIMIT_SECONDS`."""
  limit = getattr(request.module, "TIME_LIMIT_SECONDS", TIME_LIMIT_SECONDS)

  def expire(signum, frame):
    del signum, frame
    raise TimeoutError(f"{request.node.nodeid} ran over {limit} seconds")

  previous = signal.signal(signal.SIGALRM, expire)
  signal.alarm(limit)
  try:
    yield
  finally:
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)
