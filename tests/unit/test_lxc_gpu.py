# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit and golden-file tests of plugins/module_utils/nvidia/lxc_gpu.py.

Golden files (tests/unit/golden/proxmox_lxc_gpu/) are configs in real PVE / LXC syntax. Regenerate
after an intended change with ``GPUFLEET_REGEN_GOLDEN=1 pytest tests/unit/test_lxc_gpu.py`` and
review the diff: the test then fails so a regeneration never passes silently.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.lxc_gpu import (
    DeviceNode,
    LxcGpuError,
    cgroup_devices_key,
    cgroup_layout,
    join_lines,
    merge_config,
    owned_predicate,
    parse_bind_mounts,
    parse_device_nodes,
    plan_config,
    render_native,
    render_raw,
    render_shm,
    resolve_gpu_selection,
    select_device_nodes,
    split_lines,
    validate_settings,
)

GOLDEN = Path(__file__).parent / "golden" / "proxmox_lxc_gpu"
FIXTURE_LS = Path(__file__).parent / "fixtures" / "nvidia" / "h200-580" / "ls-dev.txt"
_LS_RE = re.compile(r"^c\S+\s+\d+\s+\S+\s+\S+\s+(\d+),\s+(\d+)\s+.*?\s(\S+)$")


def nodes_from_ls(text: str) -> list[dict]:
    """``ls -l /dev/nvidia* /dev/nvidia-caps`` (the real H200 capture) as nvidia_gpu_info's device_nodes."""
    nodes: dict[str, dict] = {}
    directory = "/dev"
    for line in text.splitlines():
        if line.endswith(":"):
            directory = line[:-1]
            continue
        match = _LS_RE.match(line)
        if match:
            name = match.group(3)
            path = name if name.startswith("/") else f"{directory}/{name}"
            nodes[path] = {"path": path, "major": int(match.group(1)), "minor": int(match.group(2))}
    return list(nodes.values())


def rtx_host(gpus: int = 8, uvm: int = 510, caps: int = 511) -> dict[str, DeviceNode]:
    """An 8x RTX PRO 6000 host with the dynamic majors a PVE guide showed (uvm 510, caps 511)."""
    raw = [{"path": f"/dev/nvidia{i}", "major": 195, "minor": i} for i in range(gpus)]
    raw += [
        {"path": "/dev/nvidiactl", "major": 195, "minor": 255},
        {"path": "/dev/nvidia-modeset", "major": 195, "minor": 254},
        {"path": "/dev/nvidia-uvm", "major": uvm, "minor": 0},
        {"path": "/dev/nvidia-uvm-tools", "major": uvm, "minor": 1},
        {"path": "/dev/nvidia-caps/nvidia-cap1", "major": caps, "minor": 1},
        {"path": "/dev/nvidia-caps/nvidia-cap2", "major": caps, "minor": 2},
    ]
    return parse_device_nodes(raw)


PVE_SETTINGS = {
    "hostname": "sglang-01",
    "cores": "64",
    "memory": "524288",
    "lxc.prlimit.memlock": "unlimited",
    "lxc.prlimit.nofile": "1048576",
}
LXC_SETTINGS = {"lxc.prlimit.memlock": "unlimited", "lxc.prlimit.nofile": "1048576"}

GOLDEN_CASES = {
    # name: (input, kwargs)
    "ct101.native.conf": ("ct101.conf", {"platform": "proxmox", "passthrough": "native", "settings": PVE_SETTINGS}),
    "ct101.raw.conf": ("ct101.conf", {"platform": "proxmox", "passthrough": "raw", "settings": PVE_SETTINGS}),
    "lxc-guest.hybrid.config": (
        "lxc-guest.config",
        {"platform": "lxc", "passthrough": "raw", "cgroup_key": "lxc.cgroup.devices.allow", "settings": LXC_SETTINGS},
    ),
    "lxc-guest.unified.config": (
        "lxc-guest.config",
        {"platform": "lxc", "passthrough": "raw", "cgroup_key": "lxc.cgroup2.devices.allow", "settings": LXC_SETTINGS},
    ),
}


