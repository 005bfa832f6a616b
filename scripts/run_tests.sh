#!/usr/bin/env bash
# Sets up .venv (or the environment scripts/test_tf_version.sh names) if
# needed, then runs the whole test suite (or the pytest arguments given
# instead of `tests`). Running no test counts as a failure.
source "$(dirname "${BASH_SOURCE[0]}")/setup_venv.sh"

# The whole suite runs on up to four cores (pytest-xdist), each test file on
# one of them; given arguments, tests run in this process unless
# TF_OBJCKPT_TEST_WORKERS says how many processes to use.
cores="$(nproc 2>/dev/null || echo 1)"
workers="${TF_OBJCKPT_TEST_WORKERS:-$([ "$#" -eq 0 ] && echo $((cores < 4 ? cores : 4)) || echo 1)}"
parallel=()
if [ "$workers" -gt 1 ]; then
  parallel=(-n "$workers" --dist loadfile)
fi

status=0
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "${parallel[@]}" \
    "${@:-tests}" || status=$?
if [ "$status" -eq 5 ]; then
  echo "run_tests.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$status"
