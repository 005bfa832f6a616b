#!/usr/bin/env bash
# Runs the test suite (or the pytest arguments given instead of `tests`)
# under one TensorFlow version, in that version's own virtual environment
# .venvs/tf-VERSION, which is made and installed on first use and reused
# after (scripts/setup_venv.sh). Each version pins the tf_keras of its
# release, and Keras: Keras 2 on 2.15, which ships it as tf.keras, and a
# Keras 3 of the same months on 2.16. 2.21 is the default .venv.
#
#   scripts/test_tf_version.sh 2.15 tests/graph -k saver
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

case "${1:-}" in
  2.15) pins="tensorflow==2.15.1 tf-keras==2.15.1 keras==2.15.0" ;;
  2.16) pins="tensorflow==2.16.2 tf-keras==2.16.0 keras==3.3.3" ;;
  2.18) pins="tensorflow==2.18.1 tf-keras==2.18.0 keras==3.15.1" ;;
  2.21) exec scripts/run_tests.sh "${@:2}" ;;
  *)
    echo "usage: $0 {2.15|2.16|2.18|2.21} [pytest arguments]" >&2
    exit 2
    ;;
esac
export TF_OBJCKPT_VENV=".venvs/tf-$1" TF_OBJCKPT_PINS="$pins"
exec scripts/run_tests.sh "${@:2}"