def _plan(text: str, **kwargs: object) -> str:
    host = rtx_host()
    nodes = select_device_nodes(host, resolve_gpu_selection("all", list(range(8))))
    out, _changes = plan_config(text, nodes=nodes, shm_size="64G", owned_majors={195, 510, 511}, **kwargs)  # type: ignore[arg-type]
    return out


@pytest.mark.parametrize("golden", sorted(GOLDEN_CASES))
def test_golden(golden: str) -> None:
    source, kwargs = GOLDEN_CASES[golden]
    out = _plan((GOLDEN / source).read_text(), **kwargs)
    if os.environ.get("GPUFLEET_REGEN_GOLDEN"):
        (GOLDEN / golden).write_text(out)
        pytest.fail(f"regenerated {golden}: review the diff and rerun without GPUFLEET_REGEN_GOLDEN")
    assert out == (GOLDEN / golden).read_text()


@pytest.mark.parametrize("golden", sorted(GOLDEN_CASES))
def test_golden_is_a_fixed_point(golden: str) -> None:
    """Merging into the already merged config changes nothing (second run changed=0)."""
    _source, kwargs = GOLDEN_CASES[golden]
    text = (GOLDEN / golden).read_text()
    assert _plan(text, **kwargs) == text


def test_native_golden_keeps_unrelated_lines_and_snapshot() -> None:
    source = (GOLDEN / "ct101.conf").read_text()
    out = (GOLDEN / "ct101.native.conf").read_text()
    main, snapshot = out.split("\n[before-gpu]\n")
    assert snapshot == source.split("\n[before-gpu]\n")[1]
    assert out.startswith("#SGLang node, GLM-5-NVFP4 tp 8\n")
    for line in ("dev0: /dev/dri/card0,gid=44", "lxc.apparmor.profile: generated", "parent: before-gpu"):
        assert line in main.splitlines()
    # dev0 is /dev/dri: the GPUs take the next free slots; 8 GPUs + ctl + uvm + uvm-tools + 2 caps = 13
    nvidia = [line for line in main.splitlines() if re.match(r"^dev\d+: /dev/nvidia", line)]
    assert len(nvidia) == 13
    assert "dev1: /dev/nvidia0,mode=0666" in nvidia
    assert "dev13: /dev/nvidia-caps/nvidia-cap2,mode=0666" in nvidia
    assert "cores: 64" in main.splitlines()
    assert "cores: 16" not in main.splitlines()
    assert not any("lxc.cgroup" in line for line in main.splitlines())


def test_raw_golden_has_exact_rules_with_host_majors() -> None:
    lines = (GOLDEN / "ct101.raw.conf").read_text().split("\n[")[0].splitlines()
    allows = [line for line in lines if line.startswith("lxc.cgroup2.devices.allow:")]
    assert "lxc.cgroup2.devices.allow: c 510:0 rwm" in allows
    assert "lxc.cgroup2.devices.allow: c 195:7 rwm" in allows
    assert not any("*" in line for line in allows), "a whole-major rule would let the guest mknod a withheld GPU"
    mounts = [line for line in lines if line.startswith("lxc.mount.entry:")]
    assert "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,create=file 0 0" in mounts
    assert not any("optional" in line for line in mounts)


def test_plain_lxc_keeps_site_mount_and_uses_equals() -> None:
    out = (GOLDEN / "lxc-guest.hybrid.config").read_text()
    assert "lxc.mount.entry = /srv/models srv/models none bind,create=dir 0 0" in out.splitlines()
    assert "lxc.cgroup.devices.allow = c 195:0 rwm" in out.splitlines()
    assert "lxc.cgroup2" not in out
    assert "lxc.cgroup2.devices.allow = c 195:0 rwm" in (GOLDEN / "lxc-guest.unified.config").read_text()


