# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Role fleet_monitoring, entry point node_exporter: a listen address, scrape address or textfile directory of
the wrong shape (an inventory typo, or a value that would smuggle an option into the exporter's ARGS) fails
before anything changes and names the value; the arguments file it writes for good values."""

from __future__ import annotations

import sys
from pathlib import Path

import jinja2
import pytest
import yaml
from lib.playbook import Result, run_playbook

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "roles/fleet_monitoring/templates/node-exporter.default.j2"


def play(tmp_path: Path, **given: str) -> Result:
    tasks = [
        {
            "name": "Node exporter",
            "ansible.builtin.include_role": {"name": "gpufleet.sglang.fleet_monitoring", "tasks_from": "node_exporter"},
        }
    ]
    (tmp_path / "play.yml").write_text(
        yaml.safe_dump([{"hosts": "node1", "gather_facts": False, "vars": given, "tasks": tasks}]), encoding="utf-8"
    )
    inv = {"all": {"hosts": {"node1": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inv), encoding="utf-8")
    env = {"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default"}
    return run_playbook(tmp_path / "play.yml", inventory=tmp_path / "hosts.yml", env=env, check=True, timeout=300)


@pytest.mark.parametrize(
    ("named", "value"),
    [
        ("listen", '127.0.0.1:9101" --web.config.file=/tmp/x'),
        ("listen", "127.0.0.1:9101\n--collector.disable-defaults"),
        ("listen", "127.0.0.1:70000"),
        ("address", "127.0.0.1:9101/metrics?x"),
        ("textfile_dir", "/var/lib/../../etc"),
        ("textfile_dir", "var/lib/node-exporter"),
        ("textfile_dir", "/var/lib/node exporter"),
    ],
)
def test_bad_inputs_fail_first_and_name_the_value(tmp_path, named, value):
    proc = play(tmp_path, **{f"fleet_monitoring_node_exporter_{named}": value})
    out = proc.stdout + proc.stderr
    assert proc.rc == 2, out[-3000:]
    assert "Check the node exporter's inputs" in out
    assert f"fleet_monitoring_node_exporter_{named}" in out
    assert "nothing was changed" in out
    # the first task failed: nothing after it ran
    assert "Install the node exporter" not in out


def test_the_arguments_file_holds_exactly_the_checked_values():
    text = jinja2.Template(TEMPLATE.read_text(encoding="utf-8")).render(
        fleet_monitoring_node_exporter_listen="127.0.0.1:9101",
        fleet_monitoring_node_exporter_textfile_dir="/var/lib/prometheus/node-exporter",
    )
    args = [line for line in text.splitlines() if not line.startswith("#")]
    assert args == [
        'ARGS="--web.listen-address=127.0.0.1:9101 --collector.textfile.directory=/var/lib/prometheus/node-exporter"'
    ]
