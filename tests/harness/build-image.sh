#!/usr/bin/env bash
# Builds a Podman test-host image from Debian's own packages with debootstrap and
# `podman import`: systemd as PID 1, python3 for Ansible. Cached: rebuilt only when this
# script changes or the image is missing.
#   usage: build-image.sh debian12|debian13
set -euo pipefail

flavour=${1:?usage: build-image.sh debian12|debian13}
case "$flavour" in
  debian12) suite=bookworm ;;
  debian13) suite=trixie ;;
  *) echo "build-image.sh: unknown flavour '$flavour' (expected debian12 or debian13)" >&2; exit 2 ;;
esac

image="localhost/gpufleet-test:$flavour"
# machine-level cache: CI runs in a fresh clone, the Podman image store outlives it
stamp_dir="${GPUFLEET_CACHE:-$HOME/.cache/gpufleet}/images"
stamp="$stamp_dir/$flavour.stamp"
digest=$(sha256sum "$0" | cut -c1-16)
mkdir -p "$stamp_dir"

if podman image exists "$image" && [[ "$(cat "$stamp" 2>/dev/null)" == "$digest" ]]; then
  echo "image $image is up to date"
  exit 0
fi

mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
rootfs=$(mktemp -d "$stamp_dir/rootfs-$flavour.XXXXXX")
trap 'rm -rf "$rootfs"' EXIT

echo "building $image from $suite ($mirror) ..."
start=$SECONDS
debootstrap --variant=minbase \
  --include=systemd,systemd-sysv,python3,python3-apt,dbus,iproute2,ca-certificates,kmod,udev,procps,sudo \
  "$suite" "$rootfs" "$mirror" >"$stamp_dir/debootstrap-$flavour.log" 2>&1 || {
    echo "debootstrap failed; last lines of $stamp_dir/debootstrap-$flavour.log:" >&2
    tail -n 20 "$stamp_dir/debootstrap-$flavour.log" >&2
    exit 1
  }
# Trim what a container never needs; keep apt lists empty like an official image.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
printf '%s\n' "gpufleet-test-$flavour" > "$rootfs/etc/hostname"
# Units that cannot work inside a container would only add noise to the journal.
for unit in systemd-udevd.service systemd-udev-trigger.service systemd-modules-load.service \
            sys-kernel-config.mount sys-kernel-debug.mount sys-fs-fuse-connections.mount \
            getty@tty1.service console-getty.service; do
  ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
done

tar -C "$rootfs" -c . | podman import \
  --change 'CMD ["/sbin/init"]' --change 'STOPSIGNAL SIGRTMIN+3' - "$image" >/dev/null
echo "$digest" > "$stamp"
echo "built $image in $((SECONDS - start)) s"
