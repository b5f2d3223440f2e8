"""Real SGLang wheels from PyPI for the sglang tests, downloaded on demand and cached.

Wheels go to $GPUFLEET_CACHE/wheels (default ~/.cache/gpufleet/wheels: outside the clone, so a
fresh clone on the same machine reuses them; `make wheels` pre-fetches them). They are
installed without dependencies by unpacking them, which is all the sglang tests need: the
source is read with ast and patched, never imported.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WHEEL_DIR = Path(os.environ.get("GPUFLEET_CACHE") or Path.home() / ".cache" / "gpufleet") / "wheels"

# Versions the tests use, with what docs/sglang-versions-and-flags.md says about each.
PATCH_NEEDED = ("0.5.8", "0.5.12.post1")
ENABLED_UPSTREAM = ("0.5.13", "0.5.14", "0.5.23")


def wheel_path(version: str) -> Path:
    """The cached wheel of sglang==version, downloaded with pip if it is not cached yet."""
    found = sorted(WHEEL_DIR.glob(f"sglang-{version}-*.whl"))
    if not found:
        WHEEL_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "-d",
                str(WHEEL_DIR),
                f"sglang=={version}",
            ],
            check=True,
        )
        found = sorted(WHEEL_DIR.glob(f"sglang-{version}-*.whl"))
    if not found:
        raise FileNotFoundError(f"pip download sglang=={version} left no wheel in {WHEEL_DIR}")
    return found[0]


def install_wheel(version: str, target: Path) -> Path:
    """Unpack the wheel into target (like `pip install --no-deps --target`); return target."""
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel_path(version)) as wheel:
        wheel.extractall(target)
    return target


def read_member(version: str, member: str) -> str:
    """One file of the wheel as text, without unpacking the rest."""
    with zipfile.ZipFile(wheel_path(version)) as wheel:
        return wheel.read(member).decode("utf-8")
