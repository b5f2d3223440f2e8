#!/usr/bin/env bash
# molecule/sglang_gateway dependency step: the real smg wheel from PyPI and its dependencies
# (manylinux x86_64, CPython 3.11 as in Debian 12), downloaded once into the machine's cache
# (outside the clone, never committed), linked at .smg-wheels beside this file; molecule.yml mounts
# that link read-only into the container as a wheelhouse.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
version=${SGLANG_GATEWAY_SMG_VERSION:-1.13.0}
dir=${GPUFLEET_CACHE:-$HOME/.cache/gpufleet}/wheels/smg
mkdir -p "$dir"
if ls "$dir/smg-$version-"*.whl >/dev/null 2>&1; then
  echo "sglang_gateway dependency: smg $version wheels in $dir" >&2
else
  echo "sglang_gateway dependency: downloading smg==$version and its dependencies into $dir" >&2
  python3 -m pip download -q --only-binary=:all: --python-version 3.11 --implementation cp \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$dir" "smg==$version"
fi
ln -sfn "$dir" "$here/.smg-wheels"