def test_real_capture_nodes() -> None:
    host = parse_device_nodes(nodes_from_ls(FIXTURE_LS.read_text()))
    nodes = select_device_nodes(host, resolve_gpu_selection("all", [0]))
    assert [(n.path, n.major, n.minor) for n in nodes] == [
        ("/dev/nvidia0", 195, 0),
        ("/dev/nvidiactl", 195, 255),
        ("/dev/nvidia-uvm", 238, 0),
        ("/dev/nvidia-uvm-tools", 238, 1),
        ("/dev/nvidia-caps/nvidia-cap1", 241, 1),
        ("/dev/nvidia-caps/nvidia-cap2", 241, 2),
    ]
    entries = render_raw(nodes)
    assert ("lxc.cgroup2.devices.allow", "c 238:1 rwm") in entries


def test_withheld_gpu_is_not_passed() -> None:
    nodes = select_device_nodes(rtx_host(), [0, 2], include_caps=False)
    assert [n.path for n in nodes] == [
        "/dev/nvidia0",
        "/dev/nvidia2",
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
    ]


def test_gpu_minors_differ_from_indexes() -> None:
    nodes = select_device_nodes(rtx_host(), [0], gpu_minors={0: 3}, include_caps=False)
    assert nodes[0].path == "/dev/nvidia3"


def test_modeset_only_when_asked() -> None:
    assert "/dev/nvidia-modeset" not in [n.path for n in select_device_nodes(rtx_host(), [0])]
    assert "/dev/nvidia-modeset" in [n.path for n in select_device_nodes(rtx_host(), [0], include_modeset=True)]


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        ([8], "unknown GPU index 8: the host has GPUs [0, 1, 2, 3, 4, 5, 6, 7]"),
        ([0, 0], "GPU index 0 is listed twice"),
        (["x"], "GPU index 'x' is not a non-negative integer"),
        ([True], "GPU index True is not a non-negative integer"),
        ("some", "gpus must be 'all' or a list of GPU indexes, got 'some'"),
        (3, "gpus must be 'all' or a list of GPU indexes, got 3"),
    ],
)
def test_bad_gpu_selection(selection: object, message: str) -> None:
    with pytest.raises(LxcGpuError) as err:
        resolve_gpu_selection(selection, list(range(8)))
    assert str(err.value) == message


def test_selection_accepts_strings_and_sorts() -> None:
    assert resolve_gpu_selection(["3", 1], list(range(8))) == [1, 3]
    assert resolve_gpu_selection("ALL", [1, 0]) == [0, 1]


def test_missing_nodes_are_all_named() -> None:
    host = dict(rtx_host(gpus=2))
    del host["/dev/nvidia-uvm"]
    with pytest.raises(LxcGpuError, match=r"missing on the host: /dev/nvidia3, /dev/nvidia-uvm$"):
        select_device_nodes(host, [0, 3])


def test_gpu_node_with_wrong_major() -> None:
    host = dict(rtx_host(gpus=1))
    host["/dev/nvidia0"] = DeviceNode("/dev/nvidia0", 236, 0)
    with pytest.raises(LxcGpuError, match="/dev/nvidia0 has major 236 but /dev/nvidiactl has 195"):
        select_device_nodes(host, [0])


@pytest.mark.parametrize(
    "bad",
    [{"path": "/dev/nvidia0", "major": 195}, {"path": "/dev/sda", "major": 8, "minor": 0}, {"path": "/dev/nvidia0"}],
)
def test_bad_device_node_entries(bad: dict) -> None:
    with pytest.raises(LxcGpuError):
        parse_device_nodes([bad])


MOUNTS_HYBRID = """\
tmpfs /sys/fs/cgroup tmpfs ro,nosuid,nodev,noexec,mode=755 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nosuid,nodev,noexec,relatime 0 0
cgroup /sys/fs/cgroup/devices cgroup rw,nosuid,nodev,noexec,relatime,devices 0 0
"""
MOUNTS_LEGACY = "cgroup /sys/fs/cgroup/devices cgroup rw,relatime,devices 0 0\n"
MOUNTS_UNIFIED = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n"


