#!/usr/bin/env bash
# Sets up .venv if needed, then runs the whole test suite (or the pytest
# arguments given instead of `tests`). Running no test counts as a failure.
source "$(dirname "${BASH_SOURCE[0]}")/setup_venv.sh"

status=0
.venv/bin/python -m pytest -q -p no:cacheprovider "${@:-tests}" || status=$?
if [ "$status" -eq 5 ]; then
  echo "run_tests.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$status"
