#!/usr/bin/env bash
# The LXC guest's root filesystem: the test image flattened to a tarball (podman export), cached
# under .cache/lxc and rebuilt only when the image changes. No download.
set -euo pipefail
repo=${1:?usage: guest-rootfs.sh REPO_ROOT}
image=localhost/gpufleet-test:debian12
dir="$repo/.cache/lxc"
mkdir -p "$dir"
# one export at a time: the integration tests and this scenario may ask at once (make test runs both)
exec 9>"$dir/debian12-rootfs.lock"
flock 9
id=$(podman image inspect --format '{{.Id}}' "$image")
if [[ "$(cat "$dir/debian12-rootfs.id" 2>/dev/null)" != "$id" || ! -s "$dir/debian12-rootfs.tar" ]]; then
  cid=$(podman create "$image" /sbin/init)
  trap 'podman rm "$cid" >/dev/null' EXIT
  podman export -o "$dir/debian12-rootfs.tar.tmp" "$cid"
  mv "$dir/debian12-rootfs.tar.tmp" "$dir/debian12-rootfs.tar"
  echo "$id" > "$dir/debian12-rootfs.id"
fi
