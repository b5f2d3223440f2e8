#!/usr/bin/env bash
# Build the venv in which SGLang 0.5.23's own argument parser can be imported on a CPU-only
# machine: `from sglang.srt.server_args import ServerArgs` works, no GPU, no CUDA.
#
# Used by extensions/molecule/sglang_server (the role checks its argv with this parser inside the test
# container) and by tests/unit/test_sglang_args_table.py (dumps the real parser's flags).
#
#   bash tests/harness/sglang-parser-venv.sh     # progress on stderr, the venv's path on stdout
#
# Where: ${GPUFLEET_CACHE:-$HOME/.cache/gpufleet}/sglang-parser-0.5.23, outside the clone (CI runs
# in a fresh clone each time; the machine and its cache persist). Idempotent: the venv carries a
# stamp, the hash of this file and of the base python's version; same stamp = nothing to do.
# Wheels are kept in .../sglang-parser-wheels, so a rebuild needs no network.
#
# What it holds, and why (measured by importing sglang.srt.server_args of the 0.5.23 wheel until
# it imported): sglang==0.5.23 without its dependencies (they pull CUDA, flashinfer, kernels);
# torch 2.13.0 CPU build (the wheel on this machine's disk; `+cpu` is pinned so pip can never take
# a multi-GB CUDA build instead); triton (sglang/srt/utils/common.py imports it at module level;
# importing it touches no GPU); and the pure-Python/CPU packages the import chain needs. Every
# package is pinned and installed with --no-deps: the set is exactly this list. pyyaml: SGLang's
# ConfigArgumentMerger reads `--config FILE.yaml` with it (the sglang_server role's argv check merges
# its options file that way). torchvision is left
# out on purpose: PyPI's build does not import beside CPU torch, and 0.5.21+ do not need it (0.5.8 to
# 0.5.20 do, so their parsers need a full CUDA venv; see test_sglang_args_table.py).
#
# The base python is Debian 12's /usr/bin/python3.11: the venv's bin/python is a link to it, so the
# venv also runs, mounted anywhere, inside a Debian 12 test container, whose python3.11 is the same.
set -euo pipefail

SGLANG_VERSION=0.5.23
CACHE=${GPUFLEET_CACHE:-$HOME/.cache/gpufleet}
VENV=$CACHE/sglang-parser-$SGLANG_VERSION
WHEELS=$CACHE/sglang-parser-wheels
BASE_PYTHON=${GPUFLEET_SGLANG_PARSER_BASE_PYTHON:-/usr/bin/python3.11}

PACKAGES=(
  "sglang==$SGLANG_VERSION"
  torch==2.13.0+cpu
  triton==3.8.0
  aiohappyeyeballs==2.7.1 aiohttp==3.14.5 aiosignal==1.4.0 annotated-types==0.8.0 anyio==4.16.0
  asttokens==3.0.2 attrs==26.1.0 certifi==2026.10.19.post1 charset-normalizer==3.5.3 executing==2.3.0
  filelock==4.3.1 frozenlist==1.8.0 fsspec==2026.9.0 idna==3.20 ipython==9.18.1
  ipython-pygments-lexers==1.1.1 jedi==0.20.1 jinja2==3.1.6 markupsafe==3.0.4 matplotlib-inline==0.2.2
  mpmath==1.3.0 msgspec==0.23.0 multidict==7.2.1 networkx==3.6.1 numpy==2.4.6 orjson==3.13.0
  packaging==26.4 parso==0.8.7 pexpect==4.9.0 pillow==13.0.0 prompt-toolkit==3.0.53 propcache==0.5.4
  psutil==7.2.2 ptyprocess==0.7.0 pure-eval==0.2.4 pybase64==1.5.1 pydantic==2.14.4
  pydantic-core==2.50.5 pygments==2.21.0 pyzmq==27.3.0 requests==2.34.2 setuptools==84.2.1
  stack-data==0.6.3 starlette==1.10.0 sympy==1.14.0 tqdm==4.70.1 traitlets==5.16.1
  typing-extensions==4.16.0 typing-inspection==0.4.5 urllib3==2.8.0 wcwidth==0.9.4 yarl==1.25.1
  pyyaml==6.0.3
)