@pytest.mark.parametrize(
    ("mounts", "layout", "key"),
    [
        (MOUNTS_HYBRID, "hybrid", "lxc.cgroup.devices.allow"),
        (MOUNTS_LEGACY, "legacy", "lxc.cgroup.devices.allow"),
        (MOUNTS_UNIFIED, "unified", "lxc.cgroup2.devices.allow"),
    ],
)
def test_cgroup_layout(mounts: str, layout: str, key: str) -> None:
    assert cgroup_layout(mounts) == layout
    assert cgroup_devices_key(layout) == key


def test_cgroup_layout_unknown() -> None:
    with pytest.raises(LxcGpuError, match="cannot tell the cgroup layout"):
        cgroup_layout("proc /proc proc rw 0 0\n")
    with pytest.raises(LxcGpuError, match="unknown cgroup layout 'v3'"):
        cgroup_devices_key("v3")


def test_render_native_with_gid_and_bad_mode() -> None:
    node = DeviceNode("/dev/nvidia0", 195, 0)
    assert render_native([node], [4], gid=44) == [("dev4", "/dev/nvidia0,gid=44,mode=0666")]
    with pytest.raises(LxcGpuError, match="device mode '999'"):
        render_native([node], [0], mode="999")


def test_render_validators() -> None:
    with pytest.raises(LxcGpuError, match="shm size 'lots'"):
        render_shm("lots")
    with pytest.raises(LxcGpuError, match=re.escape("cgroup key 'lxc.cgroup3.devices.allow'")):
        render_raw([], "lxc.cgroup3.devices.allow")


def test_native_slots_exhausted() -> None:
    text = "".join(f"dev{i}: /dev/dri/renderD{128 + i}\n" for i in range(254))
    nodes = select_device_nodes(rtx_host(gpus=1), [0], include_caps=False)
    with pytest.raises(LxcGpuError, match=re.escape("4 devN entries needed but only 2 of dev0..dev255 are free")):
        plan_config(text, platform="proxmox", nodes=nodes)


def test_switching_passthrough_replaces_the_other_flavour() -> None:
    native = (GOLDEN / "ct101.native.conf").read_text()
    raw = (GOLDEN / "ct101.raw.conf").read_text()
    assert _plan(native, platform="proxmox", passthrough="raw", settings=PVE_SETTINGS) == raw
    assert _plan(raw, platform="proxmox", passthrough="native", settings=PVE_SETTINGS) == native


def test_fewer_gpus_removes_stale_lines() -> None:
    raw = (GOLDEN / "ct101.raw.conf").read_text()
    nodes = select_device_nodes(rtx_host(), [1], include_caps=False)
    out, _changes = plan_config(raw, platform="proxmox", passthrough="raw", nodes=nodes, owned_majors={195, 510, 511})
    assert "/dev/nvidia0 " not in out.split("\n[", maxsplit=1)[0]
    assert "c 195:0 rwm" not in out
    assert "c 511:1 rwm" not in out
    assert "dev/shm" not in out
    assert "lxc.mount.entry: /dev/nvidia1 dev/nvidia1 none bind,create=file 0 0" in out


def test_duplicate_setting_lines_collapse() -> None:
    out = merge_config("cores: 2\ncores: 4\n", "proxmox", [], [("cores", "8")], owned_predicate([]))
    assert out == "cores: 8\n"


def test_merge_rejects_bad_input() -> None:
    with pytest.raises(LxcGpuError, match="unknown platform 'yaml'"):
        merge_config("", "yaml", [], [], owned_predicate([]))
    with pytest.raises(LxcGpuError, match="setting 'cores' given twice"):
        merge_config("", "proxmox", [], [("cores", "1"), ("cores", "2")], owned_predicate([]))
    with pytest.raises(LxcGpuError, match="unknown passthrough 'vfio'"):
        plan_config("", platform="proxmox", nodes=[], passthrough="vfio")


