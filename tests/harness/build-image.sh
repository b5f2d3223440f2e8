#!/usr/bin/env bash
# Builds a Podman test-host image from Debian's own packages with debootstrap and
# `podman import`: systemd as PID 1, python3 for Ansible, and Debian's OpenSSH server, so that
# Ansible reaches a test host over SSH with pipelining as an operator's inventory reaches a real
# one (docs/test-hosts.md). The image carries no SSH host key: each container makes its own at its
# first boot (gpufleet-ssh-hostkeys.service, as a cloud image does). Cached: rebuilt only when this
# script changes or the image is missing.
#   usage: build-image.sh debian12|debian13   (the test image: docs/glossary.md)
set -euo pipefail

image=${1:?usage: build-image.sh debian12|debian13}
case "$image" in
  debian12) suite=bookworm ;;
  debian13) suite=trixie ;;
  *) echo "build-image.sh: unknown image '$image' (expected debian12 or debian13)" >&2; exit 2 ;;
esac

image_ref="localhost/gpufleet-test:$image"
# machine-level cache: CI runs in a fresh clone, the Podman image store outlives it
stamp_dir="${GPUFLEET_CACHE:-$HOME/.cache/gpufleet}/images"
stamp="$stamp_dir/$image.stamp"
digest=$(sha256sum "$0" | cut -c1-16)
mkdir -p "$stamp_dir"

if podman image exists "$image_ref" && [[ "$(cat "$stamp" 2>/dev/null)" == "$digest" ]]; then
  echo "image $image_ref is up to date"
  exit 0
fi

mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
rootfs=$(mktemp -d "$stamp_dir/rootfs-$image.XXXXXX")
trap 'rm -rf "$rootfs"' EXIT

echo "building $image_ref from $suite ($mirror) ..."
start=$SECONDS
debootstrap --variant=minbase \
  --include=systemd,systemd-sysv,python3,python3-apt,dbus,iproute2,ca-certificates,kmod,udev,procps,sudo,openssh-server \
  "$suite" "$rootfs" "$mirror" >"$stamp_dir/debootstrap-$image.log" 2>&1 || {
    echo "debootstrap failed; last lines of $stamp_dir/debootstrap-$image.log:" >&2
    tail -n 20 "$stamp_dir/debootstrap-$image.log" >&2
    exit 1
  }
# Trim what a container never needs; keep apt lists empty like an official image.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
# ...and dated as never updated: apt's cache_valid_time reads the lists directory's mtime, and emptied
# just now it would look fresh for an hour, so a role's `update_cache` with cache_valid_time would skip
# the update and find no package at all
touch -d @0 "$rootfs/var/lib/apt/lists"
printf '%s\n' "gpufleet-test-$image" > "$rootfs/etc/hostname"
# Units that cannot work inside a container would only add noise to the journal.
# Host keys are made per container, never shared by every container of the image.
rm -f "$rootfs"/etc/ssh/ssh_host_*
cat > "$rootfs/etc/systemd/system/gpufleet-ssh-hostkeys.service" <<'UNIT'
[Unit]
Description=SSH host keys of this container (made once, at its first boot)
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target ssh.service
UNIT
ln -sf ../gpufleet-ssh-hostkeys.service "$rootfs/etc/systemd/system/multi-user.target.wants/gpufleet-ssh-hostkeys.service"
mkdir -p "$rootfs/etc/systemd/system/ssh.service.wants"
ln -sf ../gpufleet-ssh-hostkeys.service "$rootfs/etc/systemd/system/ssh.service.wants/gpufleet-ssh-hostkeys.service"
for unit in systemd-udevd.service systemd-udev-trigger.service systemd-modules-load.service \
            sys-kernel-config.mount sys-kernel-debug.mount sys-fs-fuse-connections.mount \
            getty@tty1.service console-getty.service; do
  ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
done

tar -C "$rootfs" -c . | podman import \
  --change 'CMD ["/sbin/init"]' --change 'STOPSIGNAL SIGRTMIN+3' - "$image_ref" >/dev/null
echo "$digest" > "$stamp"
echo "built $image_ref in $((SECONDS - start)) s"
