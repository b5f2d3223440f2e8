# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Start the SGLang server with its API keys blanked out of what it writes to the journal.

The unit runs (docs/sglang-server-hardening.md, "The API key and the journal"):

    python sglang_log_redact.py -- <launcher ...> --config /etc/sglang/<service>.yaml

SGLang 0.5.23 logs its resolved arguments at start (``server_args={...}``, sglang/srt/entrypoints/
engine.py), ``api_key`` and ``admin_api_key`` included, and systemd sends that to the journal,
which root and the adm/systemd-journal groups read. This reads the keys from the options file the
command names (``--config FILE``, the JSON text the role writes), then:

- forks a redactor off twice (so that it is no descendant of the server: SGLang kills its own
  process tree at shutdown), which keeps the unit's original stdout/stderr and copies the server's
  output to them line by line with every form of each key (as written, repr- and JSON-escaped,
  secret_mask.py beside this file) replaced by ``********``; it ignores SIGTERM/SIGINT/SIGHUP and
  ends when the last writer closes the pipe, so the server's shutdown lines are kept too;
- points this process's stdout and stderr at the pipe (one pipe where both are the same stream,
  as under systemd, so their order is kept) and execs the command in place: the server keeps the
  unit's main PID, gets systemd's signals directly and its exit status is the unit's.

