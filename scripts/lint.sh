#!/usr/bin/env bash
# Checks formatting (yapf, .style.yapf), lints (ruff, ruff.toml) and
# type-checks the package (mypy, mypy.ini) in .venvs/lint; fails if any
# check finds something. scripts/format.sh fixes the formatting.
#
# Arguments name the checks to run, by default all three (as .ci/run does):
#   scripts/lint.sh ruff mypy    # lint and type-check only
#   scripts/lint.sh format       # formatting only
source "$(dirname "${BASH_SOURCE[0]}")/lint_tools.sh"
PYTHON_DIRS=(tf_objckpt tests benchmarks examples scripts setup.py conftest.py)

check_format() {
  echo "=== yapf (formatting; scripts/format.sh fixes it)"
  "$LINT_VENV/bin/yapf" --diff --recursive --parallel "${PYTHON_DIRS[@]}"
}

check_ruff() {
  echo "=== ruff"
  "$LINT_VENV/bin/ruff" check --quiet "${PYTHON_DIRS[@]}"
}

check_mypy() {
  echo "=== mypy"
  "$LINT_VENV/bin/mypy"
}

if [ "$#" -eq 0 ]; then
  set -- format ruff mypy
fi
status=0
for check in "$@"; do
  case "$check" in
    format|ruff|mypy) "check_$check" || status=1 ;;
    *) echo "lint.sh: unknown check $check (format, ruff or mypy)" >&2
       exit 2 ;;
  esac
done
exit "$status"
