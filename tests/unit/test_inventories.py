"""inventories/lab (the reference a user copies) and inventories/local (the simulated lab `make lab`
runs) have one shape: the same files, groups and variable names, a gateway and three SGLang nodes;
only values differ (addresses, credentials, GPU facts, sizes, and how many Proxmox hosts carry the
containers: three in the reference, one on this machine). Secrets follow one vault pattern, every
Proxmox host has its own container list, and another host is added by copying one file.
"""

from __future__ import annotations

import configparser
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from lib.playbook import run_tool

REPO = Path(__file__).resolve().parents[2]
INVENTORIES = REPO / "inventories"
GROUPS = ("proxmox_hosts", "proxmox_containers", "gpu_nodes", "sglang_nodes", "sglang_gateway", "monitoring")
# groups whose number of hosts is a value, not shape (the reference spreads its nodes over 3 hosts)
COUNTED_AS_VALUE = ("proxmox_hosts",)
GROUP_FILES = tuple(f"group_vars/{g}.yml" for g in GROUPS)


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data or {}


def files(inventory: Path) -> set[str]:
    return {str(p.relative_to(inventory)) for p in inventory.rglob("*.yml") if ".gpufleet" not in p.parts}


def hosts_of(hosts_yml: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """group -> {host: vars set in hosts.yml}"""
    children = hosts_yml["all"]["children"]
    return {group: {h: (v or {}) for h, v in (children[group].get("hosts") or {}).items()} for group in children}


def role_of(groups: dict[str, dict[str, Any]], host: str) -> tuple[str, ...]:
    return tuple(g for g in sorted(groups) if host in groups[g])


def shape(inventory: Path) -> dict[str, Any]:
    """Everything but values: files (host_vars named by the groups of their host), groups, variable names."""
    groups = hosts_of(load(inventory / "hosts.yml"))
    out: dict[str, Any] = {
        "groups": {
            g: sorted({tuple(sorted(v)) for v in hosts.values()})
            if g in COUNTED_AS_VALUE
            else sorted(sorted(v) for v in hosts.values())
            for g, hosts in groups.items()
        },
        "children": {
            g: sorted(c.get("children") or {}) for g, c in load(inventory / "hosts.yml")["all"]["children"].items()
        },
        "all_vars": sorted((load(inventory / "hosts.yml")["all"].get("vars") or {}).keys()),
        "files": {},
    }
    for rel in sorted(files(inventory)):
        key = rel
        if rel.startswith("host_vars/"):
            host = Path(rel).stem
            assert any(host in hosts for hosts in groups.values()), f"{inventory.name}/{rel}: {host} is in no group"
            key = "host_vars/<" + "+".join(role_of(groups, host)) + ">.yml"
        if rel == "hosts.yml":
            continue
        names = sorted(load(inventory / rel).keys())
        assert out["files"].setdefault(key, names) == names, f"{inventory.name}/{rel}: other variables than its peers"
    return out


def test_lab_and_local_have_one_shape() -> None:
    lab, local = shape(INVENTORIES / "lab"), shape(INVENTORIES / "local")
    assert lab == local


@pytest.mark.parametrize("name", ["lab", "local"])
def test_a_gateway_in_front_of_three_nodes(name: str) -> None:
    groups = hosts_of(load(INVENTORIES / name / "hosts.yml"))
    assert len(groups["sglang_gateway"]) == 1
    assert len(groups["sglang_nodes"]) == 3
    assert set(groups["sglang_nodes"]) <= set(groups["gpu_nodes"])
    assert not set(groups["sglang_gateway"]) & set(groups["gpu_nodes"]), "the gateway's container has no GPUs"


def test_the_agreed_files_exist() -> None:
    for name in ("lab", "local"):
        have = files(INVENTORIES / name)
        for rel in ("hosts.yml", "group_vars/all/main.yml", "group_vars/all/vault.yml", *GROUP_FILES):
            assert rel in have, f"inventories/{name}/{rel} is missing"
        groups = hosts_of(load(INVENTORIES / name / "hosts.yml"))
        assert set(groups) == set(GROUPS)
        for host in {h for hosts in groups.values() for h in hosts}:
            assert f"host_vars/{host}.yml" in have, f"inventories/{name}: {host} has no host_vars file"


@pytest.mark.parametrize("name", ["lab", "local"])
def test_container_lists_are_per_host(name: str) -> None:
    inv = INVENTORIES / name
    for rel in files(inv):
        if not rel.startswith("host_vars/"):
            assert "proxmox_lxc_gpu_containers" not in load(inv / rel), (
                f"inventories/{name}/{rel}: a container list outside host_vars is inherited by every host"
            )
    groups = hosts_of(load(inv / "hosts.yml"))
    for host in groups["proxmox_hosts"]:
        containers = load(inv / "host_vars" / f"{host}.yml")["proxmox_lxc_gpu_containers"]
        for entry in containers:
            assert entry["inventory_host"] in groups["gpu_nodes"]
            assert load(inv / "host_vars" / f"{entry['inventory_host']}.yml")["proxmox_host"] == host


@pytest.mark.parametrize("name", ["lab", "local"])
def test_secrets_only_in_vault_and_referenced_as_vault_vars(name: str) -> None:
    inv = INVENTORIES / name
    vault = load(inv / "group_vars" / "all" / "vault.yml")
    assert vault, f"inventories/{name}: group_vars/all/vault.yml defines nothing"
    assert all(k.startswith("vault_") for k in vault), f"non-vault_ names in vault.yml: {sorted(vault)}"
    others = {rel: (inv / rel).read_text(encoding="utf-8") for rel in files(inv) if not rel.endswith("vault.yml")}
    for key in vault:
        assert any("{{ " + key + " }}" in text for text in others.values()), f"{key} is referenced nowhere"
    for rel, text in others.items():
        assert not re.search(r"^vault_\w+:", text, re.M), f"inventories/{name}/{rel} defines a vault_ variable"
        for var, value in load(inv / rel).items():
            if re.search(r"(api_key|password|token|secret)$", var):
                assert re.fullmatch(r"\{\{ vault_\w+ \}\}", str(value)), (
                    f"inventories/{name}/{rel}: {var} must reference a vault_ variable, not a literal"
                )


def test_vault_file_says_how_to_encrypt_it() -> None:
    text = (INVENTORIES / "lab" / "group_vars" / "all" / "vault.yml").read_text(encoding="utf-8")
    assert "ansible-vault encrypt inventories/lab/group_vars/all/vault.yml" in text


def test_first_install_reboot_is_explained_where_the_variable_is_set() -> None:
    text = (INVENTORIES / "lab" / "group_vars" / "proxmox_hosts.yml").read_text(encoding="utf-8")
    assert re.search(r"^nvidia_driver_reboot_allowed: (true|false)$", text, re.M)
    assert "-e nvidia_driver_reboot_allowed=true" in text
    assert "group_vars/proxmox_hosts.yml" in (INVENTORIES / "lab" / "hosts.yml").read_text(encoding="utf-8")


def test_ansible_cfg_keeps_host_key_checking_on() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "ansible.cfg")
    for section in ("defaults", "paramiko_connection", "ssh_connection"):
        if cfg.has_option(section, "host_key_checking"):
            assert cfg.getboolean(section, "host_key_checking"), f"[{section}] host_key_checking is off"
    ssh_args = cfg.get("ssh_connection", "ssh_args", fallback="")
    assert "StrictHostKeyChecking=no" not in ssh_args
    assert "UserKnownHostsFile=/dev/null" not in ssh_args