say() { printf 'sglang-parser-venv: %s\n' "$*" >&2; }
die() {
  say "ERROR: $*"
  exit 1
}

[[ -x $BASE_PYTHON ]] || die "$BASE_PYTHON not found (Debian 12: apt-get install python3.11-venv)"
base_version=$("$BASE_PYTHON" -c 'import sys; print(sys.version.split()[0])')
[[ $base_version == 3.11.* ]] || die "$BASE_PYTHON is Python $base_version; the pinned wheels are for 3.11"
stamp=$({
  cat "${BASH_SOURCE[0]}"
  echo "$BASE_PYTHON $base_version"
} | sha256sum | cut -d' ' -f1)

mkdir -p "$CACHE"
exec 9>"$CACHE/sglang-parser-$SGLANG_VERSION.lock"
flock 9 # one build at a time on this machine; a second caller waits, then finds it built

verify() {
  # The real thing: build SGLang's parser the way sglang.launch_server does and parse an argv.
  "$1/bin/python" - "$SGLANG_VERSION" <<'EOF'
import argparse, sys
from sglang.srt.server_args import ServerArgs
from sglang.version import __version__
assert __version__ == sys.argv[1], f"sglang {__version__} imported, {sys.argv[1]} expected"
parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
parser.parse_args(["--model-path", "m", "--tp", "8", "--attention-backend", "triton"])
flags = sum(1 for a in parser._actions for o in a.option_strings if o.startswith("--"))
print(f"sglang {__version__}: ServerArgs imported, parser has {flags} flags", file=sys.stderr)
EOF
}

if [[ -f $VENV/.gpufleet-stamp && $(<"$VENV/.gpufleet-stamp") == "$stamp" ]]; then
  say "up to date: $VENV"
  echo "$VENV"
  exit 0
fi

start=$SECONDS
say "building $VENV (sglang $SGLANG_VERSION, CPU torch, base $BASE_PYTHON $base_version)"
partial=$VENV.partial
rm -rf "$partial"
"$BASE_PYTHON" -m venv "$partial"
pip=("$partial/bin/python" -m pip --disable-pip-version-check)

mkdir -p "$WHEELS"
say "fetching ${#PACKAGES[@]} wheels into $WHEELS (kept: a rebuild reuses them)"
"${pip[@]}" download --quiet --no-deps --only-binary=:all: --dest "$WHEELS" "${PACKAGES[@]}" 2>&1 |
  grep -v -e 'is ignored: it is neither a file nor a directory' >&2 || true
say "fetched ($((SECONDS - start)) s); installing"
"${pip[@]}" install --quiet --no-deps --no-index --find-links "$WHEELS" "${PACKAGES[@]}" 2>&1 |
  grep -v -e 'is ignored: it is neither a file nor a directory' >&2 || true
# the pipes above hide pip's status: what is installed is checked here instead
"${pip[@]}" show --quiet sglang torch triton >/dev/null 2>&1 || die "pip did not install sglang, torch and triton"
if "${pip[@]}" list --format=freeze 2>/dev/null | grep -i -E '^(nvidia-|torch==2\.(1[4-9])|cuda)'; then
  die "a CUDA package got into the venv"
fi
say "installed ($((SECONDS - start)) s, $(du -sh "$partial" | cut -f1)); importing sglang.srt.server_args"
verify "$partial" || die "SGLang's parser cannot be built in $partial (left there to inspect)"

rm -rf "$VENV"
mv "$partial" "$VENV"
verify "$VENV" 2>/dev/null || die "the venv does not work after moving it to $VENV"
echo "$stamp" >"$VENV/.gpufleet-stamp"
say "built $VENV in $((SECONDS - start)) s"
echo "$VENV"
