"""Distributed tests: a time limit per test, enforced with SIGALRM.

Each test's child processes are killed with their process groups when the
limit interrupts it (`testlib.finish`), and when pytest itself dies
(`PR_SET_PDEATHSIG`, see `testlib.start_python`).
"""

import pytest

import testlib as tl

# Seconds a distributed test may take, children included.
TIME_LIMIT_SECONDS = 180


@pytest.fixture(autouse=True)
def time_limit(request):
  """Fails the test (raising in it) once it has run `TIME_LIMIT_SECONDS`."""
  limit = getattr(request.module, "TIME_LIMIT_SECONDS", TIME_LIMIT_SECONDS)
  with tl.time_limit(limit, request.node.nodeid):
    yield
