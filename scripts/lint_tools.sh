#!/usr/bin/env bash
# Makes .venvs/lint, the style checkers' own environment (no TensorFlow),
# with the pinned yapf, ruff and mypy, if it is missing or out of date.
# Sourced by scripts/lint.sh and scripts/format.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
LINT_VENV=.venvs/lint
LINT_PINS=(yapf==0.43.0 ruff==0.17.6 mypy==2.4.1)
if [ "$(cat "$LINT_VENV/.pins" 2>/dev/null)" != "${LINT_PINS[*]}" ]; then
  python3 -m venv "$LINT_VENV"
  "$LINT_VENV/bin/python" -m pip install -q "${LINT_PINS[@]}"
  printf '%s' "${LINT_PINS[*]}" > "$LINT_VENV/.pins"
fi