def test_empty_config_gets_sorted_pve_layout() -> None:
    nodes = select_device_nodes(rtx_host(gpus=1), [0], include_caps=False)
    out, _changes = plan_config("", platform="proxmox", nodes=nodes, settings={"memory": "1024", "arch": "amd64"})
    assert out.splitlines() == [
        "arch: amd64",
        "dev0: /dev/nvidia0,mode=0666",
        "dev1: /dev/nvidiactl,mode=0666",
        "dev2: /dev/nvidia-uvm,mode=0666",
        "dev3: /dev/nvidia-uvm-tools,mode=0666",
        "memory: 1024",
    ]


# --------------------------------------------------------------------------- bytes kept, settings refused


@pytest.mark.parametrize(
    ("text", "lines", "final_newline", "eol"),
    [
        ("", [], True, "\n"),
        ("a: 1\nb: 2", ["a: 1", "b: 2"], False, "\n"),
        ("a: 1\r\nb: 2\r\n", ["a: 1\r", "b: 2\r"], True, "\r\n"),
        ("#x\x0cy\u2028z\x85w\na: 1\n", ["#x\x0cy\u2028z\x85w", "a: 1"], True, "\n"),
    ],
)
def test_split_lines_only_on_lf(text: str, lines: list[str], final_newline: bool, eol: str) -> None:
    assert split_lines(text) == (lines, final_newline, eol)
    assert join_lines(lines, final_newline) == text


def test_merge_keeps_crlf_odd_comments_and_missing_final_newline() -> None:
    text = "#desc\x0cwith\u2028seps\r\ncores: 8\r\nmemory: 1024"
    out = merge_config(text, "proxmox", [("dev0", "/dev/nvidia0")], [("cores", "16")], owned_predicate({195}))
    assert out == "#desc\x0cwith\u2028seps\r\ncores: 16\r\ndev0: /dev/nvidia0\r\nmemory: 1024"
    again = merge_config(out, "proxmox", [("dev0", "/dev/nvidia0")], [("cores", "16")], owned_predicate({195}))
    assert again == out


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"memory": "1\nlxc.cgroup2.devices.allow: a"}, "value of 'memory' contains the control character U+000A"),
        ({"memory": "1\u2028"}, "U+2028"),
        ({"x\n[snap]": "1"}, "settings key 'x\\n[snap]' is not a config key"),
        ({"lxc.mount.entry": "a b none bind 0 0"}, "settings key 'lxc.mount.entry' cannot be set"),
        ({"dev3": "/dev/dri/card0"}, "settings key 'dev3' cannot be set"),
        ({"memory": ["1"]}, "must be a string or a number"),
        ({"memory": "1 "}, "leading or trailing whitespace"),
    ],
)
def test_validate_settings_refuses(settings: dict, message: str) -> None:
    with pytest.raises(LxcGpuError, match=re.escape(message)):
        validate_settings(settings)


def test_validate_settings_converts() -> None:
    assert validate_settings({"onboot": True, "swap": False, "cores": 8, "hostname": "a-1"}) == [
        ("onboot", "1"),
        ("swap", "0"),
        ("cores", "8"),
        ("hostname", "a-1"),
    ]


# --------------------------------------------------------------------------- bind mounts (model store)

STORE = [{"source": "/srv/gpufleet/models", "target": "/srv/models"}]


def test_bind_mount_proxmox_takes_a_free_mp_slot_read_only_and_is_idempotent():
    text = "arch: amd64\nmp0: local-lvm:vm-101-disk-1,mp=/data,size=8G\nrootfs: local-lvm:vm-101-disk-0,size=8G\n"
    mounts = parse_bind_mounts(STORE)
    once, entries = plan_config(text, platform="proxmox", nodes=[], bind_mounts=mounts)
    assert ("mp1", "/srv/gpufleet/models,mp=/srv/models,ro=1") in entries
    assert "mp0: local-lvm:vm-101-disk-1,mp=/data,size=8G\n" in once  # not ours: kept
    twice, _changes = plan_config(once, platform="proxmox", nodes=[], bind_mounts=mounts)
    assert twice == once


