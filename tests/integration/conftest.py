# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The stand-in servers the integration tests start, one way for all of them.

Each stand-in (tests/standins/) runs in its own process on a random loopback port, which it writes
to a port file once it listens; starting waits for that file with a deadline and fails with the
stand-in's stderr. The fixtures return a ``start(*flags, **env)`` function and stop every server
they started at the end of the test:

- ``standin``: tests/standins/sglang_api.py, the SGLang HTTP API (:class:`SGLangStandIn`);
- ``hub``: tests/standins/hf_hub.py, the Hugging Face Hub (:class:`HubStandIn`);
- ``module_hub``: the same, started once per test module and stopped at its end (for a set-up that
  several tests share, e.g. a snapshot downloaded once; a test that reads the request log takes ``hub``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STANDINS = REPO / "tests" / "standins"


class StandInProcess:
    """A stand-in script started with ``--port-file``; ``url`` is where it listens."""

    script: Path
    name: str
    start_timeout_s: float = 10.0

    def __init__(self, port_file: Path, args: list[str], env: dict[str, str] | None = None) -> None:
        """Start ``script`` with ``args`` (which pass ``--port-file port_file``) and wait until it listens."""
        self.proc = subprocess.Popen(
            [sys.executable, str(self.script), *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + self.start_timeout_s
        while not port_file.exists():  # written atomically once the stand-in listens
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} stand-in did not start: {self.proc.stderr.read().decode()}")
            time.sleep(0.05)
        self.port = int(port_file.read_text())
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


class SGLangStandIn(StandInProcess):
    """tests/standins/sglang_api.py serving ``test/model`` with metrics; ``env`` sets STANDIN_* faults."""

    script = STANDINS / "sglang_api.py"
    name = "sglang"

    def __init__(self, tmp_path: Path, *flags: str, **env: str) -> None:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("STANDIN_")}
        full_env.update(env)
        port_file = tmp_path / f"port-{time.monotonic_ns()}"
        args = [
            *("--model-path", "test/model", "--host", "127.0.0.1", "--port", "0"),
            *("--port-file", str(port_file), "--enable-metrics", *flags),
        ]
        super().__init__(port_file, args, full_env)

    def generation_tokens(self) -> float:
        with urllib.request.urlopen(self.url + "/metrics", timeout=5) as resp:
            for line in resp.read().decode().splitlines():
                if line.startswith("sglang:generation_tokens_total"):
                    return float(line.rsplit(" ", 1)[1])
        raise AssertionError("stand-in /metrics has no sglang:generation_tokens_total")


class HubStandIn(StandInProcess):
    """tests/standins/hf_hub.py; gated repositories want ``token``; every request is logged to ``log``."""

    script = STANDINS / "hf_hub.py"
    name = "hub"
    start_timeout_s = 15.0
    token = "hf_gated_secret_8c1f2e"

    def __init__(self, tmp_path: Path, *flags: str) -> None:
        self.log = tmp_path / f"hub-{time.monotonic_ns()}.jsonl"
        port_file = tmp_path / f"hub-port-{time.monotonic_ns()}"
        super().__init__(
            port_file, ["--port-file", str(port_file), "--log", str(self.log), "--token", self.token, *flags]
        )

    def requests(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


def _starter(make: Callable[..., StandInProcess]) -> Iterator[Callable[..., StandInProcess]]:
    started: list[StandInProcess] = []

    def start(*args: str, **kwargs: str) -> StandInProcess:
        started.append(make(*args, **kwargs))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[Callable[..., SGLangStandIn]]:
    """``start(*flags, **env)`` -> a running :class:`SGLangStandIn`; all are stopped at the end."""
    yield from _starter(lambda *flags, **env: SGLangStandIn(tmp_path, *flags, **env))  # type: ignore[misc]


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Callable[..., HubStandIn]]:
    """``start(*flags)`` -> a running :class:`HubStandIn`; all are stopped at the end."""
    yield from _starter(lambda *flags: HubStandIn(tmp_path, *flags))  # type: ignore[misc]


@pytest.fixture(scope="module")
def module_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., HubStandIn]]:
    """``start(*flags)`` -> a running :class:`HubStandIn` that lives until the test module ends."""
    where = tmp_path_factory.mktemp("module-hub")
    yield from _starter(lambda *flags: HubStandIn(where, *flags))  # type: ignore[misc]
