#!/usr/bin/env bash
# Everything the tests and the demo need on a fresh Debian/Ubuntu machine, as root:
# system packages, dockerd, the controller tool venv, the vendored collections,
# the engine wheelhouse and venv, and the systemd base image. Each step is
# skipped when its cached result (keyed by version) is already there.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need_pkgs=()
command -v dockerd >/dev/null || need_pkgs+=(docker.io)
command -v debootstrap >/dev/null || need_pkgs+=(debootstrap)
command -v git >/dev/null || need_pkgs+=(git)
command -v systemd-analyze >/dev/null || need_pkgs+=(systemd)   # the unit tests verify rendered units
command -v shellcheck >/dev/null || need_pkgs+=(shellcheck)   # ansible-test sanity checks the scripts
command -v haproxy >/dev/null || need_pkgs+=(haproxy)   # the front door tests run Debian's HAProxy on loopback
command -v logrotate >/dev/null || need_pkgs+=(logrotate)   # the tests read the rendered rotation with logrotate -d
"$PY" -c 'import ensurepip, venv' 2>/dev/null || need_pkgs+=(python3-venv)
ldconfig -p | grep -q 'libnuma.so.1 ' || need_pkgs+=(libnuma1)
if ((${#need_pkgs[@]})); then
  log "apt: ${need_pkgs[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need_pkgs[@]}" \
    iptables ca-certificates
fi

"$ROOT/scripts/docker-up.sh"

# The engine's parts (the wheelhouse, then the venv the integration tests run and the tiny models) and the base
# image of the molecule hosts (debootstrap) wait on the network and a core each, not on the tool venvs: they run
# beside them, each logging to its own file, shown once it ends (all of it if it failed). On a new machine that
# took the set-up from 4 min 53 s (one after the other) down by their overlap.
background_pids=()
background_logs=()
in_background() {   # name, command...
  local name="$1"
  shift
  mkdir -p "$CACHE"
  ("$@") >"$CACHE/set-up-$name.log" 2>&1 &
  background_pids+=("$!")
  background_logs+=("$CACHE/set-up-$name.log")
}
engine_parts() {
  set -euo pipefail
  "$ROOT/scripts/wheelhouse.sh"
  "$ROOT/scripts/engine-venv.sh"
  if [[ ! -f "$MODELS/.complete" ]]; then
    log "tiny target model and DFlash drafter in $MODELS"
    rm -rf "$MODELS"
    HF_HUB_OFFLINE=1 "$ENGINE_VENV/bin/python" "$ROOT/tests/fixtures/models/make_tiny_models.py" "$MODELS" >/dev/null
    touch "$MODELS/.complete"
  fi
}
in_background engine engine_parts
in_background base-image "$ROOT/scripts/base-image.sh"

if [[ ! -x "$TOOLS_VENV/bin/molecule" ]]; then
  log "tool venv $TOOLS_VENV"
  rm -rf "$TOOLS_VENV"
  "$PY" -m venv "$TOOLS_VENV"
  "$TOOLS_VENV/bin/pip" install -q -U pip
  "$TOOLS_VENV/bin/pip" install -q -r "$ROOT/requirements/tools.txt"
fi

if [[ ! -x "$SANITY_VENV/bin/ansible-test" ]]; then
  log "sanity venv $SANITY_VENV"
  rm -rf "$SANITY_VENV"
  "$PY" -m venv "$SANITY_VENV"
  "$SANITY_VENV/bin/pip" install -q "$(grep -o 'ansible-core==[0-9.]*' "$ROOT/requirements/tools.txt")"
fi
"$ROOT/scripts/ansible-test-pip.sh"

if [[ ! -d "$VENDOR_COLLECTIONS/ansible_collections/community/docker" ]]; then
  # community.docker and ansible.posix without Galaxy: taken from the ansible bundle wheel.
  log "collections from ansible==$ANSIBLE_BUNDLE_VERSION"
  tmp="$(mktemp -d)"
  "$TOOLS_VENV/bin/pip" download -q --no-deps -d "$tmp" "ansible==$ANSIBLE_BUNDLE_VERSION"
  mkdir -p "$VENDOR_COLLECTIONS.tmp"
  "$PY" - "$tmp" "$VENDOR_COLLECTIONS.tmp" <<'PYEOF'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/ansible-*.whl")[0]
keep = ("ansible_collections/community/docker/", "ansible_collections/ansible/posix/")
with zipfile.ZipFile(wheel) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith(keep)])
PYEOF
  rm -rf "$VENDOR_COLLECTIONS" "$tmp"
  mkdir -p "$VENDOR_COLLECTIONS"
  mv "$VENDOR_COLLECTIONS.tmp/ansible_collections" "$VENDOR_COLLECTIONS/"
  rm -rf "$VENDOR_COLLECTIONS.tmp"
fi

failed=0
for i in "${!background_pids[@]}"; do
  if wait "${background_pids[$i]}"; then
    grep -h '^==>' "${background_logs[$i]}" >&2 || true
  else
    failed=1
    cat "${background_logs[$i]}" >&2
  fi
done
((failed == 0)) || exit 1

# promtool and Prometheus from the distribution's package, and its node_exporter, unpacked, not installed (no daemon):
# the tests check the fleet's files with promtool, and the one Prometheus run scrapes the engine, its front door and
# the watchdog's textfile through node_exporter.
if [[ ! -x "$PROMTOOL" || ! -x "$NODE_EXPORTER" ]]; then
  log "promtool, Prometheus and node_exporter from the distribution's packages in ${PROMTOOL%/usr/bin/promtool}"
  tmp="$(mktemp -d)"
  (cd "$tmp" && apt-get download -q prometheus prometheus-node-exporter >/dev/null 2>&1) \
    || { apt-get update -q && (cd "$tmp" && apt-get download -q prometheus prometheus-node-exporter); }
  rm -rf "${PROMTOOL%/usr/bin/promtool}"
  for deb in "$tmp"/prometheus_*.deb "$tmp"/prometheus-node-exporter_*.deb; do
    dpkg-deb -x "$deb" "${PROMTOOL%/usr/bin/promtool}"
  done
  rm -rf "$tmp"
fi

# Drop what older versions of these files left in the cache.
for old in "$CACHE"/venv-tools-* "$CACHE"/models-* "$CACHE"/prometheus-* "$CACHE"/wheelhouse/*; do
  [[ "$old" == "$TOOLS_VENV" || "$old" == "$MODELS" || "$old" == "${PROMTOOL%/usr/bin/promtool}" || "$old" == "$WHEELHOUSE" ]] \
    || rm -rf "$old"
done
docker images --format '{{.Repository}}:{{.Tag}}' "${BASE_IMAGE%%:*}" | grep -vxF "$BASE_IMAGE" \
  | xargs -r docker rmi >/dev/null 2>&1 || true
