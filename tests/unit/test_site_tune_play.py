# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""site.yml's tune play (playbooks/tune.yml, imported with the tags never and tune) runs nothing in a run without
the tag tune: not even its roles' argument checks, which Ansible tags always. Real ansible-playbook, the import
exactly as site.yml writes it, one node on the local connection."""

from __future__ import annotations

from pathlib import Path

import yaml
from lib.playbook import REPO, run_playbook

INVENTORY = """
all:
  children:
    sglang_nodes:
      hosts:
        node1:
          ansible_connection: local
"""


def site_entry(name: str) -> dict:
    """site.yml's import of ``playbooks/<name>``, with the path made absolute."""
    site = yaml.safe_load((REPO / "site.yml").read_text(encoding="utf-8"))
    (entry,) = [e for e in site if e.get("ansible.builtin.import_playbook") == f"playbooks/{name}"]
    return {**entry, "ansible.builtin.import_playbook": str(REPO / "playbooks" / name)}


def test_a_site_run_without_the_tag_tune_ends_the_tune_play_before_any_argument_check(tmp_path: Path):
    (tmp_path / "inventory.yml").write_text(INVENTORY)
    (tmp_path / "site.yml").write_text(yaml.safe_dump([site_entry("tune.yml")]))
    for args in ((), ("--skip-tags", "bench"), ("--tags", "health")):
        result = run_playbook(tmp_path / "site.yml", inventory=tmp_path / "inventory.yml", args=args).expect(0)
        assert "TASK [End the play in a site.yml run without the tag tune]" in result.stdout, result.tail()
        assert "Validating arguments" not in result.stdout, result.tail()
        assert result.stdout.count("TASK [") == 1, result.tail()


def end_condition() -> str:
    """The ``when`` of tune.yml's first task, the end."""
    (play,) = yaml.safe_load((REPO / "playbooks" / "tune.yml").read_text(encoding="utf-8"))
    first = play["tasks"][0]
    assert first["ansible.builtin.meta"] == "end_play"
    return first["when"]


def test_the_end_is_taken_only_in_a_site_run_without_the_tag(tmp_path: Path):
    """The end's condition, evaluated by Ansible under the run's tags: site.yml's var without the tag ends the
    play; with the tag, or run on its own (no var), the play goes on to its sweep."""
    (tmp_path / "inventory.yml").write_text(INVENTORY)
    (tmp_path / "probe.yml").write_text(
        yaml.safe_dump(
            [
                {
                    "name": "The end's condition",
                    "hosts": "sglang_nodes",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Say it",
                            "ansible.builtin.debug": {"msg": "ENDS={{ (" + end_condition() + ") | bool }}"},
                            "tags": ["always"],
                        }
                    ],
                }
            ]
        )
    )
    cases = [
        ({"__gpufleet_site_tag": "tune"}, (), True),
        ({"__gpufleet_site_tag": "tune"}, ("--skip-tags", "bench"), True),
        ({"__gpufleet_site_tag": "tune"}, ("--tags", "tune"), False),
        ({"__gpufleet_site_tag": "tune"}, ("--tags", "health,tune"), False),
        ({}, (), False),
    ]
    for extra_vars, args, ends in cases:
        result = run_playbook(
            tmp_path / "probe.yml", inventory=tmp_path / "inventory.yml", extra_vars=extra_vars, args=args
        ).expect(0)
        assert f"ENDS={ends}" in result.stdout, (extra_vars, args, result.tail())
