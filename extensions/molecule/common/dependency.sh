#!/usr/bin/env bash
# Dependency step of the scenarios that install from NVIDIA's apt repository or .run installer:
# the repository stand-in (tests/standins/nvidia_apt/build_repo.py) under .cache/standin-apt,
# rebuilt only when its inputs change (scenarios running at the same time share one build, under
# a lock), and the scenario's simulated /proc under .cache/molecule-state/<scenario>/proc.
# Both are mounted into the test hosts by the scenario's molecule.yml.
#   usage (molecule.yml): command: bash ${MOLECULE_SCENARIO_DIRECTORY}/../common/dependency.sh
#                                  ${MOLECULE_PROJECT_DIRECTORY} ${MOLECULE_SCENARIO_DIRECTORY}
# (molecule substitutes these when it reads molecule.yml; the step's environment does not have them)
set -euo pipefail
project=${1:?usage: dependency.sh PROJECT_DIR SCENARIO_DIR}
scenario=$(basename "${2:?usage: dependency.sh PROJECT_DIR SCENARIO_DIR}")
mkdir -p "$project/.cache/molecule-state/$scenario/proc"
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
