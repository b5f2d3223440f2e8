#!/usr/bin/env bash
# molecule/fleet dependency step: the real SGLang wheels of the two releases the drills deploy
# (0.5.8, then 0.5.23; no dependencies) and the smg gateway wheels, downloaded once into the
# machine's cache (outside the clone, never committed) and linked at .wheels beside this file.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${GPUFLEET_CACHE:-$HOME/.cache/gpufleet}/wheels
mkdir -p "$cache"
for v in 0.5.8 0.5.23; do
  ls "$cache/sglang-$v-"*.whl >/dev/null 2>&1 || {
    echo "fleet dependency: downloading sglang==$v (no dependencies)" >&2
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$cache" "sglang==$v"; }
done
# the uv wheel role sglang installs itself (its pin: sglang_uv_version in the role's defaults)
uv_version=$(sed -n 's/^sglang_uv_version: "\(.*\)"$/\1/p' "$here/../../../roles/sglang/defaults/main.yml")
ls "$cache/uv-$uv_version-"*.whl >/dev/null 2>&1 || {
  echo "fleet dependency: downloading uv==$uv_version" >&2
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$cache" "uv==$uv_version"; }
# the smg wheels, exactly as molecule/sglang_gateway gets them (into $cache/smg)
bash "$here/../sglang_gateway/dependency.sh"
ln -sfn "$cache" "$here/.wheels"
