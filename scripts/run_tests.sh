#!/usr/bin/env bash
# Sets up .venv (or the environment scripts/test_tf_version.sh names) if
# needed, then runs the whole test suite (or the pytest
# arguments given instead of `tests`). Running no test counts as a failure.
source "$(dirname "${BASH_SOURCE[0]}")/setup_venv.sh"

status=0
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "${@:-tests}" || status=$?
if [ "$status" -eq 5 ]; then
  echo "run_tests.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$status"
