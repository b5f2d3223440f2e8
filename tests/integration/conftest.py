# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The stand-in servers the integration tests start, through tests/lib/standin.py (the one way every test
starts and stops one: its own process group, a start deadline, its output in a log file that a failure
shows, SIGTERM then its group killed). The fixtures return a ``start(*flags, **env)`` function and stop
every server they started at the end of the test:

- ``standin``: tests/standins/sglang_api.py, the SGLang HTTP API (:class:`SGLangStandIn`);
- ``hub``: tests/standins/hf_hub.py, the Hugging Face Hub (:class:`HubStandIn`);
- ``module_hub``: the same, started once per test module and stopped at its end (for a set-up that
  several tests share, e.g. a snapshot downloaded once; a test that reads the request log takes ``hub``).
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from lib.standin import STANDIN, Standin, hub_standin, standin_process


class _Running:
    """A started stand-in (``process``, a tests/lib/standin.py ``Standin``) as a fixture hands it out."""

    process: Standin

    @property
    def port(self) -> int:
        return self.process.port

    @property
    def url(self) -> str:
        return self.process.url

    def stop(self) -> None:
        """Stop it now (its port closes); the fixture's own stop at the end is then a no-op."""
        self.process.stop()


class SGLangStandIn(_Running):
    """tests/standins/sglang_api.py serving ``test/model`` with metrics; ``env`` sets STANDIN_* faults."""

    def __init__(self, stack: contextlib.ExitStack, tmp_path: Path, *flags: str, **env: str) -> None:
        args = ("--model-path", "test/model", "--host", "127.0.0.1", "--port", "0", "--enable-metrics", *flags)
        self.process = stack.enter_context(standin_process(STANDIN, tmp_path, *args, env=env))

    def generation_tokens(self) -> float:
        with urllib.request.urlopen(self.url + "/metrics", timeout=5) as resp:
            for line in resp.read().decode().splitlines():
                if line.startswith("sglang:generation_tokens_total"):
                    return float(line.rsplit(" ", 1)[1])
        raise AssertionError("stand-in /metrics has no sglang:generation_tokens_total")


class HubStandIn(_Running):
    """tests/standins/hf_hub.py; gated repositories want ``token``; every request is logged to ``log``."""

    token = "hf_gated_secret_8c1f2e"

    def __init__(self, stack: contextlib.ExitStack, tmp_path: Path, *flags: str) -> None:
        self.log = tmp_path / f"hub-{time.monotonic_ns()}.jsonl"
        args = ("--log", str(self.log), "--token", self.token, *flags)
        self.process = stack.enter_context(hub_standin(tmp_path, *args))

    def requests(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


def _starter(make: Callable[..., object]) -> Iterator[Callable[..., object]]:
    """``start(*args, **kwargs)`` -> ``make(stack, *args, **kwargs)``; every one started is stopped at the end."""
    with contextlib.ExitStack() as stack:
        yield lambda *args, **kwargs: make(stack, *args, **kwargs)


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[Callable[..., SGLangStandIn]]:
    """``start(*flags, **env)`` -> a running :class:`SGLangStandIn`; all are stopped at the end."""
    yield from _starter(lambda stack, *flags, **env: SGLangStandIn(stack, tmp_path, *flags, **env))  # type: ignore[misc]


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Callable[..., HubStandIn]]:
    """``start(*flags)`` -> a running :class:`HubStandIn`; all are stopped at the end."""
    yield from _starter(lambda stack, *flags: HubStandIn(stack, tmp_path, *flags))  # type: ignore[misc]


@pytest.fixture(scope="module")
def module_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., HubStandIn]]:
    """``start(*flags)`` -> a running :class:`HubStandIn` that lives until the test module ends."""
    where = tmp_path_factory.mktemp("module-hub")
    yield from _starter(lambda stack, *flags: HubStandIn(stack, where, *flags))  # type: ignore[misc]