def test_bind_mount_lxc_line_and_removal_under_the_root():
    text = "lxc.uts.name = g\nlxc.mount.entry = /srv/other srv/other none bind,ro,create=dir 0 0\n"
    with_store, _changes = plan_config(text, platform="lxc", nodes=[], bind_mounts=parse_bind_mounts(STORE))
    assert "lxc.mount.entry = /srv/gpufleet/models srv/models none bind,ro,create=dir 0 0\n" in with_store
    # the list no longer names it: a mount under the managed root is removed, others stay
    without, _changes = plan_config(with_store, platform="lxc", nodes=[], bind_mounts_root="/srv/gpufleet/models")
    assert without == text


@pytest.mark.parametrize(
    ("mount", "needle"),
    [
        ({"source": "/srv/a b", "target": "/x"}, "source '/srv/a b' must be an absolute path"),
        ({"source": "/srv/a,ro=0", "target": "/x"}, "no spaces, commas"),
        ({"source": "/srv/a", "target": "relative"}, "target 'relative' must be an absolute path"),
        ({"source": "/srv/../etc", "target": "/x"}, "'..'"),
        ({"source": "/srv/a", "target": "/x\nlxc.cgroup2.devices.allow = a"}, "must be an absolute path"),
    ],
)
def test_bad_bind_mounts_are_named(mount, needle):
    with pytest.raises(LxcGpuError, match=re.escape(needle)):
        parse_bind_mounts([mount])


def test_mount_point_keys_cannot_be_settings():
    # a single-valued mpN setting would delete the mount points the module manages
    with pytest.raises(LxcGpuError, match="settings key 'mp0' cannot be set"):
        plan_config("", platform="proxmox", nodes=[], settings={"mp0": "/srv/x,mp=/x"})


# --------------------------------------------------------------------------- bind mounts confined below the root


# "/", "x/..", "" and "/x/.." were refused before; these normalise to the root (or are not normalised) too
@pytest.mark.parametrize("target", ["//", "///", "/./", "/.", "/a//b", "/a/./b", "/./srv/models"])
def test_a_bind_mount_target_that_is_not_below_the_container_root_is_refused(target):
    with pytest.raises(LxcGpuError, match=r"bind mount target .* is not a path below / \(it"):
        parse_bind_mounts([{"source": "/srv/gpufleet/models", "target": target}])
    # the normalised form is accepted (a trailing / dropped, as before)
    assert parse_bind_mounts([{"source": "/srv/gpufleet/models/", "target": "/srv/models/"}]) == parse_bind_mounts(
        STORE
    )


@pytest.mark.parametrize("source", ["//", "/./", "/srv//models", "/srv/./models", "/srv/models/."])
def test_a_bind_mount_source_that_is_not_normalised_is_refused(source):
    with pytest.raises(LxcGpuError, match=r"bind mount source .* is not a path below /"):
        parse_bind_mounts([{"source": source, "target": "/srv/models"}])


@pytest.mark.parametrize("root", ["/", "//", "/./", "/srv/..", "/srv//gpufleet", "/srv/./gpufleet", "srv/gpufleet"])
def test_a_mounts_root_that_is_not_a_real_subdirectory_is_refused_and_nothing_is_removed(root):
    text = "arch: amd64\nmp0: /srv/site,mp=/site\nmp1: /data/x,mp=/x,ro=1\n"
    with pytest.raises(LxcGpuError, match=r"bind_mounts_root .* must be a subdirectory of the host"):
        plan_config(text, platform="proxmox", nodes=[], bind_mounts=parse_bind_mounts(STORE), bind_mounts_root=root)


# --------------------------------------------------------------------------- fuzz: the merge of a config from disk