No key in the options file: the command is exec'd as it is, nothing forked. A file that cannot be
read or is not a JSON object: exit 78 (EX_CONFIG) with the reason, the server is not started
unredacted. Standard library only; any Python 3.10+ runs it (the release venv's, by default).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import sys
from collections.abc import Callable

SECRET_OPTIONS = ("api-key", "admin-api-key", "api_key", "admin_api_key")
EX_CONFIG = 78
LONG_LINE = 1 << 16  # a line this long without a newline is passed on in pieces


class RedactError(ValueError):
    """The options file cannot give the keys; the message names the file and the reason, never a value."""


def config_path(command: list[str]) -> str | None:
    """The ``--config FILE`` of the server command (``--config=FILE`` too), else None."""
    for index, word in enumerate(command):
        if word == "--config" and index + 1 < len(command):
            return command[index + 1]
        if word.startswith("--config="):
            return word.split("=", 1)[1]
    return None


def secrets_from_config(text: str, path: str = "the options file") -> list[str]:
    """The non-empty values of the key options of the options file's JSON object."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RedactError(
            f"{path} is not the JSON object the sglang_server role writes: {exc.__class__.__name__}"
        ) from None
    if not isinstance(data, dict):
        raise RedactError(f"{path} holds a {type(data).__name__}, not an object of options")
    return [str(data[name]) for name in SECRET_OPTIONS if data.get(name) not in (None, "", False)]


class LineRedactor:
    """Blanks every form of the secrets out of a byte stream fed in arbitrary pieces.

    Whole lines go out as soon as their newline arrives; a line longer than ``long_line`` bytes is
    passed on in pieces, holding back the last (longest form - 1) bytes so that a key split across
    two reads is still found.
    """

    def __init__(self, forms: list[str], mask: str, long_line: int = LONG_LINE) -> None:
        encoded = {form.encode("utf-8", "surrogateescape") for form in forms if form}
        self.forms = sorted(encoded, key=lambda f: (-len(f), f))
        self.mask = mask.encode()
        self.keep = max((len(f) for f in self.forms), default=1) - 1
        self.long_line = max(long_line, self.keep + 1)
        self.pending = b""

    def _blank(self, data: bytes) -> bytes:
        for form in self.forms:
            if form in data:
                data = data.replace(form, self.mask)
        return data

    def _cut(self) -> int:
        """Where the pending partial line may be cut without splitting a form that is there in full."""
        cut = len(self.pending) - self.keep
        moved = True
        while moved and cut > 0:
            moved = False
            for form in self.forms:  # an occurrence starting in [cut - len + 1, cut) runs across the cut
                start = self.pending.find(form, max(0, cut - len(form) + 1), cut - 1 + len(form))
                if 0 <= start < cut:
                    cut, moved = start, True
        return max(cut, 0)

    def feed(self, data: bytes) -> bytes:
        self.pending += data
        out = b""
        newline = self.pending.rfind(b"\n")
        if newline >= 0:
            out, self.pending = self._blank(self.pending[: newline + 1]), self.pending[newline + 1 :]
        if len(self.pending) > self.long_line:
            cut = self._cut()
            out += self._blank(self.pending[:cut])
            self.pending = self.pending[cut:]
        return out

    def flush(self) -> bytes:
        out, self.pending = self._blank(self.pending), b""
        return out


def _write_all(fd: int, data: bytes) -> None:
    while data:
        try:
            data = data[os.write(fd, data) :]
        except InterruptedError:
            continue


def pump(sources: dict[int, int], make: Callable[[], LineRedactor]) -> None:
    """Copy each read fd to its write fd through its own redactor until every one is at EOF."""
    import selectors  # noqa: PLC0415 - only the redactor process needs it

    selector = selectors.DefaultSelector()
    redactors = {}
    for read_fd, write_fd in sources.items():
        selector.register(read_fd, selectors.EVENT_READ, write_fd)
        redactors[read_fd] = make()
    while selector.get_map():
        for key, events in selector.select():
            if not events:
                continue
            chunk = os.read(key.fd, 65536)
            if chunk:
                out = redactors[key.fd].feed(chunk)
            else:
                out = redactors[key.fd].flush()
                selector.unregister(key.fd)
                os.close(key.fd)
            if out:
                # the journal went away: keep reading, or the server blocks on a full pipe
                with contextlib.suppress(OSError):
                    _write_all(key.data, out)


def _load_secret_mask():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    return importlib.import_module("secret_mask")


def _start_redactor(pipes: list[tuple[int, int]], targets: list[int], forms: list[str], mask: str) -> None:
    """Fork the redactor off twice (reparented away from the server); return in the parent."""
    child = os.fork()
    if child:
        os.waitpid(child, 0)
        return
    if os.fork():
        os._exit(0)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    for pipe in pipes:
        os.close(pipe[1])
    sources = {pipe[0]: target for pipe, target in zip(pipes, targets, strict=True)}
    try:
        pump(sources, lambda: LineRedactor(forms, mask))
    finally:
        os._exit(0)


def main(argv: list[str]) -> int:
    command = argv[1:] if argv[:1] == ["--"] else argv
    if not command:
        print("sglang_log_redact: usage: sglang_log_redact.py -- COMMAND ... --config FILE", file=sys.stderr)
        return 2
    path = config_path(command)
    secrets: list[str] = []
    if path is not None:
        try:
            with open(path, encoding="utf-8") as handle:
                secrets = secrets_from_config(handle.read(), path)
        except (OSError, UnicodeDecodeError, RedactError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            print(
                f"sglang_log_redact: cannot read the API keys from {path}: {reason}; not starting the server "
                "unredacted",
                file=sys.stderr,
            )
            return EX_CONFIG
    if secrets:
        masker = _load_secret_mask()
        forms = masker.secret_forms(secrets)
        same = os.path.samestat(os.fstat(1), os.fstat(2))
        pipes = [os.pipe()] if same else [os.pipe(), os.pipe()]
        targets = [os.dup(1)] if same else [os.dup(1), os.dup(2)]
        sys.stdout.flush()
        sys.stderr.flush()
        _start_redactor(pipes, targets, forms, masker.MASK)
        os.dup2(pipes[0][1], 1)
        os.dup2(pipes[-1][1], 2)
        for read_fd, write_fd in pipes:
            os.close(read_fd)
            os.close(write_fd)
        for fd in targets:
            os.close(fd)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"sglang_log_redact: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
