#!/usr/bin/env bash
# The whole test suite, all set-up included: lint, ansible-test sanity, unit
# tests, Ansible integration tests against real processes and the real vLLM CPU
# engine, and the molecule scenario on systemd containers. One pytest session,
# so the run ends with one summary line.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
started=$SECONDS
prepare_controller
# tests/conftest.py prints each stage's time at the end, this set-up's among them.
export LLMOPS_PREPARE_SECONDS=$((SECONDS - started))
# --durations: the slowest tests, where a stage that grows shows first (docs/development.md, "Time").
exec python -m pytest -p no:cacheprovider --durations=15 "$@" \
  tests/unit tests/lint tests/integration tests/molecule
