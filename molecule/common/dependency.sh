#!/usr/bin/env bash
# Dependency step of the scenarios that install from NVIDIA's apt repository or .run installer:
# the repository stand-in (tests/standins/nvidia_apt/build_repo.py) under .cache/standin-apt,
# rebuilt only when its inputs change (scenarios running at the same time share one build, under
# a lock), and the scenario's simulated /proc under .cache/molecule-state/<scenario>/proc.
# Both are mounted into the test hosts by the scenario's molecule.yml.
set -euo pipefail
project=${MOLECULE_PROJECT_DIRECTORY:?run by molecule}
mkdir -p "$project/.cache/molecule-state/${MOLECULE_SCENARIO_NAME:?run by molecule}/proc"
repo="$project/.cache/standin-apt"
standins="$project/tests/standins"
mapfile -t inputs < <(find "$standins/nvidia" -type f | LC_ALL=C sort)
digest=$(cat "$standins/nvidia_apt/build_repo.py" "$standins/nvidia-smi" "${inputs[@]}" | sha256sum | cut -c1-16)
exec 9>"$repo.lock"
flock 9
if [[ -d "$repo" && "$(cat "$repo.stamp" 2>/dev/null)" == "$digest" ]]; then
  echo "standin apt repository is up to date ($repo)"
  exit 0
fi
python3 "$standins/nvidia_apt/build_repo.py" "$repo"
echo "$digest" > "$repo.stamp"
