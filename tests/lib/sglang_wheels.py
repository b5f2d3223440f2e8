"""Real SGLang wheels from PyPI for the sglang tests, downloaded on demand and cached.

Wheels go to $GPUFLEET_CACHE/wheels (default ~/.cache/gpufleet/wheels: outside the clone, so a
fresh clone on the same machine reuses them; `make wheels` pre-fetches them). They are
installed without dependencies by unpacking them, which is all the sglang tests need: the
source is read with ast and patched, never imported.
"""

from __future__ import annotations

import hashlib
import http.server
import re
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

from lib.cache import CACHE

REPO = Path(__file__).resolve().parents[2]
WHEEL_DIR = CACHE / "wheels"

# Versions the tests use, with what docs/sglang-versions-and-flags.md says about each.
PATCH_NEEDED = ("0.5.8", "0.5.12.post1")
ENABLED_UPSTREAM = ("0.5.13", "0.5.14", "0.5.23")


def cached_wheel(project: str, version: str) -> Path:
    """The cached wheel of project==version (this machine's platform), downloaded with pip if needed."""
    found = sorted(WHEEL_DIR.glob(f"{project}-{version}-*.whl"))
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
                f"{project}=={version}",
            ],
            check=True,
        )
        found = sorted(WHEEL_DIR.glob(f"{project}-{version}-*.whl"))
    if not found:
        raise FileNotFoundError(f"pip download {project}=={version} left no wheel in {WHEEL_DIR}")
    return found[0]


def wheel_path(version: str) -> Path:
    """The cached wheel of sglang==version, downloaded with pip if it is not cached yet."""
    return cached_wheel("sglang", version)


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


def uv_wheel_path(version: str) -> Path:
    """The cached uv wheel (this machine's platform) of uv==version, downloaded with pip if needed."""
    return cached_wheel("uv", version)


def _project(filename: str) -> str:
    """PEP 503 normalised project name of a wheel file."""
    return re.sub(r"[-_.]+", "-", filename.split("-", 1)[0]).lower()


class WheelIndex:
    """A PEP 503 simple index over a list of wheel files, on 127.0.0.1: what an air-gapped fleet's
    wheelhouse server (or a PyPI mirror) serves, with PyPI's max-age on the project pages.

    `blocked` projects answer 404 and `down()` stops the server, to prove that an install took its
    wheels from a cache; `requests` lists every path asked for.
    """

    def __init__(self, wheels: list[Path], max_age: int = 600):
        self.files = {w.name: w for w in wheels}
        self.max_age = max_age
        self.blocked: set[str] = set()
        self.requests: list[str] = []
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                index.requests.append(self.path)
                body, ctype = index.answer(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", f"max-age={index.max_age}, public")
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, path: str) -> tuple[bytes | None, str]:
        parts = [p for p in path.split("?", maxsplit=1)[0].split("/") if p]
        if len(parts) == 2 and parts[0] == "simple" and parts[1] not in self.blocked:
            links = [
                f'<a href="/files/{name}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">{name}</a><br/>'
                for name, w in sorted(self.files.items())
                if _project(name) == parts[1]
            ]
            if links:
                return ("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n").encode(), "text/html"
        if (
            len(parts) == 2
            and parts[0] == "files"
            and parts[1] in self.files
            and _project(parts[1]) not in self.blocked
        ):
            return self.files[parts[1]].read_bytes(), "application/octet-stream"
        return None, ""

    def wheel_downloads(self, project: str, requests: list[str] | None = None) -> list[str]:
        """The wheel files of `project` asked for: among `requests` (a copy of `requests` taken earlier) or all."""
        seen = self.requests if requests is None else requests
        return [p for p in seen if p.startswith("/files/") and _project(p.split("/")[-1]) == project]

    def down(self) -> None:
        self.server.shutdown()
        self.server.server_close()
