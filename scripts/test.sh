#!/usr/bin/env bash
# The whole test suite, all set-up included: lint, ansible-test sanity, unit
# tests, Ansible integration tests against real processes and the real vLLM CPU
# engine, and the molecule scenario on systemd containers. One pytest session,
# so the run ends with one summary line.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
prepare_controller
exec python -m pytest -p no:cacheprovider "$@" \
  tests/unit tests/lint tests/integration tests/molecule
