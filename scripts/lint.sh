#!/usr/bin/env bash
# Checks formatting (yapf, .style.yapf), lints (ruff, ruff.toml) and
# type-checks the package (mypy, mypy.ini) in .venvs/lint; fails if any
# check finds something. scripts/format.sh fixes the formatting.
source "$(dirname "${BASH_SOURCE[0]}")/lint_tools.sh"
PYTHON_DIRS=(tf_objckpt tests benchmarks examples scripts setup.py conftest.py)
status=0
echo "=== yapf (formatting; scripts/format.sh fixes it)"
"$LINT_VENV/bin/yapf" --diff --recursive --parallel "${PYTHON_DIRS[@]}" \
    || status=1
echo "=== ruff"
"$LINT_VENV/bin/ruff" check --quiet "${PYTHON_DIRS[@]}" || status=1
echo "=== mypy"
"$LINT_VENV/bin/mypy" || status=1
exit "$status"
