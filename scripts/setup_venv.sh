#!/usr/bin/env bash
# Makes .venv if missing and installs tf_objckpt (editable) with the pinned
# TensorFlow and the test deps. Run directly, or sourced by scripts/run_*.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export TF_CPP_MIN_LOG_LEVEL=2
export PIP_DISABLE_PIP_VERSION_CHECK=1
PINS=(tensorflow==2.21.0 tf-keras==2.21.0)

if [ ! -x .venv/bin/python ]; then
  python3.11 -m venv .venv
fi
# Reinstall only when setup.py or the pins change.
stamp="$(cat setup.py; echo "${PINS[@]}")"
if [ "$(cat .venv/.tf_objckpt_installed 2>/dev/null)" != "$stamp" ]; then
  .venv/bin/python -m pip install -q -e '.[test]' "${PINS[@]}"
  printf '%s' "$stamp" > .venv/.tf_objckpt_installed
fi
