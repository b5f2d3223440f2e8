# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The scheduled re-gate (issue 23 part 4; role fleet_regate, module_utils/common/systemd_unit.py): the service and
timer rendered from the role's templates and checked by systemd-analyze verify, hostile values (a schedule
with a line feed, an inventory path with spaces or ';') as a named error or as the exact argument, and the
command's contract with playbooks/sglang.yml (one node out at a time, --tags bench)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from hypothesis import given
from hypothesis import strategies as st
from lib.playbook import REPO, rollout_play

from ansible_collections.gpufleet.sglang.plugins.filter.regate_units import regate_units as regate_filter
from ansible_collections.gpufleet.sglang.plugins.filter.rollout_serial import rollout_serial
from ansible_collections.gpufleet.sglang.plugins.module_utils.common.systemd_unit import (
    ROLLOUT_EXTRA_VARS,
    UnitValueError,
    calendar,
    env_assignment,
    exec_word,
    regate_units,
    timespan,
)

ROLE = REPO / "roles/fleet_regate"
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_systemd_analyze = pytest.mark.skipif(
    SYSTEMD_ANALYZE is None, reason="needs systemd-analyze (systemd's own parser)"
)


def role_defaults() -> dict:
    return yaml.safe_load((ROLE / "defaults/main.yml").read_text(encoding="utf-8"))


def settings(**overrides) -> dict:
    """The role's settings (vars/main.yml) from its plain defaults and values for what Ansible templates."""
    values = {k.removeprefix("fleet_regate_"): v for k, v in role_defaults().items()}
    values.update(
        name="gpufleet-regate",
        user="root",
        ansible_playbook="/opt/ansible/bin/ansible-playbook",
        inventory="/srv/fleet/inventories/lab",
        config="/srv/fleet/ansible.cfg",
        lock_file="/run/lock/gpufleet-regate.lock",
        flock="/usr/bin/flock",
    )
    values.pop("enabled")
    values.pop("unit_dir")
    values.update(overrides)
    return values


def render(template: str, units: dict) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(ROLE / "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,  # Ansible's template module default
    )
    return env.get_template(template).render(ansible_managed="Ansible managed", __fleet_regate_units=units)


def directive(unit: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in unit.splitlines() if line.startswith(key + "=")]


def systemd_words(value: str) -> list[str]:
    """A reference reading of an ExecStart= value by systemd.syntax(7) and systemd.service(7): words split
    at spaces, double quotes grouping, C escapes inside them, %% one %, $$ one $ (arguments only)."""
    words, pos = [], 0
    while pos < len(value):
        if value[pos] == " ":
            pos += 1
            continue
        assert value[pos] == '"', f"unquoted word at {pos}: {value[pos:]!r}"
        pos += 1
        word = []
        while value[pos] != '"':
            if value[pos] == "\\":
                assert value[pos + 1] in '\\"', f"unexpected escape {value[pos : pos + 2]!r}"
                word.append(value[pos + 1])
                pos += 2
            elif value[pos] in "%$":
                assert value[pos + 1] == value[pos], f"lone {value[pos]!r} would be expanded"
                word.append(value[pos])
                pos += 2
            else:
                word.append(value[pos])
                pos += 1
        pos += 1
        words.append("".join(word))
    return words


def verify(tmp_path: Path, units: dict) -> subprocess.CompletedProcess:
    """systemd-analyze verify on the rendered service and timer (the executable must exist: /usr/bin/flock)."""
    service = tmp_path / f"{units['name']}.service"
    timer = tmp_path / f"{units['name']}.timer"
    service.write_text(render("regate.service.j2", units), encoding="utf-8")
    timer.write_text(render("regate.timer.j2", units), encoding="utf-8")
    return subprocess.run(
        [SYSTEMD_ANALYZE, "verify", "--man=no", str(service), str(timer)], capture_output=True, text=True, check=False
    )


# --------------------------------------------------------------------------- the rendered units


def test_service_runs_the_gate_playbook_one_node_at_a_time_under_a_lock_and_a_deadline() -> None:
    units = regate_units(settings())
    service = render("regate.service.j2", units)
    argv = systemd_words(directive(service, "ExecStart")[0])
    assert argv[:5] == ["/usr/bin/flock", "--nonblock", "--conflict-exit-code", "75", "/run/lock/gpufleet-regate.lock"]
    assert argv[5:] == [
        "/opt/ansible/bin/ansible-playbook",
        "-i",
        "/srv/fleet/inventories/lab",
        "--extra-vars",
        "sglang_rollout_max_unavailable=1",
        "--tags",
        "bench",
        "gpufleet.sglang.sglang",
    ]
    assert units["argv"] == argv
    assert directive(service, "RuntimeMaxSec") == ["10800"]
    assert directive(service, "Type") == ["exec"]  # RuntimeMaxSec= has no effect on Type=oneshot
    assert directive(service, "User") == ["root"]
    assert '"ANSIBLE_CONFIG=/srv/fleet/ansible.cfg"' in directive(service, "Environment")
    assert directive(service, "StandardOutput") == ["journal"]
    timer = render("regate.timer.j2", units)
    assert directive(timer, "OnCalendar") == ["*-*-* 03:30:00"]
    assert directive(timer, "RandomizedDelaySec") == ["30min"]
    assert directive(timer, "Unit") == ["gpufleet-regate.service"]


