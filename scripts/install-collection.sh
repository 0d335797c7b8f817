#!/usr/bin/env bash
# Install this checkout as the collection llmops.vllm into .build/collections,
# so playbooks and molecule resolve llmops.vllm.* to the working tree as it is now.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
activate_tools
mkdir -p "$BUILD/collections"
ansible-galaxy collection install --force -p "$BUILD/collections" "$ROOT" >"$BUILD/collection-install.log" 2>&1 \
  || { cat "$BUILD/collection-install.log" >&2; exit 1; }
