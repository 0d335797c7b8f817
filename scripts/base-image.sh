#!/usr/bin/env bash
# The systemd base image for molecule, built locally (no registry is needed):
# debootstrap a Debian bookworm root, then `docker import`. The tag carries a
# hash of this script, so a change here builds a new image and an unchanged
# script reuses the one already on the machine.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 && exit 0
log "base image $BASE_IMAGE"

mirror="${DEBIAN_MIRROR:-}"
if [[ -z "$mirror" ]]; then
  # The machine's own Debian mirror, from its apt sources (deb822 or one-line form).
  mirror="$(grep -hoE '^URIs:\s*\S+' /etc/apt/sources.list.d/*.sources 2>/dev/null \
            | awk '{print $2}' | grep -v security | head -1 || true)"
  [[ -n "$mirror" ]] || mirror="$(grep -hoE '^deb\s+\S+' /etc/apt/sources.list 2>/dev/null \
            | awk '{print $2}' | grep -v security | head -1 || true)"
fi
[[ -n "$mirror" ]] || { echo "set DEBIAN_MIRROR to a Debian mirror URL" >&2; exit 1; }

rootfs="$(mktemp -d "${TMPDIR:-/tmp}/llmops-rootfs.XXXXXX")"
cleanup() {
  grep -o " ${rootfs}[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf --one-file-system "$rootfs"
}
trap cleanup EXIT

# g++ and python3-dev: the install role installs them on CPU hosts (torch compiles CPU kernels at run time against
# Python.h); they are in the image so each scenario does not download them again.
debootstrap --variant=minbase \
  --include=systemd,systemd-sysv,dbus,python3,python3-apt,sudo,procps,iproute2,ca-certificates,openssh-server,g++,python3-dev \
  bookworm "$rootfs" "$mirror" >"$CACHE/debootstrap.log" 2>&1 \
  || { tail -30 "$CACHE/debootstrap.log" >&2; exit 1; }

# Trust the same extra CAs as the machine (TLS-intercepting egress proxies).
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
  chroot "$rootfs" update-ca-certificates >/dev/null
fi
# sshd for the scenarios that reach their hosts as a fleet is reached. No host keys in the image: each container
# makes its own at boot (below), so no two hosts share one; no password logins, a key only.
rm -f "$rootfs"/etc/ssh/ssh_host_*
cat >"$rootfs/etc/systemd/system/ssh-host-keys.service" <<'UNIT'
[Unit]
Description=Make this container's SSH host keys
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target
UNIT
chroot "$rootfs" systemctl enable ssh-host-keys.service >/dev/null
printf 'PasswordAuthentication no\nPermitRootLogin prohibit-password\n' >"$rootfs/etc/ssh/sshd_config.d/keys-only.conf"
# systemd in a container: no getty, no udev settle, no hostname/firstboot prompts.
chroot "$rootfs" systemctl mask getty@tty1.service systemd-udevd.service \
  systemd-firstboot.service systemd-resolved.service >/dev/null 2>&1 || true
: >"$rootfs/etc/machine-id"
chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin

tar -C "$rootfs" -c . | docker import --change 'CMD ["/lib/systemd/systemd"]' - "$BASE_IMAGE" >/dev/null
echo "built $BASE_IMAGE"