def test_a_vault_goes_in_as_a_password_file_never_as_a_password() -> None:
    argv = regate_units(settings(vault_password_file="/home/ops/.vault-pass"))["argv"]
    assert argv[argv.index("--vault-password-file") + 1] == "/home/ops/.vault-pass"
    assert not any(word.startswith(("--vault-password=", "-e", "--extra-vars=")) for word in argv)
    # the only extra variable is the rollout's pace: nothing from the inventory reaches argv
    assert [argv[i + 1] for i, word in enumerate(argv) if word == "--extra-vars"] == [ROLLOUT_EXTRA_VARS]


@needs_systemd_analyze
def test_the_default_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    result = verify(tmp_path, regate_units(settings()))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr.strip() == "", result.stderr


@needs_systemd_analyze
@pytest.mark.parametrize(
    "inventory",
    [
        "/srv/my fleet/inventories/lab",
        "/srv/fleet;rm -rf ~/inventories/lab",
        "/srv/fleet/ ; /inventory",
        '/srv/"quoted"/back\\slash/inv',
        "/srv/%h/$HOME/${USER}/inv",
    ],
)
def test_a_hostile_inventory_path_is_one_exact_argument_of_a_unit_that_verifies(tmp_path: Path, inventory: str) -> None:
    units = regate_units(settings(inventory=inventory, config=inventory + "/ansible.cfg"))
    result = verify(tmp_path, units)
    assert result.returncode == 0, result.stdout + result.stderr
    service = render("regate.service.j2", units)
    argv = systemd_words(directive(service, "ExecStart")[0])
    assert argv[argv.index("-i") + 1] == inventory
    assert len(argv) == 13


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("on_calendar", "03:30\nExecStartPre=/bin/sh -c id", "fleet_regate_on_calendar .* contains a line feed"),
        ("on_calendar", "daily; reboot", "fleet_regate_on_calendar .* is not a calendar event"),
        ("on_calendar", "%h", "fleet_regate_on_calendar .* is not a calendar event"),
        ("on_calendar", "", "fleet_regate_on_calendar is empty"),
        ("inventory", "/srv/inv\n[Service]", "fleet_regate_inventory .* contains a line feed"),
        ("inventory", "inventories/lab", "fleet_regate_inventory .* is not an absolute path"),
        ("config", "/srv/a\rb", "fleet_regate_config .* contains a carriage return"),
        ("randomized_delay", "30min\nUser=root", "fleet_regate_randomized_delay .* contains a line feed"),
        ("randomized_delay", "soon", "fleet_regate_randomized_delay .* is not a time span"),
        ("deadline_s", "3h", "fleet_regate_deadline_s .* is not a whole number of seconds"),
        ("deadline_s", 10, "fleet_regate_deadline_s 10 is outside"),
        ("user", "root\nExecStart=/bin/true", "fleet_regate_user .* contains a line feed"),
        ("user", "Bad User", "fleet_regate_user .* is not a user name"),
        ("name", "../etc/passwd", "fleet_regate_name .* is not a unit name"),
        ("playbook", "site.yml", "fleet_regate_playbook .* neither a collection playbook"),
        ("vault_password_file", "vault-pass", "fleet_regate_vault_password_file .* is not an absolute path"),
    ],
)
def test_a_value_that_cannot_go_into_a_unit_is_a_named_error(field: str, value: object, message: str) -> None:
    with pytest.raises(UnitValueError, match=message):
        regate_units(settings(**{field: value}))
    with pytest.raises(AnsibleFilterError, match=r"^fleet_regate: .*nothing was installed$"):
        regate_filter(settings(**{field: value}))


@needs_systemd_analyze
def test_systemd_reads_every_calendar_event_and_span_the_checks_let_through(tmp_path: Path) -> None:
    events = ["*-*-* 03:30:00", "Sun *-*-* 04:00:00 UTC", "Mon..Fri 02:00", "daily", "*-*-01 05:15:00 Europe/Berlin"]
    for event in events:
        assert calendar(event, "x") == event
        check = subprocess.run([SYSTEMD_ANALYZE, "calendar", event], capture_output=True, text=True, check=False)
        assert check.returncode == 0, check.stderr
    for span in ["30min", "1h 30min", "90", "0", "2.5h"]:
        assert timespan(span, "x") == span
        check = subprocess.run([SYSTEMD_ANALYZE, "timespan", span], capture_output=True, text=True, check=False)
        assert check.returncode == 0, check.stderr


# --------------------------------------------------------------------------- properties