_PVE_READ = re.compile(r"^([A-Za-z0-9_.\-]+):\s?(.*)$")
_LXC_READ = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*=\s?(.*?)\s*$")
FUZZ_MAJORS = {195, 510}
REAL_LINES = [
    "arch: amd64",
    "cores: 8",
    "hostname: ct-1",
    "#GPU node",
    "# odd \x0c\x85\u2028 comment",
    "[snap1]",
    "[pve:pending]",
    "mp0: /srv/site,mp=/site",
    "mp1: /srv/gpufleet/models,mp=/srv/models,ro=1",
    "mp2: local-lvm:vm-101-disk-1,mp=/data,size=8G",
    "mp3: /srv/gpufleet/models/extra,mp=/extra",
    "dev0: /dev/nvidia0,mode=0666",
    "dev1: /dev/dri/card0,gid=44",
    "lxc.mount.entry: /srv/site srv/site none bind,create=dir 0 0",
    "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,create=file 0 0",
    "lxc.cgroup2.devices.allow: c 195:0 rwm",
    "lxc.cgroup2.devices.allow: c 226:0 rwm",
    "lxc.idmap: u 0 100000 65536",
    "lxc.uts.name = g",
    "lxc.mount.entry = /srv/site srv/site none bind 0 0",
    "lxc.mount.entry = /srv/gpufleet/models srv/models none bind,ro,create=dir 0 0",
    "lxc.cgroup2.devices.allow = c 510:0 rwm",
    "lxc.cgroup2.devices.allow = c 10:200 rwm",
    "cores = 4",
    "",
    "   ",
]
ODD = st.sampled_from(["\r", "\x00", "\x85", "\u2028", "\x0b", "\t", " ", "=", ":", "[", "#", ",", "/"])
fuzz_text = st.text(alphabet=st.characters(blacklist_characters="\n") | ODD, max_size=24)
fuzz_keys = st.sampled_from(["cores", "memory", "hostname", "lxc.prlimit.memlock", "mp0", "dev0", "lxc.mount.entry"])
fuzz_line = (
    st.sampled_from(REAL_LINES)
    | fuzz_text
    | st.builds(
        lambda k, sep, v: f"{k}{sep}{v}", fuzz_keys | fuzz_text, st.sampled_from([": ", " = ", ":", "="]), fuzz_text
    )
)
MOUNT_PATHS = ["/srv/gpufleet/models", "/srv/site", "/srv/models", "/data/x", "/", "//", "/./", "/x/..", "", "/a//b"]
ROOTS = ["", "/", "//", "/./", "/srv/..", "/srv/gpufleet/models", "/srv/gpufleet/models/", "/srv", "/srv//gpufleet"]


def _normal_below_root(path: str) -> bool:
    """The test's own rule: absolute, not /, and every segment a real name."""
    parts = path.rstrip("/").split("/")
    return path.startswith("/") and len(parts) > 1 and all(p not in ("", ".", "..") for p in parts[1:])


def _read(line: str, platform: str) -> tuple[str, str] | None:
    line = line.removesuffix("\r")
    if not line.strip() or line.lstrip().startswith("#"):
        return None
    match = (_PVE_READ if platform == "proxmox" else _LXC_READ).match(line)
    return (match.group(1), match.group(2)) if match else None


def _ours(entry: tuple[str, str], sources: set[str], root: str) -> bool:
    """Which config entries the module may remove (its own), by the test's own reading."""
    key, value = entry

    def source_ours(src: str) -> bool:
        return src in sources or (bool(root) and (src == root or src.startswith(root + "/")))

    if re.fullmatch(r"mp\d+", key):
        return source_ours(value.split(",", 1)[0])
    if re.fullmatch(r"dev\d+", key):
        return value.split(",", 1)[0].removeprefix("path=").startswith("/dev/nvidia")
    if key in ("lxc.cgroup.devices.allow", "lxc.cgroup2.devices.allow"):
        match = re.match(r"^\s*c\s+(\d+):", value)
        return bool(match) and int(match.group(1)) in FUZZ_MAJORS
    if key == "lxc.mount.entry":
        fields = value.split()
        return bool(fields) and (
            fields[0].startswith("/dev/nvidia")
            or (len(fields) > 1 and fields[1].strip("/") == "dev/shm")
            or source_ours(fields[0])
        )
    return False


def _is_subsequence(needles: list[str], haystack: list[str]) -> bool:
    it = iter(haystack)
    return all(any(n == h for h in it) for n in needles)


