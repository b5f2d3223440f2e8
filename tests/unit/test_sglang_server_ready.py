"""sglang_server_ready: the unit verdict that ends a readiness wait early, and the probe timeout."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError
from ansible.plugins.test.core import version_compare as version_test

from ansible_collections.gpufleet.sglang.plugins.action import sglang_tune as tune_action
from ansible_collections.gpufleet.sglang.plugins.filter.sglang_ready_path import sglang_ready_path
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.server_ready import (
    UNIT_PROPERTIES,
    journal_argv,
    journal_lines,
    parse_show,
    probe_timeout,
    ready_path,
    restarts,
    time_to_ready,
    unit_verdict,
    wait_options,
)
from ansible_collections.gpufleet.sglang.plugins.modules import sglang_server_ready

# systemctl show output of a real crash-looping unit (systemd 252): between two restarts
AUTO_RESTART = """ActiveState=activating
SubState=auto-restart
Result=exit-code
NRestarts=4
MainPID=0
ExecMainCode=1
ExecMainStatus=1
"""


def test_parse_show() -> None:
    props = parse_show(AUTO_RESTART + "Environment=A=1 B=2\nnoise\n")
    assert props["SubState"] == "auto-restart"
    assert props["Environment"] == "A=1 B=2"
    assert restarts(props) == 4
    assert restarts({}) == 0
    assert restarts({"NRestarts": "[not set]"}) == 0


@pytest.mark.parametrize(
    ("props", "at_start", "limit", "verdict"),
    [
        ({"ActiveState": "active", "SubState": "running", "NRestarts": "0"}, 0, 3, None),
        ({"ActiveState": "activating", "SubState": "auto-restart", "NRestarts": "3"}, 0, 3, None),
        ({"ActiveState": "activating", "SubState": "auto-restart", "NRestarts": "4"}, 0, 3, "crashloop"),
        # restarts before the wait began do not count
        ({"ActiveState": "activating", "SubState": "auto-restart", "NRestarts": "9"}, 7, 3, None),
        ({"ActiveState": "activating", "NRestarts": "1"}, 0, 0, "crashloop"),
        ({"ActiveState": "failed", "Result": "exit-code", "NRestarts": "0"}, 0, 3, "failed"),
        ({"ActiveState": "inactive", "SubState": "dead"}, 0, 3, "stopped"),
    ],
)
def test_unit_verdict(props: dict, at_start: int, limit: int, verdict: str | None) -> None:
    result = unit_verdict(props, at_start, limit)
    assert (result[0] if result else None) == verdict


def test_verdict_reason_says_what_happened() -> None:
    verdict = unit_verdict(parse_show(AUTO_RESTART), 0, 3)
    assert verdict is not None
    assert verdict[0] == "crashloop"
    assert "restarted 4 times during the wait, more than 3" in verdict[1]
    assert "result exit-code" in verdict[1]
    assert "status 1" in verdict[1]


@pytest.mark.parametrize(("remaining", "expected"), [(500.0, 60.0), (12.5, 12.5), (0.2, 1.0), (-3.0, 1.0)])
def test_probe_timeout_never_passes_the_deadline_by_more_than_a_second(remaining: float, expected: float) -> None:
    assert probe_timeout(remaining) == expected


def test_journal_since_the_start_the_wait_is_about() -> None:
    # as systemctl show prints it; journalctl --since takes it as is (checked on systemd 252)
    argv = journal_argv("/usr/bin/journalctl", "sglang-server", 20, "Mon 2026-11-30 20:31:02 UTC")
    assert argv == [
        "/usr/bin/journalctl",
        "--no-pager",
        "-u",
        "sglang-server",
        "-n",
        "20",
        "--since",
        "Mon 2026-11-30 20:31:02 UTC",
    ]
    assert "InactiveExitTimestamp" in UNIT_PROPERTIES


@pytest.mark.parametrize("never", ["", "n/a"])
def test_journal_of_a_unit_never_started_is_its_last_lines(never: str) -> None:
    assert journal_argv("journalctl", "u", 5, never) == ["journalctl", "--no-pager", "-u", "u", "-n", "5"]


# --------------------------------------------------------------------------- readiness path by version


@pytest.mark.parametrize(
    ("version", "override", "path"),
    [
        ("0.5.23", "", "/ready"),
        ("0.5.24", "", "/ready"),
        ("0.6.0", "", "/ready"),
        ("0.5.23rc1", "", "/ready"),  # ordered like Ansible's (loose) version test
        ("0.5.22", "", "/health_generate"),
        ("0.5.9", "", "/health_generate"),
        ("0.5.12.post1", "", "/health_generate"),
        ("0.5.9", "/custom", "/custom"),
        ("0.5.23", "/health_generate", "/health_generate"),
    ],
)
def test_ready_path_by_version(version, override, path):
    assert ready_path(version, override) == path
    assert sglang_ready_path(version, override) == path
    # the same order as the `version` test the roles used before (`is version('0.5.23', '>=')`)
    if not override:
        assert (path == "/ready") == version_test(version, "0.5.23", ">=")


def test_ready_path_names_a_version_it_cannot_order():
    with pytest.raises(AnsibleFilterError, match="sglang_ready_path: SGLang version 'main' cannot be compared"):
        sglang_ready_path("main")


def test_journal_lines_mask_the_key_longest_first() -> None:
    assert journal_lines(0, "key=abc abcd", "", ["abc", "abcd", ""]) == ["key=******** ********"]


def test_journal_lines_mask_escaped_forms_of_the_key() -> None:
    """One masker (secret_mask): SGLang's server_args dump shows a key repr-escaped (a doubled backslash)."""
    key = "s3cr\\et-key"
    out = f"server_args={{'api_key': {key!r}}}\nnext {json.dumps(key)}"
    lines = journal_lines(0, out, "", [key])
    assert lines == ["server_args={'api_key': '********'}", 'next "********"']


