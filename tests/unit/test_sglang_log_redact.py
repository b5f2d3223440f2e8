# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""roles/sglang_server/files/sglang_log_redact.py (issue 22): the API key never reaches the journal,
the server keeps its PID, signals and exit status; the stand-in logs SGLang's own argument dump."""

from __future__ import annotations

import ast
import importlib.util
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from standins import sglang_api

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.secret_mask import MASK, SECRET_FLAGS, secret_forms

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "roles/sglang_server/files/sglang_log_redact.py"
SECRET_MASK = REPO / "plugins/module_utils/common/secret_mask.py"


def _load():
    spec = importlib.util.spec_from_file_location("sglang_log_redact", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


redact = _load()


def stream(redactor, pieces: list[bytes]) -> bytes:
    return b"".join(redactor.feed(piece) for piece in pieces) + redactor.flush()


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


KEYS = st.text(st.characters(codec="utf-8", exclude_characters="*", exclude_categories=("Cc", "Cs")), min_size=6)
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@given(
    key=KEYS,
    parts=st.lists(TEXT, min_size=1, max_size=6),
    quoted=st.lists(st.booleans(), min_size=6, max_size=6),
    cuts=st.lists(st.integers(0, 400), max_size=12),
    long_line=st.integers(1, 64),
)
def test_no_form_of_the_key_survives_any_split(key, parts, quoted, cuts, long_line) -> None:
    """However the server's output is cut into reads, and however long its lines are, neither the key
    nor its repr/JSON-escaped form (how server_args={...} prints it) comes out."""
    pieces = []
    for index, part in enumerate(parts):
        pieces += [part, repr(key)[1:-1] if quoted[index] else key]
    data = "\n".join(pieces).encode("utf-8")
    out = stream(redact.LineRedactor(secret_forms([key]), MASK, long_line), split_at(data, cuts))
    text = out.decode("utf-8", "replace")
    assert key not in text
    assert repr(key)[1:-1] not in text
    assert text.count(MASK) >= len(parts)


@given(data=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=10), long_line=st.integers(1, 64))
def test_output_without_the_key_passes_unchanged(data, cuts, long_line) -> None:
    forms = secret_forms(["sk-0123456789abcdef"])
    out = stream(redact.LineRedactor(forms, MASK, long_line), split_at(data, cuts))
    assert out == data


def test_whole_lines_go_out_at_their_newline() -> None:
    redactor = redact.LineRedactor(["secret-key"], MASK)
    assert redactor.feed(b"a secret-") == b""
    assert redactor.feed(b"key b\npartial") == b"a ******** b\n"
    assert redactor.flush() == b"partial"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["python", "-m", "sglang.launch_server", "--config", "/etc/sglang/s.yaml"], "/etc/sglang/s.yaml"),
        (["launcher", "--config=/etc/x.yaml"], "/etc/x.yaml"),
        (["launcher", "--model-path", "/m"], None),
        (["launcher", "--config"], None),
    ],
)
def test_config_path(command, expected) -> None:
    assert redact.config_path(command) == expected


def test_the_redactors_key_options_are_the_secret_flags() -> None:
    """The redactor runs alone on the node and reads the key names before it loads secret_mask.py:
    its list is a copy, proved equal here to the one list of secret flags (secret_mask.SECRET_FLAGS)."""
    assert (*SECRET_FLAGS, *(flag.replace("-", "_") for flag in SECRET_FLAGS)) == redact.SECRET_OPTIONS


def test_secrets_from_config() -> None:
    text = json.dumps({"api-key": "k1", "admin-api-key": "k2", "tp-size": "8", "enable-metrics": True})
    assert redact.secrets_from_config(text) == ["k1", "k2"]
    assert redact.secrets_from_config('{"tp-size": "8"}') == []


@given(text=st.text(max_size=60))
def test_secrets_from_config_refuses_what_is_no_options_object(text) -> None:
    """Any text: the keys, or RedactError naming the file (never the text), never another exception."""
    try:
        is_object = isinstance(json.loads(text), dict)
    except ValueError:
        is_object = False
    if is_object:
        assert all(isinstance(s, str) and s for s in redact.secrets_from_config(text, "/etc/sglang/s.yaml"))
    else:
        with pytest.raises(redact.RedactError, match=r"^/etc/sglang/s\.yaml (is not|holds) "):
            redact.secrets_from_config(text, "/etc/sglang/s.yaml")