@given(st.text(min_size=1, max_size=60))
def test_exec_word_gives_back_the_text_or_refuses_it(text: str) -> None:
    if re.search(r"[\x00-\x1f\x7f\ud800-\udfff]", text):
        with pytest.raises(UnitValueError, match=r"^fleet_regate_inventory .* contains "):
            exec_word(text, "fleet_regate_inventory")
        return
    word = exec_word(text, "fleet_regate_inventory")
    assert "\n" not in word
    assert systemd_words(word) == [text]


@given(st.text(max_size=40))
def test_env_assignment_is_one_quoted_word_or_a_named_error(text: str) -> None:
    if not text or re.search(r"[\x00-\x1f\x7f\ud800-\udfff]", text):
        with pytest.raises(UnitValueError, match=r"^fleet_regate_config "):
            env_assignment("ANSIBLE_CONFIG", text, "fleet_regate_config")
        return
    assignment = env_assignment("ANSIBLE_CONFIG", text, "fleet_regate_config")
    assert assignment.startswith('"ANSIBLE_CONFIG=')
    assert assignment.endswith('"')
    body = assignment[len('"ANSIBLE_CONFIG=') : -1]
    assert re.sub(r'\\[\\"]|%%', "", body).count('"') == 0
    assert "\n" not in assignment


@given(
    st.fixed_dictionaries(
        {},
        optional={
            key: st.one_of(st.text(max_size=30), st.integers(), st.none(), st.booleans())
            for key in ("on_calendar", "randomized_delay", "inventory", "playbook", "user", "name", "deadline_s")
        },
    )
)
def test_any_settings_render_a_unit_without_a_stray_line_or_a_named_error(overrides: dict) -> None:
    message = ""
    try:
        units = regate_units(settings(**overrides))
    except UnitValueError as exc:
        message = str(exc)
    if message:
        assert message.startswith("fleet_regate_"), message
        return
    for template in ("regate.service.j2", "regate.timer.j2"):
        text = render(template, units)
        keys = [line.split("=", 1)[0] for line in text.splitlines() if line and not line.startswith(("#", "["))]
        assert set(keys) <= {
            "Description", "Wants", "After", "Type", "User", "WorkingDirectory", "Environment", "ExecStart",
            "RuntimeMaxSec", "TimeoutStopSec", "SyslogIdentifier", "StandardOutput", "StandardError",
            "NoNewPrivileges", "PrivateTmp", "ProtectSystem", "Nice", "OnCalendar", "RandomizedDelaySec",
            "AccuracySec", "Persistent", "Unit", "WantedBy",
        }, text  # fmt: skip


def test_settings_of_the_wrong_shape_are_named() -> None:
    with pytest.raises(UnitValueError, match="not a mapping"):
        regate_units(["gpufleet-regate"])
    incomplete = settings()
    del incomplete["lock_file"]
    with pytest.raises(UnitValueError, match="fleet_regate_lock_file is missing"):
        regate_units(incomplete)


# --------------------------------------------------------------------------- the contract with the playbooks


def test_one_node_out_at_a_time_is_what_the_extra_var_gives_playbooks_sglang() -> None:
    play = rollout_play()
    # serial is built from sglang_rollout_max_unavailable, which `serial` sees only as an extra var
    assert play["serial"] == "{{ sglang_rollout_serial }}"
    assert "rollout_serial(sglang_rollout_max_unavailable," in play["vars"]["sglang_rollout_serial"]
    name, value = ROLLOUT_EXTRA_VARS.split("=")
    assert name in play["vars"]
    assert rollout_serial(5, value) == [1, 1, 1, 1, 1]


def test_site_installs_the_timer_only_when_asked() -> None:
    site = yaml.safe_load((REPO / "site.yml").read_text(encoding="utf-8"))
    entry = next(p for p in site if p["ansible.builtin.import_playbook"] == "playbooks/regate.yml")
    assert entry["tags"] == ["never", "regate"]
    play = yaml.safe_load((REPO / "playbooks/regate.yml").read_text(encoding="utf-8"))[0]
    assert play["hosts"] == "localhost"
    assert play["connection"] == "local"
    assert [r["role"] for r in play["roles"]] == ["gpufleet.sglang.fleet_regate"]


def test_the_role_refuses_before_writing_and_guards_check_mode() -> None:
    tasks = yaml.safe_load((ROLE / "tasks/main.yml").read_text(encoding="utf-8"))
    names = [t["name"] for t in tasks]
    write = names.index("Write the re-gate service and timer")
    assert names.index("Check the re-gate's settings (each refusal names the variable)") < write
    assert names.index("Refuse a calendar event that systemd does not read") < write
    timer = tasks[names.index("Enable and start the timer, or stop and disable it")]
    assert timer["when"] == "not ansible_check_mode or __fleet_regate_timer_file.stat.exists"
    handlers = yaml.safe_load((ROLE / "handlers/main.yml").read_text(encoding="utf-8"))
    assert all(h["when"] == "not ansible_check_mode" for h in handlers)
