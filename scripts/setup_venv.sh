#!/usr/bin/env bash
# Makes a virtual environment if missing and installs tf_objckpt (editable)
# with the pinned TensorFlow and the test deps. Run directly, or sourced by
# scripts/run_*.sh. By default that is .venv with TensorFlow 2.21;
# scripts/test_tf_version.sh sets TF_OBJCKPT_VENV and TF_OBJCKPT_PINS to
# another directory and another TensorFlow.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export TF_CPP_MIN_LOG_LEVEL=2
export PIP_DISABLE_PIP_VERSION_CHECK=1
VENV="${TF_OBJCKPT_VENV:-.venv}"
read -r -a PINS <<< "${TF_OBJCKPT_PINS:-tensorflow==2.21.0 tf-keras==2.21.0}"

if [ ! -x "$VENV/bin/python" ]; then
  python3.11 -m venv "$VENV"
fi
# Reinstall only when setup.py or the pins change.
stamp="$(cat setup.py; echo "${PINS[@]}")"
if [ "$(cat "$VENV/.tf_objckpt_installed" 2>/dev/null)" != "$stamp" ]; then
  "$VENV/bin/python" -m pip install -q -e '.[test]' "${PINS[@]}"
  printf '%s' "$stamp" > "$VENV/.tf_objckpt_installed"
fi
