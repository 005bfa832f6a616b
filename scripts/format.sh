#!/usr/bin/env bash
# Formats every Python file of the repository in place with yapf
# (.style.yapf), in .venvs/lint; scripts/lint.sh checks the result.
source "$(dirname "${BASH_SOURCE[0]}")/lint_tools.sh"
"$LINT_VENV/bin/yapf" --in-place --recursive --parallel \
    tf_objckpt tests benchmarks examples scripts setup.py conftest.py
