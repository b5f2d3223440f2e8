#!/usr/bin/env bash
# molecule/sglang_server dependency step: make SGLang 0.5.23's real parser available to the test
# container. The venv comes from GPUFLEET_SGLANG_PARSER_VENV when set, else it is built (or found
# up to date) by tests/harness/sglang-parser-venv.sh in the machine's cache. It is linked at
# .parser-venv beside this file; molecule.yml mounts that link read-only at /srv/sglang-parser-venv.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
if [[ -n ${GPUFLEET_SGLANG_PARSER_VENV:-} ]]; then
  venv=$GPUFLEET_SGLANG_PARSER_VENV
  echo "sglang_server dependency: using GPUFLEET_SGLANG_PARSER_VENV=$venv" >&2
else
  venv=$(bash "$repo/tests/harness/sglang-parser-venv.sh")
fi
python=$(readlink -f "$venv/bin/python")
# The container runs the venv with its own /usr/bin/python3.11 (Debian 12): a venv on another
# interpreter (pyenv, a copy) would not start there.
if [[ $python != /usr/bin/python3.11 ]]; then
  echo "sglang_server dependency: $venv/bin/python is $python, not /usr/bin/python3.11;" \
    "build it with tests/harness/sglang-parser-venv.sh" >&2
  exit 1
fi
ln -sfn "$venv" "$here/.parser-venv"
echo "sglang_server dependency: $here/.parser-venv -> $venv" >&2
