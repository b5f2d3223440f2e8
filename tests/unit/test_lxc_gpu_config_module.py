# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""lxc_gpu_config run as Ansible runs it (an args file), on hostile input and failing file systems.

Each case asserts the named error, that no traceback came out, and the file system after: the
config byte-identical, links intact, no temporary file left. Device nodes are real character
nodes made with mknod (the test runs as root, as the module does on a Proxmox host). EROFS comes
from a read-only bind mount and ENOSPC from a tiny tmpfs, each in a private mount namespace
(``unshare --mount``); EFBIG from RLIMIT_FSIZE set in the module's process; EACCES from a
directory of another user with CAP_DAC_OVERRIDE dropped (``setpriv``).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
from lib.module import Wrap, in_mount_namespace
from lib.module import run_module as run_module_at

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "plugins" / "modules" / "lxc_gpu_config.py"

BASE_PVE = (
    "#GPU node 1\n"
    "arch: amd64\n"
    "cores: 8\n"
    "hostname: sglang-01\n"
    "memory: 65536\n"
    "mp0: /srv/models,mp=/models,ro=1\n"
    "lxc.mount.entry: /srv/site srv/site none bind,create=dir 0 0\n"
)

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mknod and mounts need root")


@pytest.fixture
def dev_dir(tmp_path: Path) -> Path:
    """/dev of a one-GPU host: real character nodes with NVIDIA's majors."""
    if os.geteuid() != 0:
        pytest.skip("mknod needs root")
    dev = tmp_path / "dev"
    dev.mkdir()
    for name, major, minor in (
        ("nvidia0", 195, 0),
        ("nvidiactl", 195, 255),
        ("nvidia-uvm", 510, 0),
        ("nvidia-uvm-tools", 510, 1),
    ):
        os.mknod(dev / name, 0o666 | 0o020000, os.makedev(major, minor))
    return dev


def run_module(args: dict, workdir: Path, *, wrap: Wrap | None = None, fsize: int | None = None) -> tuple[int, dict]:
    """Run the module; ``wrap``: the command line around it (:func:`lib.module.in_mount_namespace`)."""
    return run_module_at(MODULE, args, workdir, wrap=wrap, fsize=fsize)


def without_dac_override(argv: list[str]) -> list[str]:
    """A ``wrap``: root without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (``setpriv``)."""
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", *argv]


def args_for(conf: Path, dev: Path, **more: object) -> dict:
    return {"path": str(conf), "gpus": "all", "dev_dir": str(dev), **more}


