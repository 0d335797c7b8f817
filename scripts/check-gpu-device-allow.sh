#!/usr/bin/env bash
# Run as root on a GPU host (it needs systemd and the NVIDIA driver): which NVIDIA device groups the driver
# registers in /proc/devices, and whether a service sandboxed the way vllm_server sandboxes it
# (DevicePolicy=closed plus DeviceAllow=) still sees the GPUs. systemd drops a DeviceAllow= group name that
# matches no group without a word, so a wrong name shows only as "no GPU" inside the service.
#
#   scripts/check-gpu-device-allow.sh                    # the role's default: char-nvidia*
#   scripts/check-gpu-device-allow.sh char-nvidiactl char-nvidia-frontend char-nvidia-uvm char-nvidia-caps
set -euo pipefail
if (($# == 0)); then set -- 'char-nvidia*'; fi

echo "NVIDIA device groups in /proc/devices:"
grep -i nvidia /proc/devices || echo "  none: is the NVIDIA driver loaded?"

props=(-p DevicePolicy=closed)
for group in "$@"; do props+=(-p "DeviceAllow=$group rw"); done
echo "systemd-run ${props[*]} nvidia-smi -L"
if systemd-run --quiet --wait --pipe --collect "${props[@]}" nvidia-smi -L; then
  echo "PASS: the sandboxed service sees the GPUs with DeviceAllow=$*"
else
  echo "FAIL: under DevicePolicy=closed with DeviceAllow=$* nvidia-smi finds no GPU" >&2
  exit 1
fi