@given(
    case=st.fixed_dictionaries(
        {
            "lines": st.lists(fuzz_line, max_size=12),
            "final_newline": st.booleans(),
            "crlf": st.booleans(),
            "platform": st.sampled_from(["proxmox", "lxc"]),
            "passthrough": st.sampled_from(["native", "raw"]),
            "settings": st.dictionaries(fuzz_keys | fuzz_text, fuzz_text | st.integers() | st.booleans(), max_size=2),
            "mounts": st.lists(
                st.fixed_dictionaries(
                    {"source": st.sampled_from(MOUNT_PATHS), "target": st.sampled_from(MOUNT_PATHS)},
                    optional={"read_only": st.booleans()},
                ),
                max_size=2,
            ),
            "root": st.sampled_from(ROOTS),
            "shm": st.sampled_from(["", "64G"]),
        }
    )
)
def test_fuzz_merge_is_refused_by_name_or_correct_and_idempotent(case):
    """Any config text, settings, bind mounts and managed root: an LxcGpuError, or a config that
    keeps every line the module does not own (in order, sections verbatim), says each setting once,
    mounts nothing at the container's root, and merges to itself again."""
    lines, platform, settings, mounts, root = (case[k] for k in ("lines", "platform", "settings", "mounts", "root"))
    text = ("\r\n" if case["crlf"] else "\n").join(lines) + ("\n" if case["final_newline"] and lines else "")
    host = rtx_host(gpus=1)
    nodes = select_device_nodes(host, [0], include_caps=False)
    kwargs = {
        "platform": platform,
        "nodes": nodes,
        "passthrough": case["passthrough"],
        "settings": settings,
        "shm_size": case["shm"],
        "owned_majors": FUZZ_MAJORS,
    }
    try:
        parsed = parse_bind_mounts(mounts)
        out, block = plan_config(text, bind_mounts=parsed, bind_mounts_root=root, **kwargs)
    except LxcGpuError as exc:
        refused = str(exc)
    else:
        refused = ""
    wellformed = (
        not settings
        and (root == "" or _normal_below_root(root))
        and all(_normal_below_root(m["source"]) and _normal_below_root(m["target"]) for m in mounts)
        and len({m["target"] for m in mounts}) == len(mounts)
    )
    event("refused" if refused else "merged")
    if refused:
        assert not wellformed, refused
        return
    assert root == "" or _normal_below_root(root), f"bind_mounts_root {root!r} was accepted"
    assert plan_config(out, bind_mounts=parsed, bind_mounts_root=root, **kwargs)[0] == out
    before, after = split_lines(text)[0], split_lines(out)[0]
    cut_before = next((i for i, x in enumerate(before) if platform == "proxmox" and x.startswith("[")), len(before))
    cut_after = next((i for i, x in enumerate(after) if platform == "proxmox" and x.startswith("[")), len(after))
    assert before[cut_before:] == after[cut_after:]  # snapshot and pending sections verbatim
    sources = {m.source for m in parsed}
    single = {str(k) for k in settings}
    kept = [
        line
        for line in before[:cut_before]
        if (entry := _read(line, platform)) is None
        or (entry[0] not in single and not _ours(entry, sources, root.rstrip("/")))
    ]
    assert _is_subsequence(kept, after[:cut_after]), "a line the module does not own was dropped"
    sep = ": " if platform == "proxmox" else " = "
    ours = {f"{k}{sep}{v}" for k, v in block} | {f"{k}{sep}{v}" for k, v in validate_settings(settings)}
    for line in after[:cut_after]:
        assert line in before or line.removesuffix("\r") in ours, line
    for key, value in validate_settings(settings):
        found = [e for line in after[:cut_after] if (e := _read(line, platform)) and e[0] == key]
        assert found == [(key, value)]
    for key, value in block:
        if re.fullmatch(r"mp\d+", key):
            assert _normal_below_root(value.split(",mp=", 1)[1].split(",", 1)[0]), value
        elif key == "lxc.mount.entry":
            assert _normal_below_root("/" + value.split()[1]), value