def listing(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


def merged(tmp_path: Path, dev: Path, text: str, **more: object) -> str:
    """What the module makes of ``text`` (run on a scratch copy)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    conf = scratch / "101.conf"
    conf.write_bytes(text.encode())
    rc, result = run_module(args_for(conf, dev, **more), tmp_path)
    assert rc == 0, result
    return conf.read_bytes().decode()


# --------------------------------------------------------------------------- symlinks


def test_symlinked_config_writes_the_target_and_keeps_the_link(tmp_path, dev_dir):
    real_dir = tmp_path / "nodes" / "pve1" / "lxc"
    real_dir.mkdir(parents=True)
    target = real_dir / "101.conf"
    target.write_text(BASE_PVE)
    target.chmod(0o640)
    link = tmp_path / "101.conf"
    link.symlink_to(target)

    rc, result = run_module(args_for(link, dev_dir), tmp_path)
    assert rc == 0, result
    assert result["changed"] is True
    assert result["dest"] == str(target)
    # the path as given, which the role publishes as the container's config (proxmox_lxc_gpu_facts)
    assert result["path"] == str(link)
    assert link.is_symlink()
    assert os.readlink(link) == str(target)
    assert "dev0: /dev/nvidia0,mode=0666" in target.read_text()
    assert target.stat().st_mode & 0o7777 == 0o640
    assert listing(real_dir) == ["101.conf"]

    rc, again = run_module(args_for(link, dev_dir), tmp_path)
    assert rc == 0, again
    assert again["changed"] is False
    assert link.is_symlink()


def test_dangling_symlink_fails_naming_link_and_target(tmp_path, dev_dir):
    link = tmp_path / "101.conf"
    link.symlink_to(tmp_path / "gone.conf")
    rc, result = run_module(args_for(link, dev_dir), tmp_path)
    assert rc != 0
    assert f"container config {tmp_path / 'gone.conf'} (symlink {link} -> {tmp_path / 'gone.conf'})" in result["msg"]
    assert "does not exist" in result["msg"]
    assert link.is_symlink()
    assert not (tmp_path / "gone.conf").exists()


# --------------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"cores": "8\nlxc.cgroup2.devices.allow: a"},
            "settings value of 'cores' contains the control character U+000A",
        ),
        ({"cores": "8\r"}, "U+000D"),
        ({"cores": "8\x0clxc.apparmor.profile: unconfined"}, "U+000C"),
        ({"cores": "8\x85x"}, "U+0085"),
        ({"cores": "8\u2028x"}, "U+2028"),
        ({"cores": "8\u2029x"}, "U+2029"),
        ({"cores": "8\tx"}, "U+0009"),
        ({"cores": " 8"}, "leading or trailing whitespace"),
        ({"cores\n[snap]": "8"}, "settings key 'cores\\n[snap]' is not a config key"),
        ({"[snap]": "x"}, "settings key '[snap]' is not a config key"),
        ({"cores: 9\nmemory": "1"}, "is not a config key"),
        ({"lxc.mount.entry": "/srv x none bind 0 0"}, "settings key 'lxc.mount.entry' cannot be set"),
        ({"dev7": "/dev/nvidia0"}, "settings key 'dev7' cannot be set"),
        ({"lxc.cgroup2.devices.allow": "a"}, "settings key 'lxc.cgroup2.devices.allow' cannot be set"),
        ({"lxc.idmap": "u 0 100000 65536"}, "settings key 'lxc.idmap' cannot be set"),
        ({"lxc.hook.pre-start": "/bin/true"}, "settings key 'lxc.hook.pre-start' cannot be set"),
        ({"cores": None}, "settings value of 'cores' must be a string or a number"),
    ],
)
def test_bad_settings_fail_naming_them_and_leave_the_file(tmp_path, dev_dir, settings, message):
    conf = tmp_path / "101.conf"
    conf.write_text(BASE_PVE)
    before = conf.read_bytes()
    rc, result = run_module(args_for(conf, dev_dir, settings=settings), tmp_path)
    assert rc != 0
    assert result["failed"] is True
    assert message in result["msg"]
    assert str(conf) in result["msg"]
    assert conf.read_bytes() == before
    assert "101.conf" in listing(tmp_path)
    assert not [n for n in listing(tmp_path) if n.startswith(".lxc_gpu_config")]


def test_booleans_and_numbers_are_written_as_pve_writes_them(tmp_path, dev_dir):
    conf = tmp_path / "101.conf"
    conf.write_text(BASE_PVE)
    rc, result = run_module(args_for(conf, dev_dir, settings={"onboot": True, "cores": 16}), tmp_path)
    assert rc == 0, result
    lines = conf.read_text().splitlines()
    assert "onboot: 1" in lines
    assert "cores: 16" in lines


# --------------------------------------------------------------------------- bytes it does not manage


def test_missing_final_newline_alone_is_not_a_change(tmp_path, dev_dir):
    done = merged(tmp_path, dev_dir, BASE_PVE)
    conf = tmp_path / "101.conf"
    conf.write_bytes(done.rstrip("\n").encode())
    before = conf.read_bytes()
    rc, result = run_module(args_for(conf, dev_dir), tmp_path)
    assert rc == 0, result
    assert result["changed"] is False
    assert conf.read_bytes() == before


def test_crlf_file_keeps_crlf_and_gets_crlf_lines(tmp_path, dev_dir):
    conf = tmp_path / "101.conf"
    conf.write_bytes(BASE_PVE.replace("\n", "\r\n").encode())
    original_lines = BASE_PVE.replace("\n", "\r\n").encode().split(b"\r\n")[:-1]
    rc, result = run_module(args_for(conf, dev_dir, settings={"cores": "16"}), tmp_path)
    assert rc == 0, result
    assert result["changed"] is True
    data = conf.read_bytes()
    assert data.endswith(b"\r\n")
    assert b"\n" not in data.replace(b"\r\n", b"")
    assert b"cores: 16\r\n" in data
    assert b"dev0: /dev/nvidia0,mode=0666\r\n" in data
    for line in original_lines:
        if not line.startswith(b"cores:"):
            assert line + b"\r\n" in data
    rc, again = run_module(args_for(conf, dev_dir, settings={"cores": "16"}), tmp_path)
    assert again["changed"] is False
    assert conf.read_bytes() == data


@pytest.mark.parametrize("odd", ["\x0c", "\u2028", "\x85", "\u2029", "\x0b", "\x1e"])
def test_comment_with_separator_characters_stays_one_comment(tmp_path, dev_dir, odd):
    comment = f"#note{odd}lxc.cgroup2.devices.allow: a{odd}end\n"
    text = comment + BASE_PVE
    conf = tmp_path / "101.conf"
    conf.write_bytes(text.encode())
    rc, result = run_module(args_for(conf, dev_dir), tmp_path)
    assert rc == 0, result
    data = conf.read_bytes().decode()
    assert data.startswith(comment)
    assert data.count("lxc.cgroup2.devices.allow: a") == 1
    assert "\nlxc.cgroup2.devices.allow: a" not in data
    rc, again = run_module(args_for(conf, dev_dir), tmp_path)
    assert again["changed"] is False
    assert conf.read_bytes().decode() == data


def test_not_utf8_fails_naming_the_byte(tmp_path, dev_dir):
    conf = tmp_path / "101.conf"
    conf.write_bytes(b"#caf\xe9\n" + BASE_PVE.encode())
    before = conf.read_bytes()
    rc, result = run_module(args_for(conf, dev_dir), tmp_path)
    assert rc != 0
    assert "is not UTF-8 text (byte 0xe9 at offset 4)" in result["msg"]
    assert conf.read_bytes() == before


# --------------------------------------------------------------------------- OS errors on write


@needs_root
def test_read_only_file_system_fails_naming_the_path(tmp_path, dev_dir):
    ct = tmp_path / "ct"
    ct.mkdir()
    conf = ct / "101.conf"
    conf.write_text(BASE_PVE)
    before = conf.read_bytes()
    setup = (
        f"mount --bind {shlex.quote(str(ct))} {shlex.quote(str(ct))}; mount -o remount,ro,bind {shlex.quote(str(ct))}"
    )
    rc, result = run_module(args_for(conf, dev_dir), tmp_path, wrap=in_mount_namespace(setup))
    assert rc != 0
    assert f"cannot write {conf}: Read-only file system" in result["msg"]
    assert "the config was left as it was" in result["msg"]
    assert conf.read_bytes() == before
    assert listing(ct) == ["101.conf"]


@needs_root
def test_full_disk_fails_and_leaves_no_temp_file(tmp_path, dev_dir):
    ct = tmp_path / "ct"
    ct.mkdir()
    conf = ct / "101.conf"
    # Fill a 12 KiB tmpfs to within a few bytes of full, then the merged config does not fit.
    setup = (
        f"mount -t tmpfs -o size=12k tmpfs {shlex.quote(str(ct))}; "
        f"printf %s {shlex.quote(BASE_PVE)} > {shlex.quote(str(conf))}; "
        f"head -c 8100 /dev/zero > {shlex.quote(str(ct / 'filler'))} || true; "
        f"cp {shlex.quote(str(conf))} {shlex.quote(str(tmp_path / 'seen.conf'))}; "
        f"trap 'ls -A {shlex.quote(str(ct))} > {shlex.quote(str(tmp_path / 'after.txt'))}; "
        f"cp {shlex.quote(str(conf))} {shlex.quote(str(tmp_path / 'after.conf'))}' EXIT"
    )
    # exec would drop the trap, so run the module as a child of the shell here
    rc, result = run_module(args_for(conf, dev_dir), tmp_path, wrap=in_mount_namespace(setup, exec_module=False))
    assert rc != 0
    assert f"cannot write {conf}: No space left on device" in result["msg"]
    assert (tmp_path / "after.conf").read_bytes() == (tmp_path / "seen.conf").read_bytes() == BASE_PVE.encode()
    assert (tmp_path / "after.txt").read_text().split() == ["101.conf", "filler"]


@needs_root
def test_permission_denied_fails_naming_the_path(tmp_path, dev_dir):
    """The config directory belongs to another user and root runs without CAP_DAC_OVERRIDE."""
    ct = tmp_path / "ct"
    ct.mkdir(mode=0o755)
    conf = ct / "101.conf"
    conf.write_text(BASE_PVE)
    os.chown(ct, 65534, 65534)
    rc, result = run_module(args_for(conf, dev_dir), tmp_path, wrap=without_dac_override)
    assert rc != 0
    assert f"cannot write {conf}: Permission denied" in result["msg"]
    assert conf.read_text() == BASE_PVE
    assert listing(ct) == ["101.conf"]


def test_file_size_limit_fails_and_leaves_no_temp_file(tmp_path, dev_dir):
    conf = tmp_path / "101.conf"
    conf.write_text(BASE_PVE)
    before = conf.read_bytes()
    rc, result = run_module(args_for(conf, dev_dir), tmp_path, fsize=len(before) + 10)
    assert rc != 0
    assert f"cannot write {conf}: File too large" in result["msg"]
    assert conf.read_bytes() == before
    assert listing(tmp_path) == sorted(["101.conf", "args.json", "dev"])


def test_check_mode_writes_nothing_and_diff_shows_the_plan(tmp_path, dev_dir):
    conf = tmp_path / "101.conf"
    conf.write_text(BASE_PVE)
    before = conf.read_bytes()
    rc, result = run_module({**args_for(conf, dev_dir), "_ansible_check_mode": True, "_ansible_diff": True}, tmp_path)
    assert rc == 0, result
    assert result["changed"] is True
    assert "dev0: /dev/nvidia0,mode=0666" in result["diff"]["after"]
    assert result["diff"]["before"] == BASE_PVE
    assert conf.read_bytes() == before


# --------------------------------------------------------------------------- platform and its old name


def test_the_former_name_flavour_is_not_an_alias_of_platform(tmp_path, dev_dir):
    # renamed outright before any release: the old name is an unsupported parameter, the file untouched
    conf = tmp_path / "old.conf"
    conf.write_text("lxc.arch = amd64\n")
    rc, result = run_module(args_for(conf, dev_dir, flavour="lxc", cgroup="v2"), tmp_path)
    assert rc != 0, result
    assert "Unsupported parameters" in result["msg"], result["msg"]
    assert "flavour" in result["msg"], result["msg"]
    assert conf.read_text() == "lxc.arch = amd64\n"


# --------------------------------------------------------------------------- bind mounts and their managed root


@pytest.mark.parametrize("root", ["/", "//", "/./", "/srv/.."])
@pytest.mark.parametrize("platform", ["proxmox", "lxc"])
def test_a_mounts_root_of_slash_fails_and_keeps_every_user_mount(tmp_path, dev_dir, root, platform):
    # with / as the managed root every mount of the container counted as managed and was deleted
    conf = tmp_path / "101.conf"
    conf.write_text(
        BASE_PVE if platform == "proxmox" else "lxc.uts.name = g\nlxc.mount.entry = /srv/site srv/site none bind 0 0\n"
    )
    before = conf.read_bytes()
    rc, result = run_module(
        args_for(
            conf,
            dev_dir,
            platform=platform,
            bind_mounts=[{"source": "/srv/gpufleet/models", "target": "/srv/models"}],
            bind_mounts_root=root,
        ),
        tmp_path,
    )
    assert rc != 0, result
    assert f"bind_mounts_root {root!r}" in result["msg"]
    assert "must be a subdirectory of the host" in result["msg"]
    assert conf.read_bytes() == before
    assert not [n for n in listing(tmp_path) if n.startswith(".lxc_gpu_config")]
    # the store's own directory as the root: mounts under it are managed, the user's are kept
    conf.write_bytes(before + ("mp1: /srv/gpufleet/models/old,mp=/old\n" if platform == "proxmox" else "").encode())
    rc, result = run_module(
        args_for(conf, dev_dir, platform=platform, bind_mounts_root="/srv/gpufleet/models/"), tmp_path
    )
    assert rc == 0, result
    text = conf.read_text()
    assert "/srv/gpufleet/models/old" not in text
    kept = ["mp0: /srv/models,mp=/models,ro=1", "lxc.mount.entry: /srv/site srv/site none bind,create=dir 0 0"]
    for line in kept if platform == "proxmox" else ["lxc.mount.entry = /srv/site srv/site none bind 0 0"]:
        assert line in text.splitlines()


@pytest.mark.parametrize("target", ["//", "/./", "/.", "///", "/srv//models"])
@pytest.mark.parametrize("platform", ["proxmox", "lxc"])
def test_a_bind_mount_at_the_container_root_fails_naming_the_target(tmp_path, dev_dir, target, platform):
    conf = tmp_path / "101.conf"
    conf.write_text(BASE_PVE if platform == "proxmox" else "lxc.uts.name = g\n")
    before = conf.read_bytes()
    mounts = [{"source": "/srv/gpufleet/models", "target": target}]
    rc, result = run_module(args_for(conf, dev_dir, platform=platform, bind_mounts=mounts), tmp_path)
    assert rc != 0, result
    assert f"bind mount target {target!r} is not a path below /" in result["msg"]
    assert conf.read_bytes() == before