# ----------------------------------------------------------------------------- the launcher as a process

SERVER = """
import os, signal, sys, time
sys.stderr.write("[2026-12-01 10:00:00] server_args={'model_path': '/m', "
                 "'api_key': 'sk-live-0123456789', 'admin_api_key': None}\\n")
print("pid", os.getpid(), flush=True)
def term(*_):
    print("Gracefully exiting sk-live-0123456789", flush=True)
    sys.exit(7)
signal.signal(signal.SIGTERM, term)
open(sys.argv[1], "w").close()
time.sleep(30)
"""


@pytest.fixture
def deployed(tmp_path: Path) -> Path:
    """The two files as the role installs them, side by side, and an options file with a key."""
    shutil.copy(SCRIPT, tmp_path / "sglang_log_redact.py")
    shutil.copy(SECRET_MASK, tmp_path / "secret_mask.py")
    (tmp_path / "server.py").write_text(SERVER, encoding="utf-8")
    (tmp_path / "s.yaml").write_text(json.dumps({"api-key": "sk-live-0123456789", "tp-size": "8"}), encoding="utf-8")
    return tmp_path


def _start(deployed: Path, log):
    ready = deployed / "ready"
    command = [sys.executable, str(deployed / "server.py"), str(ready), "--config", str(deployed / "s.yaml")]
    proc = subprocess.Popen(
        [sys.executable, str(deployed / "sglang_log_redact.py"), "--", *command], stdout=log, stderr=log
    )
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    return proc


def test_server_keeps_its_pid_gets_sigterm_and_its_exit_status(deployed: Path) -> None:
    log_path = deployed / "journal.txt"
    with open(log_path, "wb") as log:
        proc = _start(deployed, log)
        assert Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")[1].endswith(b"server.py")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 7
    deadline = time.monotonic() + 10
    while b"Gracefully exiting" not in log_path.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.05)  # the redactor drains the pipe after the server has gone
    journal = log_path.read_text(encoding="utf-8")
    assert "sk-live-0123456789" not in journal
    assert "'api_key': '********'" in journal
    assert f"pid {proc.pid}" in journal
    assert "Gracefully exiting ********" in journal


def test_a_broken_options_file_keeps_the_server_from_starting(deployed: Path) -> None:
    (deployed / "s.yaml").write_text("api-key: [", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(deployed / "sglang_log_redact.py"), "--", "true", "--config", str(deployed / "s.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == redact.EX_CONFIG
    assert "not starting the server unredacted" in result.stderr
    assert str(deployed / "s.yaml") in result.stderr


def test_no_key_execs_the_command_in_place(deployed: Path) -> None:
    (deployed / "s.yaml").write_text('{"tp-size": "8"}', encoding="utf-8")
    code = "import os; print(os.getpid(), os.getppid())"
    result = subprocess.run(
        [
            sys.executable,
            str(deployed / "sglang_log_redact.py"),
            "--",
            sys.executable,
            "-c",
            code,
            "--config",
            str(deployed / "s.yaml"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0
    assert int(result.stdout.split()[1]) == os.getpid()  # no fork in between: the command is the child


# ----------------------------------------------------------------------------- the stand-in's dump

# SGLang 0.5.23: logging.basicConfig(format="[%(asctime)s] %(message)s", datefmt="%Y-%m-%d %H:%M:%S") and
# logger.info(f"server_args={_server_args_for_logging(server_args)}") (sglang/srt/entrypoints/engine.py)
SGLANG_DUMP = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] server_args=(\{.*\})$")


def test_stand_in_logs_sglangs_argument_dump_with_the_key() -> None:
    flags = sglang_api.parse_flags(["--model-path", "/m", "--tp-size", "8", "--api-key", "k3y", "--enable-metrics"])
    match = SGLANG_DUMP.match(sglang_api.server_args_line(flags))
    assert match
    dumped = ast.literal_eval(match.group(1))
    assert dumped["api_key"] == "k3y"
    assert dumped["admin_api_key"] is None
    assert dumped["tp_size"] == 8
    assert dumped["enable_metrics"] is True
    assert f"'api_key': {'k3y'!r}" in match.group(0)
