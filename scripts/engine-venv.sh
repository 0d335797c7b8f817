#!/usr/bin/env bash
# A controller venv with the real CPU engine, for the integration tests that run
# `vllm serve` directly and for building the tiny models (torch + transformers).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
stamp="$ENGINE_VENV/.complete"
[[ -f "$stamp" ]] && exit 0
log "engine venv $ENGINE_VENV"
rm -rf "$ENGINE_VENV"
"$PY" -m venv "$ENGINE_VENV"
"$ENGINE_VENV/bin/pip" install -q --no-index --find-links "$WHEELHOUSE" -U pip
"$ENGINE_VENV/bin/pip" install -q --no-index --find-links "$WHEELHOUSE" "$ENGINE_SPEC"
# CUDA-only companions that break `import transformers` on a CPU torch, and a
# triton without a CPU backend.
"$ENGINE_VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec triton
touch "$stamp"
