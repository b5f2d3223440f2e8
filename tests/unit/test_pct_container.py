# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The doc fragment gpufleet.sglang.pct_container: the container options of pct_ssh and pct_pipelined,
said once, as community.proxmox.proxmox_pct_remote says them; Ansible merges it into both connections."""

from __future__ import annotations

import json

import pytest
import yaml
from ansible_collections.community.proxmox.plugins.connection import proxmox_pct_remote
from lib.module import documented_options
from lib.playbook import run_tool

from ansible_collections.gpufleet.sglang.plugins.connection import pct_pipelined, pct_ssh
from ansible_collections.gpufleet.sglang.plugins.doc_fragments.pct_container import ModuleDocFragment
from ansible_collections.gpufleet.sglang.plugins.plugin_utils.pct import VMID_MAX, VMID_MIN

FRAGMENT = yaml.safe_load(ModuleDocFragment.DOCUMENTATION)
PLUGINS = {"pct_ssh": pct_ssh, "pct_pipelined": pct_pipelined}


def test_the_options_are_proxmox_pct_remotes():
    parents = yaml.safe_load(proxmox_pct_remote.DOCUMENTATION)["options"]
    assert FRAGMENT["options"] == {name: parents[name] for name in ("vmid", "proxmox_become_method")}


def test_the_notes_give_the_container_ids_that_pct_takes():
    assert f"from {VMID_MIN} to {VMID_MAX}" in " ".join(FRAGMENT["notes"])


@pytest.mark.parametrize("name", sorted(PLUGINS))
def test_each_connection_has_the_options_from_the_fragment_only(name):
    doc = PLUGINS[name].DOCUMENTATION
    assert "gpufleet.sglang.pct_container" in yaml.safe_load(doc)["extends_documentation_fragment"]
    assert not set(FRAGMENT["options"]) & set(yaml.safe_load(doc)["options"])
    options = documented_options(doc)
    assert {k: options[k] for k in FRAGMENT["options"]} == FRAGMENT["options"]


def test_ansible_doc_merges_the_fragment_into_both_connections():
    """What Ansible itself makes of the docs: the fragment found by its name, options and notes merged."""
    names = [f"gpufleet.sglang.{name}" for name in sorted(PLUGINS)]
    docs = json.loads(run_tool("ansible-doc", "-t", "connection", "--json", *names).expect().stdout)
    for name in PLUGINS:
        doc = docs[f"gpufleet.sglang.{name}"]["doc"]
        for option, spec in FRAGMENT["options"].items():
            assert {k: doc["options"][option][k] for k in spec} == spec, (name, option)
        assert set(FRAGMENT["notes"]) <= set(doc["notes"]), name
