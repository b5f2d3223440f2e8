# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The SGLang HTTP stand-in (tests/standins/sglang_api.py) started and stopped in one way for the unit
tests: ``with sglang_standin(tmp_path, "--enable-metrics", env={...}) as standin: ... standin.url``.

- It runs in a process group of its own, with the caller's environment less every ``STANDIN_*`` and
  ``SGLANG_CACHE_DIR`` (an operator's settings never reach a test's stand-in) and then ``env``.
- ``--model-path m --port 0 --port-file DIR/port`` come first on its command line (a free port, read
  back from the file it writes atomically); ``flags`` follow.
- With ``listen=True`` (the default) the block starts once it listens: ``standin.url``. A stand-in that
  exits first, or does not listen within ``START_TIMEOUT_S``, fails the test with its output.
- On leaving the block it gets SIGTERM; one still running ``STOP_TIMEOUT_S`` later is killed with
  its whole group. With ``capture=True`` its stdout and stderr are kept (``standin.stdout``,
  ``standin.stderr`` after the block; ``standin.proc.stdout`` to read it while it runs).
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

STANDIN = Path(__file__).resolve().parents[1] / "standins" / "sglang_api.py"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
POLL_S = 0.02


class Standin:
    """One running stand-in: ``proc``, ``port_file``, ``url`` once it listens, ``stdout``/``stderr`` once stopped."""

    def __init__(self, proc: subprocess.Popen, port_file: Path) -> None:
        self.proc = proc
        self.port_file = port_file
        self.url = ""
        self.stdout = ""
        self.stderr = ""

    def wait_listening(self, timeout: float = START_TIMEOUT_S) -> str:
        """Its base URL once it listens; the test fails if it exits first or does not listen in ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(FileNotFoundError, ValueError):
                self.url = f"http://127.0.0.1:{int(self.port_file.read_text(encoding='utf-8'))}"
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

    def tail(self) -> str:
        return tail(self.stdout, self.stderr)


@contextlib.contextmanager
def sglang_standin(
    workdir: Path,
    *flags: str,
    env: Mapping[str, str] | None = None,
    capture: bool = False,
    listen: bool = True,
    timeout: float = START_TIMEOUT_S,
) -> Iterator[Standin]:
    """The stand-in with ``flags`` and ``env``, its port file in ``workdir``, stopped on leaving the block."""
    port_file = workdir / "port"
    port_file.unlink(missing_ok=True)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("STANDIN_") and k != "SGLANG_CACHE_DIR"}
    environ.update(env or {})
    argv = [sys.executable, str(STANDIN), "--model-path", "m", "--port", "0", "--port-file", str(port_file), *flags]
    output = subprocess.PIPE if capture else subprocess.DEVNULL
    proc = subprocess.Popen(
        argv,
        env=environ,
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=output,
        text=True,
        start_new_session=True,
    )
    standin = Standin(proc, port_file)
    try:
        if listen:
            standin.wait_listening(timeout)
        yield standin
    finally:
        standin.stop()
