# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The stand-in servers (tests/standins/) started and stopped in one way for every test.

``with sglang_standin(tmp_path, "--enable-metrics", env={...}) as standin: ... standin.url`` (the SGLang HTTP
API, tests/standins/sglang_api.py), ``with hub_standin(tmp_path, "--size-mb", "8") as hub: ...`` (the Hugging
Face Hub, tests/standins/hf_hub.py), or any stand-in that takes ``--port-file`` with :func:`standin_process`.
The integration tests' fixtures (tests/integration/conftest.py) keep these open for a test or a module.

- It runs in a process group of its own, with the caller's environment less every ``STANDIN_*`` and
  ``SGLANG_CACHE_DIR`` (an operator's settings never reach a test's stand-in) and then ``env``.
- ``--port-file FILE`` (a new file in ``workdir``) comes first on its command line, then the
  stand-in's own arguments (``sglang_standin``: ``--model-path m --port 0``, then ``flags``); it
  listens on a free port and writes it to the file atomically: ``standin.port``, ``standin.url``.
- Its stdout and stderr go to a log file in ``workdir`` (never a pipe nobody reads, which a chatty
  stand-in would fill and block on); with ``capture=True`` to pipes instead (``standin.proc.stdout``
  to read it while it runs; ``standin.stdout``, ``standin.stderr`` once stopped).
- With ``listen=True`` (the default) the block starts once it listens. A stand-in that exits first, or
  does not listen within ``START_TIMEOUT_S``, fails the test with the end of its output.
- On leaving the block it gets SIGTERM; one still running ``STOP_TIMEOUT_S`` later is killed with
  its whole group (:meth:`Standin.stop`, which a test may also call to close the port early).
- :meth:`Standin.wait_exit`: for a stand-in that exits by itself (a crash, an OOM), its exit status
  within a deadline, its whole group killed at the deadline.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from lib.playbook import tail

STANDINS = Path(__file__).resolve().parents[1] / "standins"
STANDIN = STANDINS / "sglang_api.py"
HUB = STANDINS / "hf_hub.py"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
POLL_S = 0.02


class Standin:
    """One running stand-in: ``proc``, ``port_file``, ``url`` once it listens, ``stdout``/``stderr`` once stopped."""

    def __init__(self, proc: subprocess.Popen, port_file: Path, log: Path | None = None) -> None:
        self.proc = proc
        self.port_file = port_file
        self.log = log
        self.port = 0
        self.url = ""
        self.stdout = ""
        self.stderr = ""

    def wait_listening(self, timeout: float = START_TIMEOUT_S) -> str:
        """Its base URL once it listens; the test fails if it exits first or does not listen in ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(FileNotFoundError, ValueError):
                self.port = int(self.port_file.read_text(encoding="utf-8"))
                self.url = f"http://127.0.0.1:{self.port}"
                return self.url
            if self.proc.poll() is not None:
                self.stop()
                pytest.fail(f"the stand-in exited {self.proc.returncode} before it listened:\n{self.tail()}")
            time.sleep(POLL_S)
        self.stop()
        pytest.fail(f"the stand-in did not listen within {timeout:g} s:\n{self.tail()}")

    def wait_exit(self, timeout: float = 15.0) -> int:
        """Its exit status, for one that exits by itself; killed with its group and the test failed at ``timeout``."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"the stand-in did not exit within {timeout:g} s; it was killed:\n{self.tail()}")
        self.stdout, self.stderr = out or "", err or ""
        return self.proc.returncode

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            out, err = self.proc.communicate(timeout=STOP_TIMEOUT_S)
            self.stdout, self.stderr = out or "", err or ""

    def stop(self) -> None:
        """SIGTERM (it ends its own way, printing what it prints on exit); SIGKILL to its group if it stays."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                out, err = self.proc.communicate(timeout=STOP_TIMEOUT_S)
                self.stdout, self.stderr = out or "", err or ""
            except subprocess.TimeoutExpired:
                self.kill()
                return
        # whatever it started and left behind goes with it
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def cpu_s(self) -> float:
        """user + system seconds the stand-in's own process has used so far (from /proc/PID/stat; benchmarks)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def tail(self) -> str:
        if self.log is not None and self.log.exists():
            return tail(self.log.read_text(encoding="utf-8", errors="replace"), "")
        return tail(self.stdout, self.stderr)


@contextlib.contextmanager
def standin_process(
    script: Path,
    workdir: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    capture: bool = False,
    listen: bool = True,
    timeout: float = START_TIMEOUT_S,
) -> Iterator[Standin]:
    """``script`` with ``--port-file`` (in ``workdir``) and ``args``, stopped on leaving the block."""
    stamp = f"{script.stem}-{time.monotonic_ns()}"
    port_file = workdir / f"{stamp}.port"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("STANDIN_") and k != "SGLANG_CACHE_DIR"}
    environ.update(env or {})
    argv = [sys.executable, str(script), "--port-file", str(port_file), *args]
    log = None if capture else workdir / f"{stamp}.log"
    with contextlib.ExitStack() as files:
        output = subprocess.PIPE if log is None else files.enter_context(log.open("w", encoding="utf-8"))
        proc = subprocess.Popen(
            argv,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.PIPE if capture else subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    standin = Standin(proc, port_file, log)
    try:
        if listen:
            standin.wait_listening(timeout)
        yield standin
    finally:
        standin.stop()


def sglang_standin(
    workdir: Path,
    *flags: str,
    env: Mapping[str, str] | None = None,
    capture: bool = False,
    listen: bool = True,
    timeout: float = START_TIMEOUT_S,
) -> contextlib.AbstractContextManager[Standin]:
    """The SGLang HTTP stand-in serving model ``m`` with ``flags``."""
    args = ("--model-path", "m", "--port", "0", *flags)
    return standin_process(STANDIN, workdir, *args, env=env, capture=capture, listen=listen, timeout=timeout)


def hub_standin(
    workdir: Path, *flags: str, env: Mapping[str, str] | None = None, timeout: float = START_TIMEOUT_S
) -> contextlib.AbstractContextManager[Standin]:
    """The Hugging Face Hub stand-in with ``flags``."""
    return standin_process(HUB, workdir, *flags, env=env, timeout=timeout)