def test_journal_lines_say_why_journalctl_failed_masked() -> None:
    lines = journal_lines(1, "", "no access to abcdef", ["abcdef"])
    assert lines == ["journalctl failed (rc 1): no access to ********"]


@pytest.mark.parametrize(
    ("start_us", "ready_at", "waited", "expected"),
    [
        ("1000000000", 1312.44, 300.0, 312.4),  # systemd's start at 1000 s of CLOCK_MONOTONIC
        ("0", 1312.44, 300.04, 300.0),  # never started: the wait's own seconds
        ("", 1312.44, 300.0, 300.0),
        ("[not set]", 1312.44, 300.0, 300.0),
        ("2000000000", 1312.44, 300.0, 300.0),  # a start after the 200: impossible, not used
        ("1100000000", 1312.44, 300.0, 300.0),  # less than the wait itself: not used
    ],
)
def test_time_to_ready_from_the_units_start(start_us: str, ready_at: float, waited: float, expected: float) -> None:
    assert time_to_ready(start_us, ready_at, waited) == expected
    assert "InactiveExitTimestampMonotonic" in UNIT_PROPERTIES


def test_the_wait_options_make_the_modules_and_the_tune_actions_specs_as_they_were_spelled() -> None:
    """wait_options builds the readiness options of both: the specs equal those each spelled out before."""
    assert sglang_server_ready.ARGUMENT_SPEC == {
        "service": {"type": "str", "required": True},
        "url": {"type": "str", "required": True},
        "timeout_s": {"type": "int", "required": True},
        "poll_s": {"type": "int", "default": 15},
        "max_restarts": {"type": "int", "default": 3},
        "journal_lines": {"type": "int", "default": 50},
        "metrics_url": {"type": "str", "default": ""},
        "redact": {"type": "list", "elements": "str", "default": [], "no_log": True},
    }
    assert tune_action.ARGUMENT_SPEC["ready"] == {
        "type": "dict",
        "required": True,
        "options": {
            "url": {"type": "str", "required": True},
            "timeout_s": {"type": "int", "default": 1800},
            "poll_s": {"type": "int", "default": 15},
            "max_restarts": {"type": "int", "default": 1},
            "journal_lines": {"type": "int", "default": 20},
        },
    }
    # each call builds its own dicts: one caller's spec cannot change another's
    assert (
        wait_options(timeout_s=1, max_restarts=0, journal_lines=0)["url"]
        is not wait_options(timeout_s=1, max_restarts=0, journal_lines=0)["url"]
    )
