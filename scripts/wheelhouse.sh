#!/usr/bin/env bash
# The controller-side wheelhouse for the CPU engine: hosts install from it with
# --no-index, so they need no package index. It holds both releases of
# requirements/engine.txt (the one the tests run and the one molecule fleet
# upgrades from), each resolved on its own: they pin different transformers.
# Built once per pair of releases.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
stamp="$WHEELHOUSE/.complete"
[[ -f "$stamp" ]] && exit 0
log "wheelhouse $WHEELHOUSE"
mkdir -p "$WHEELHOUSE"
"$PY" -m pip download -q -d "$WHEELHOUSE" "$ENGINE_SPEC" pip setuptools wheel
"$PY" -m pip download -q -d "$WHEELHOUSE" "$ENGINE_FROM_SPEC"
touch "$stamp"
