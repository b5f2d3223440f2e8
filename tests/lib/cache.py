"""The machine-level cache the tests share with the Makefile (``GPUFLEET_CACHE``, default
``~/.cache/gpufleet``): outside the clone, so a fresh clone on the same machine reuses what is in it
(wheels, the SGLang parser venv, the Hub client venv, the module payload bytecode cache)."""

from __future__ import annotations

import os
from pathlib import Path

CACHE = Path(os.environ.get("GPUFLEET_CACHE") or Path.home() / ".cache" / "gpufleet")
