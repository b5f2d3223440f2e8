# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rendered sglang-server and nvidia-uvm-init units (issue 22): ordering after the NVIDIA units by
their one name, pidfd_getfd in the syscall filter, the log redactor in front of the launcher."""

from __future__ import annotations

import shlex
from pathlib import Path

import jinja2
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES = REPO / "roles"


def defaults(role: str) -> dict:
    return yaml.safe_load((ROLES / role / "defaults/main.yml").read_text(encoding="utf-8"))


def render(role: str, template: str, variables: dict) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(ROLES / role / "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["split"] = lambda text: str(text).split()
    return env.get_template(template).render(ansible_managed="Ansible managed", **variables)


def server_vars(**overrides) -> dict:
    """The role's plain defaults, the nvidia_common names, and values for what Ansible would template."""
    values = {k: v for k, v in defaults("sglang_server").items() if not (isinstance(v, str) and "{{" in v)}
    values.update(defaults("nvidia_common"))
    values.update(
        sglang_server_version="0.5.23",
        sglang_server_model_path="/models/m",
        sglang_server_release_dir="/opt/sglang/releases/0.5.23-abc",
        sglang_server_launcher="/opt/sglang/releases/0.5.23-abc/venv/bin/python -m sglang.launch_server",
        sglang_server_log_redactor_python="/opt/sglang/releases/0.5.23-abc/venv/bin/python",
        __sglang_server_env_file="/etc/sglang/sglang-server.env",
        __sglang_server_secrets_file="/etc/sglang/sglang-server.secrets.env",
        __sglang_server_config_text='{"api-key": "k"}\n',
        __sglang_server_config_file="/etc/sglang/sglang-server.yaml",
        __sglang_server_argv=["--model-path", "/models/m"],
        __sglang_server_redactor="/usr/local/lib/gpufleet-sglang/sglang_log_redact.py",
        sglang_server_timeout_stop_sec=690,
    )
    values.update(overrides)
    return values


def directives(unit: str, section: str) -> dict[str, list[str]]:
    """Every `Key=value` of one section, the values of repeated keys and words joined in order."""
    found: dict[str, list[str]] = {}
    current = ""
    for raw in unit.splitlines():
        line = raw.strip()
        if line.startswith("["):
            current = line
        elif current == f"[{section}]" and "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            found.setdefault(key, []).extend(value.split())
    return found


def test_server_unit_is_ordered_after_the_nvidia_units_by_their_shared_names() -> None:
    names = defaults("nvidia_common")
    unit = directives(render("sglang_server", "sglang-server.service.j2", server_vars()), "Unit")
    assert names["nvidia_driver_uvm_init_unit"] in unit["After"]
    assert names["nvidia_driver_persistenced_unit"] in unit["After"]
    assert names["nvidia_driver_uvm_init_unit"] in unit["Wants"]
    # absent units in a container must not fail it
    assert "Requires" not in unit
    assert "BindsTo" not in unit


def test_renamed_units_follow_into_the_server_unit() -> None:
    unit = directives(
        render(
            "sglang_server",
            "sglang-server.service.j2",
            server_vars(nvidia_driver_uvm_init_unit="x-uvm.service", nvidia_driver_persistenced_unit="x-p.service"),
        ),
        "Unit",
    )
    assert {"x-uvm.service", "x-p.service"} <= set(unit["After"])
    assert "nvidia-uvm-init.service" not in unit["After"]


def test_nvidia_driver_installs_and_enables_the_units_under_the_shared_names() -> None:
    tasks = yaml.safe_load((ROLES / "nvidia_driver/tasks/host_configure.yml").read_text(encoding="utf-8"))
    by_template = {t["ansible.builtin.template"]["src"]: t for t in tasks if "ansible.builtin.template" in t}
    services = [t["ansible.builtin.systemd_service"]["name"] for t in tasks if "ansible.builtin.systemd_service" in t]
    uvm = by_template["nvidia-uvm-init.service.j2"]["ansible.builtin.template"]["dest"]
    persistenced = by_template["nvidia-persistenced.service.j2"]["ansible.builtin.template"]["dest"]
    assert uvm == "/etc/systemd/system/{{ nvidia_driver_uvm_init_unit }}"
    assert persistenced == "/etc/systemd/system/{{ nvidia_driver_persistenced_unit }}"
    assert services == ["{{ nvidia_driver_uvm_init_unit }}", "{{ nvidia_driver_persistenced_unit }}"]


def test_both_roles_get_the_names_from_nvidia_common() -> None:
    for role in ("nvidia_driver", "sglang_server"):
        meta = yaml.safe_load((ROLES / role / "meta/main.yml").read_text(encoding="utf-8"))
        assert {"role": "gpufleet.sglang.nvidia_common"} in meta["dependencies"], role
    for role in ("nvidia_driver", "sglang_server"):
        assert "nvidia_driver_uvm_init_unit" not in (defaults(role) or {}), f"{role} restates the name"


def test_uvm_init_unit_orders_itself_before_no_unit_of_the_server() -> None:
    """The device-node unit named `sglang.service`, which no role installs; the server orders itself now."""
    unit = directives(render("nvidia_driver", "nvidia-uvm-init.service.j2", defaults("nvidia_common")), "Unit")
    assert unit["Before"] == ["pve-guests.service", "lxc.service"]


def test_syscall_filter_allows_pidfd_getfd_by_default() -> None:
    service = directives(render("sglang_server", "sglang-server.service.j2", server_vars()), "Service")
    assert service["SystemCallFilter"] == ["@system-service", "pidfd_getfd"]
    assert service["SystemCallErrorNumber"] == ["EPERM"]


def test_exec_start_runs_the_launcher_through_the_redactor() -> None:
    unit = render("sglang_server", "sglang-server.service.j2", server_vars())
    line = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    words = shlex.split(line.split("=", 1)[1])
    assert words[:3] == [
        "/opt/sglang/releases/0.5.23-abc/venv/bin/python",
        "/usr/local/lib/gpufleet-sglang/sglang_log_redact.py",
        "--",
    ]
    assert words[3:] == [
        "/opt/sglang/releases/0.5.23-abc/venv/bin/python",
        "-m",
        "sglang.launch_server",
        "--config",
        "/etc/sglang/sglang-server.yaml",
    ]


def test_without_an_options_file_the_launcher_runs_alone() -> None:
    """An SGLang without --config gets its options on the command line and no key (nothing to redact)."""
    unit = render("sglang_server", "sglang-server.service.j2", server_vars(__sglang_server_config_text=""))
    line = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    assert "sglang_log_redact" not in line
    assert shlex.split(line.split("=", 1)[1])[-2:] == ["--model-path", "/models/m"]


def test_the_unit_loads_no_file_of_the_release() -> None:
    """The release's environment reaches the server through the server's own environment file (a server file:
    drift, restart, deployment record, rollback); a file inside the release directory, which the sglang role
    rewrites in place, could be none of these."""
    service = directives(render("sglang_server", "sglang-server.service.j2", server_vars()), "Service")
    assert service["EnvironmentFile"] == [
        "-/etc/gpufleet/cuda.env",
        "/etc/sglang/sglang-server.env",
        "/etc/sglang/sglang-server.secrets.env",
    ]
    assert not any("/opt/sglang" in path for path in service["EnvironmentFile"])