def add_second_host(inv: Path) -> None:
    """What a user does: copy host_vars/pve1.yml, give the copy's container its own identity,
    name the new host and container in hosts.yml."""
    shutil.copy(inv / "host_vars" / "pve1.yml", inv / "host_vars" / "pve4.yml")
    text = (inv / "host_vars" / "pve4.yml").read_text(encoding="utf-8")
    text = text.replace("vmid: 101", "vmid: 104").replace("sglang-01", "sglang-04")
    (inv / "host_vars" / "pve4.yml").write_text(text, encoding="utf-8")
    (inv / "host_vars" / "sglang-04.yml").write_text("---\nproxmox_host: pve4\n", encoding="utf-8")
    hosts = load(inv / "hosts.yml")
    children = hosts["all"]["children"]
    children["proxmox_hosts"]["hosts"]["pve4"] = {"ansible_host": "192.0.2.14", "ansible_port": 22}
    children["gpu_nodes"]["hosts"]["sglang-04"] = None
    children["sglang_nodes"]["hosts"]["sglang-04"] = None
    (inv / "hosts.yml").write_text(yaml.safe_dump(hosts), encoding="utf-8")


def test_a_second_proxmox_host_gets_its_own_containers(tmp_path: Path) -> None:
    inv = tmp_path / "lab"
    shutil.copytree(INVENTORIES / "lab", inv, ignore=shutil.ignore_patterns(".gpufleet"))
    add_second_host(inv)

    listed = run_tool("ansible-inventory", "-i", inv, "--list", timeout=120).expect(0)
    hostvars = json.loads(listed.stdout)["_meta"]["hostvars"]
    lists = {
        h: [(c["vmid"], c["hostname"]) for c in hostvars[h]["proxmox_lxc_gpu_containers"]] for h in ("pve1", "pve4")
    }
    assert lists == {"pve1": [(101, "sglang-01")], "pve4": [(104, "sglang-04")]}

    # each container's pct connection resolves to its own Proxmox host and vmid (debug never connects)
    msg = "{{ ansible_connection }} {{ ansible_host }}:{{ ansible_port }} vmid={{ proxmox_vmid }}"
    shown = run_tool(
        "ansible",
        "-i",
        inv,
        "proxmox_containers",
        "-m",
        "ansible.builtin.debug",
        "-a",
        json.dumps({"msg": msg}),
        timeout=120,
    ).expect(0)
    got = dict(re.findall(r"^([\w-]+) \| SUCCESS => *\n(?:.*\n)*?\s+msg: (.+)$", shown.stdout, re.M))
    assert got == {
        "sglang-01": "gpufleet.sglang.pct_ssh 192.0.2.10:22 vmid=101",
        "sglang-02": "gpufleet.sglang.pct_ssh 192.0.2.11:22 vmid=102",
        "sglang-03": "gpufleet.sglang.pct_ssh 192.0.2.12:22 vmid=103",
        "sglang-04": "gpufleet.sglang.pct_ssh 192.0.2.14:22 vmid=104",
        "gateway-01": "gpufleet.sglang.pct_ssh 192.0.2.10:22 vmid=100",
    }, shown.stdout
