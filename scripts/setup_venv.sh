#!/usr/bin/env bash
# Makes a virtual environment if missing and installs tf_objckpt (editable)
# with the pinned TensorFlow and the test deps. Run directly, or sourced by
# scripts/run_*.sh. By default that is .venv with TensorFlow 2.21;
# scripts/test_tf_version.sh sets TF_OBJCKPT_VENV and TF_OBJCKPT_PINS to
# another directory and another TensorFlow. The environment is made with a
# Python the pinned TensorFlow supports (3.11, the one tests and CI run on,
# if there is one; or PYTHON=/path/to/python3.X); an existing one is kept.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export TF_CPP_MIN_LOG_LEVEL=2
export PIP_DISABLE_PIP_VERSION_CHECK=1
VENV="${TF_OBJCKPT_VENV:-.venv}"
read -r -a PINS <<< "${TF_OBJCKPT_PINS:-tensorflow==2.21.0 tf-keras==2.21.0}"

# The Pythons the pinned TensorFlow has wheels for, the tested one (3.11,
# which every supported TensorFlow runs on) first.
case "${PINS[*]}" in
  *tensorflow==2.15.*) versions="3.11 3.10 3.9" ;;
  *tensorflow==2.1[6-9].*) versions="3.11 3.12 3.10 3.9" ;;
  *) versions="3.11 3.12 3.13 3.10" ;;
esac

# Prints the Python to make the environment with: $PYTHON if set, else the
# first `python3.X` of $versions on the PATH, else `python3` if it is one.
find_python() {
  if [ -n "${PYTHON:-}" ]; then
    echo "$PYTHON"
    return
  fi
  local version
  for version in $versions; do
    if command -v "python$version" > /dev/null; then
      echo "python$version"
      return
    fi
  done
  version="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' \
             2> /dev/null || true)"
  if [ -n "$version" ] && [[ " $versions " == *" $version "* ]]; then
    echo python3
    return
  fi
  echo "setup_venv.sh: no Python for ${PINS[*]}: install one of Python" \
       "$versions (3.11 is the one tested), or name one in PYTHON=..." >&2
  return 1
}

if [ ! -x "$VENV/bin/python" ]; then
  python="$(find_python)"
  echo "setup_venv.sh: making $VENV with $python" \
       "($("$python" --version 2>&1))" >&2
  "$python" -m venv "$VENV"
fi
# Reinstall only when setup.py or the pins change.
stamp="$(cat setup.py; echo "${PINS[@]}")"
if [ "$(cat "$VENV/.tf_objckpt_installed" 2>/dev/null)" != "$stamp" ]; then
  "$VENV/bin/python" -m pip install -q -e '.[test]' "${PINS[@]}"
  printf '%s' "$stamp" > "$VENV/.tf_objckpt_installed"
fi
