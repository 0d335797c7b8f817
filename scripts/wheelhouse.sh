#!/usr/bin/env bash
# The controller-side wheelhouse for the CPU engine: hosts install from it with
# --no-index, so they need no package index. Built once per engine version.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
stamp="$WHEELHOUSE/.complete"
[[ -f "$stamp" ]] && exit 0
log "wheelhouse $WHEELHOUSE"
mkdir -p "$WHEELHOUSE"
"$PY" -m pip download -q -d "$WHEELHOUSE" "$ENGINE_SPEC" pip setuptools wheel
touch "$stamp"
