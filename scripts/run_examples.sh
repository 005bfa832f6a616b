#!/usr/bin/env bash
# Sets up .venv if needed, then runs every examples/*.py end to end; each one
# checks its own results and exits non-zero on a mismatch.
source "$(dirname "${BASH_SOURCE[0]}")/setup_venv.sh"

shopt -s nullglob
examples=(examples/*.py)
if [ "${#examples[@]}" -eq 0 ]; then
  echo "run_examples.sh: no examples/*.py found" >&2
  exit 1
fi
for example in "${examples[@]}"; do
  echo "=== $example"
  .venv/bin/python "$example"
done
echo "All ${#examples[@]} examples passed."
