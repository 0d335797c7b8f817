#!/usr/bin/env bash
# Start a Docker engine when none answers. On machines whose PID 1 is not
# systemd nothing else starts it; the daemon runs on after this script.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
docker info >/dev/null 2>&1 && exit 0
log "starting dockerd"
mkdir -p "$CACHE"
nohup dockerd >"$CACHE/dockerd.log" 2>&1 &
for _ in $(seq 60); do
  docker info >/dev/null 2>&1 && exit 0
  sleep 1
done
echo "dockerd did not come up; see $CACHE/dockerd.log" >&2
tail -20 "$CACHE/dockerd.log" >&2
exit 1
