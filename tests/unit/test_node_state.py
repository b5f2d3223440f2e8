# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""node_state: one read of a role's files, directories and accounts against what it would write.

The property the sglang_server role's fast path rests on: a path is reported clean only when its
writing task would change nothing, so any change to a file (a byte, a mode bit, its owner, its type)
is drift, named with its path. Named cases for each kind of drift, properties over contents and
modes, the wants' schema (bad input named, never a crash), ``observe`` against ansible-core's own
``stat`` module, and the module run as Ansible runs it (the sha256 never in its output)."""

from __future__ import annotations

import grp
import hashlib
import os
import pwd
import re
import time
from pathlib import Path

import ansible.modules.find as ansible_find
import ansible.modules.stat as ansible_stat
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lib.fuzz import examples
from lib.module import run_module

from ansible_collections.gpufleet.sglang.plugins.module_utils.common import node_state as ns
from ansible_collections.gpufleet.sglang.plugins.module_utils.common import unit_state as us

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "plugins" / "modules" / "node_state.py"
ME = pwd.getpwuid(os.getuid()).pw_name
MY_GROUP = grp.getgrgid(os.getgid()).gr_name


def want_file(path: Path, data: bytes, mode: str = "0644", **more) -> dict:
    return {
        "path": str(path),
        "sha256": hashlib.sha256(data).hexdigest(),
        "owner": ME,
        "group": MY_GROUP,
        "mode": mode,
        **more,
    }


def drift_of(files=(), users=(), groups=(), paths=()) -> dict:
    return ns.read_state(*ns.check_wants(list(files), list(users), list(groups), list(paths)))


def test_files_and_directories_as_written_are_clean(tmp_path):
    (tmp_path / "unit").write_bytes(b"[Unit]\n")
    (tmp_path / "unit").chmod(0o644)
    (tmp_path / "dir").mkdir(mode=0o750)
    (tmp_path / "dir").chmod(0o750)
    state = drift_of(
        [
            want_file(tmp_path / "unit", b"[Unit]\n"),
            {"path": str(tmp_path / "dir"), "state": "directory", "owner": ME, "group": MY_GROUP, "mode": "0750"},
            {"path": str(tmp_path / "gone"), "state": "absent"},
        ]
    )
    assert state["drift"] == []


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda p: p.write_bytes(b"[Unit]\nX\n"), "content differs"),
        (lambda p: p.write_bytes(b""), "content differs"),
        (lambda p: p.chmod(0o600), "mode 0600, wanted 0644"),
        (lambda p: p.unlink(), "missing, wanted a file"),
        (lambda p: (p.unlink(), p.mkdir()), "is a directory, wanted a file"),
        (lambda p: (p.rename(p.with_name("real")), p.symlink_to(p.with_name("real"))), "is a symlink, wanted a file"),
    ],
    ids=["content", "emptied", "mode", "removed", "directory", "symlink-to-the-same-bytes"],
)
def test_each_change_to_a_file_is_drift_naming_the_path(tmp_path, change, reason):
    path = tmp_path / "unit"
    path.write_bytes(b"[Unit]\n")
    path.chmod(0o644)
    change(path)
    drift = drift_of([want_file(path, b"[Unit]\n")])["drift"]
    assert drift == [f"{path}: {reason}"]


def test_owner_and_group_left_out_are_not_checked(tmp_path):
    """A want without owner (or group) is met whoever owns the file, as a template task that sets neither leaves
    it; the one that is given is still checked."""
    path = tmp_path / "f"
    path.write_bytes(b"x")
    path.chmod(0o644)
    unowned = {k: v for k, v in want_file(path, b"x").items() if k not in ("owner", "group")}
    assert drift_of([unowned])["drift"] == []
    assert drift_of([dict(unowned, group="no-such-group-here")])["drift"] == [
        f"{path}: owned by {ME}:{MY_GROUP}, wanted {ME}:no-such-group-here"
    ]
    assert drift_of([dict(unowned, mode="0600")])["drift"] == [f"{path}: mode 0644, wanted 0600"]


def test_other_owner_and_missing_directory_and_present_absent(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x")
    path.chmod(0o644)
    other = want_file(path, b"x", owner="nobody")
    (tmp_path / "stale").write_text("old")
    drift = drift_of(
        [
            other,
            {"path": str(tmp_path / "d"), "state": "directory", "owner": ME, "group": MY_GROUP, "mode": "0755"},
            {"path": str(tmp_path / "stale"), "state": "absent"},
        ]
    )["drift"]
    assert drift == [
        f"{path}: owned by {ME}:{MY_GROUP}, wanted nobody:{MY_GROUP}",
        f"{tmp_path / 'd'}: missing, wanted a directory",
        f"{tmp_path / 'stale'}: exists, wanted absent",
    ]


def test_a_numeric_owner_and_group_are_the_ids_as_file_takes_them(tmp_path):
    """Digits are a uid or gid, as ansible.builtin.file reads them: the file's own ids are clean whether the
    node has a name for them or not (an unprivileged container's root, 100000, has none on its host); any
    other id is drift naming both."""
    path = tmp_path / "d"
    path.mkdir(mode=0o755)
    path.chmod(0o755)
    uid, gid = os.getuid(), os.getgid()
    want = {"path": str(path), "state": "directory", "mode": "0755"}
    assert drift_of([dict(want, owner=str(uid), group=str(gid))])["drift"] == []
    assert drift_of([dict(want, owner=ME, group=str(gid))])["drift"] == []
    assert drift_of([dict(want, owner=str(uid + 100000))])["drift"] == [
        f"{path}: owned by {ME}:{MY_GROUP}, wanted {uid + 100000}:{MY_GROUP}"
    ]
    assert drift_of([dict(want, group=str(gid + 1))])["drift"] == [
        f"{path}: owned by {ME}:{MY_GROUP}, wanted {ME}:{gid + 1}"
    ]


@given(wanted=st.integers(min_value=0, max_value=4_294_967_295), found=st.integers(min_value=0, max_value=2**32 - 1))
def test_property_a_numeric_id_matches_exactly_its_number(wanted, found):
    assert ns._same_id(str(wanted), str(found), found) == (wanted == found)


@pytest.mark.parametrize("value", ["01", "-1", "1e3", "12345678901", " 0", "0\n", "\uff11", "root\n"])
def test_an_id_that_is_not_plain_digits_is_refused_naming_the_field(value):
    with pytest.raises(ns.StateError, match=r"files\[0\] \(/x\): owner must be a user or group name"):
        ns.check_wants([{"path": "/x", "state": "directory", "owner": value, "mode": "0755"}], [], [], [])


def test_a_file_larger_than_the_hash_limit_is_drift_not_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(ns, "MAX_HASHED_BYTES", 10)
    path = tmp_path / "big"
    path.write_bytes(b"x" * 11)
    path.chmod(0o644)
    assert drift_of([want_file(path, b"x" * 11)])["drift"] == [f"{path}: too large to compare"]


@settings(max_examples=examples(60))
@given(
    data=st.binary(max_size=300),
    mode=st.integers(min_value=0, max_value=0o777),
    flip=st.integers(min_value=0, max_value=8 * 300),
    bit=st.integers(min_value=0, max_value=8),
)
def test_property_clean_exactly_when_bytes_and_mode_match(tmp_path_factory, data, mode, flip, bit):
    """Written with its wanted bytes and mode: clean. One bit of the content or the mode changed: drift
    naming the path, whatever the bytes (empty, binary, not UTF-8) and the mode."""
    path = tmp_path_factory.mktemp("p") / "f"
    path.write_bytes(data)
    path.chmod(mode)
    want = want_file(path, data, mode=f"{mode:04o}")
    assert drift_of([want])["drift"] == []
    if data:
        index = flip % (8 * len(data))
        changed = bytearray(data)
        changed[index // 8] ^= 1 << (index % 8)
        path.write_bytes(bytes(changed))
        assert drift_of([want])["drift"] == [f"{path}: content differs"]
        path.write_bytes(data)
    if bit < 9:
        path.chmod(mode ^ (1 << bit))
        assert drift_of([want])["drift"] == [f"{path}: mode {mode ^ (1 << bit):04o}, wanted {mode:04o}"]


class Passwd:
    def __init__(self, home="/var/lib/sglang", shell="/usr/sbin/nologin"):
        self.pw_dir = home
        self.pw_shell = shell


USER = {
    "name": "sglang",
    "group": "sglang",
    "groups_where_present": ["video", "render"],
    "home": "/var/lib/sglang",
    "shell": "/usr/sbin/nologin",
}


@pytest.mark.parametrize(
    "case",
    [
        (Passwd(), "sglang", ["video", "render"], ["sglang", "video", "render"], True, []),
        # a group the node does not have is not wanted there (ansible.builtin.user would not add it either)
        (Passwd(), "sglang", ["video"], ["sglang", "video"], True, []),
        (None, None, [], ["sglang"], False, ["user sglang: missing"]),
        (
            Passwd(),
            "users",
            ["video", "render"],
            ["sglang", "video", "render"],
            True,
            ["user sglang: primary group users, wanted sglang"],
        ),
        (Passwd(), "sglang", ["video"], ["sglang", "video", "render"], True, ["user sglang: not in group(s) render"]),
        (
            Passwd(home="/home/sglang"),
            "sglang",
            ["video", "render"],
            ["video", "render"],
            True,
            ["user sglang: home /home/sglang, wanted /var/lib/sglang"],
        ),
        (
            Passwd(),
            "sglang",
            ["video", "render"],
            ["video", "render"],
            False,
            ["user sglang: home /var/lib/sglang is not a directory"],
        ),
        (
            Passwd(shell="/bin/bash"),
            "sglang",
            ["video", "render"],
            ["video", "render"],
            True,
            ["user sglang: shell /bin/bash, wanted /usr/sbin/nologin"],
        ),
    ],
    ids=["as-wanted", "group-not-on-node", "missing", "primary", "supplementary", "home", "home-not-created", "shell"],
)
def test_account_drift(case):
    """case: the passwd entry, its primary group, the groups listing it, the node's groups, home made, reasons."""
    passwd, primary, member_of, existing, home_is_dir, reasons = case
    want = ns.check_wants([], [USER], [], [])[1][0]
    found = ns.account_drift(
        want, passwd, primary_group=primary, member_of=member_of, existing_groups=existing, home_is_dir=home_is_dir
    )
    assert found == reasons


def test_a_system_user_without_a_group_or_a_home_to_create():
    """A user created with only system, home /nonexistent and create_home false (the gateway's): its primary
    group is not checked and its home need not exist; the shell and the home path still are."""
    want = ns.check_wants(
        [], [{"name": "smg", "home": "/nonexistent", "home_exists": False, "shell": "/usr/sbin/nologin"}], [], []
    )[1][0]
    passwd = Passwd(home="/nonexistent")

    def drift(entry):
        return ns.account_drift(
            want, entry, primary_group="nogroup", member_of=[], existing_groups=["nogroup"], home_is_dir=False
        )

    assert drift(passwd) == []
    assert drift(Passwd(home="/home/smg")) == ["user smg: home /home/smg, wanted /nonexistent"]
    assert drift(Passwd(home="/nonexistent", shell="/bin/sh")) == ["user smg: shell /bin/sh, wanted /usr/sbin/nologin"]
    with pytest.raises(ns.StateError, match=r"users\[0\] \(smg\): home_exists must be true or false, got 'no'"):
        ns.check_wants([], [{"name": "smg", "home": "/x", "home_exists": "no", "shell": "/bin/sh"}], [], [])


def test_this_machine_user_and_a_missing_group(tmp_path):
    me = pwd.getpwuid(os.getuid())
    user = {
        "name": ME,
        "group": MY_GROUP,
        "groups_where_present": ["no-such-group-here"],
        "home": me.pw_dir,
        "shell": me.pw_shell,
    }
    assert drift_of(users=[user], groups=[MY_GROUP])["drift"] == []
    assert drift_of(users=[dict(user, name="no-such-user-here")], groups=["no-such-group-here"])["drift"] == [
        "group no-such-group-here: missing",
        "user no-such-user-here: missing",
    ]


@pytest.mark.parametrize(
    ("files", "users", "groups", "paths", "message"),
    [
        (
            [{"path": "etc/x", "sha256": "0" * 64, "owner": "root", "group": "root", "mode": "0644"}],
            [],
            [],
            [],
            "files[0]: path must be an absolute path",
        ),
        (
            [{"path": "/etc/../x", "state": "absent"}],
            [],
            [],
            [],
            "files[0]: path '/etc/../x' has a control character or a '.' or '..' segment",
        ),
        ([{"path": "/etc/x\n", "state": "absent"}], [], [], [], "control character"),
        ([{"path": "/x", "state": "link"}], [], [], [], "files[0] (/x): state must be one of file, directory, absent"),
        (
            [{"path": "/x", "sha256": "0" * 64, "owner": "root", "group": "root", "mode": "644x"}],
            [],
            [],
            [],
            "files[0] (/x): mode must be an octal string",
        ),
        (
            [{"path": "/x", "sha256": "0" * 64, "owner": "root", "group": "root", "mode": 420}],
            [],
            [],
            [],
            "mode must be an octal string",
        ),
        (
            [{"path": "/x", "sha256": "ABC", "owner": "root", "group": "root", "mode": "0644"}],
            [],
            [],
            [],
            "files[0] (/x): sha256 must be 64 lowercase hex digits",
        ),
        (
            [{"path": "/x", "state": "directory", "owner": "root;rm", "group": "root", "mode": "0755"}],
            [],
            [],
            [],
            "files[0] (/x): owner must be a user or group name",
        ),
        ([], [dict(USER, home="relative")], [], [], "users[0] (sglang) home: path must be an absolute path"),
        (
            [],
            [dict(USER, groups_where_present="video")],
            [],
            [],
            "users[0] (sglang): groups_where_present must be a list",
        ),
        ([], [], ["-bad"], [], "groups[0]: name must be a user or group name"),
        ([], [], [], ["/a/./b"], "paths[0]: path '/a/./b' has a control character"),
        (["/x"], [], [], [], "files[0]: must be a dict, got str"),
    ],
)
def test_bad_wants_are_named(files, users, groups, paths, message):
    with pytest.raises(ns.StateError) as err:
        ns.check_wants(files, users, groups, paths)
    assert message in str(err.value)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["path", "state", "sha256", "owner", "group", "mode", "name", "home", "shell", "groups_where_present"]
            ),
            inner,
            max_size=6,
        )
    ),
    max_leaves=12,
)


@given(
    files=st.lists(JSONISH, max_size=3),
    users=st.lists(JSONISH, max_size=2),
    groups=st.lists(JSONISH, max_size=2),
    paths=st.lists(JSONISH, max_size=2),
)
def test_property_any_wants_are_checked_or_named_never_crash(files, users, groups, paths):
    try:
        out_files, _users, _groups, out_paths = ns.check_wants(files, users, groups, paths)
    except ns.StateError as exc:
        where = str(exc)
    else:
        where = ""
        for path in [want["path"] for want in out_files] + out_paths:
            assert path.startswith("/")
            assert "\n" not in path
    # a refusal names the list it found the bad entry in
    assert where == "" or where.partition("[")[0] in {"files", "users", "groups", "paths"}


def test_observe_agrees_with_ansible_stat(tmp_path):
    """The keys roles read, as ansible-core's own stat module (follow: false) reports them."""
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "inner").mkdir()
    (tmp_path / "link").symlink_to("dir/inner")
    (tmp_path / "dangling").symlink_to("/no/such/target")
    (tmp_path / "chain").symlink_to("link")
    # run from a copy: run from its own directory, ansible/modules/copy.py would shadow the stdlib's copy
    stat_module = tmp_path / "ansible_stat.py"
    stat_module.write_bytes(Path(ansible_stat.__file__).read_bytes())
    for name in ["file", "dir", "link", "dangling", "chain", "missing"]:
        path = str(tmp_path / name)
        rc, theirs = run_module(stat_module, {"path": path, "get_checksum": False}, tmp_path)
        assert rc == 0, theirs
        ours = ns.observe(path)
        for key, value in ours.items():
            assert theirs["stat"][key] == value, (name, key)
        assert set(ours) >= ({"exists", "isreg", "isdir", "islnk"} if theirs["stat"]["exists"] else {"exists"})
        assert ("lnk_source" in ours) == theirs["stat"].get("islnk", False)
    # a parent that is not a directory: both fail, neither says "missing"
    rc, theirs = run_module(stat_module, {"path": str(tmp_path / "file" / "below")}, tmp_path)
    assert rc != 0
    assert theirs["msg"] == "Not a directory"
    with pytest.raises(NotADirectoryError):
        ns.observe(str(tmp_path / "file" / "below"))


def test_module_reports_drift_and_stat_and_never_the_hash(tmp_path):
    path = tmp_path / "secrets.env"
    path.write_text("API_KEY=hunter2\n")
    path.chmod(0o600)
    want = want_file(path, b"API_KEY=other\n", mode="0600")
    rc, result = run_module(MODULE, {"files": [want], "paths": [str(path)]}, tmp_path)
    assert rc == 0, result
    assert result["changed"] is False
    assert result["drift"] == [f"{path}: content differs"]
    assert result["stat"][str(path)]["isreg"] is True
    assert want["sha256"] not in str(result)
    rc, result = run_module(MODULE, {"files": [want], "paths": [str(path)]}, tmp_path, check=True)
    assert rc == 0
    assert result["drift"] == [f"{path}: content differs"]


def test_module_refuses_a_bad_want_naming_it(tmp_path):
    rc, result = run_module(
        MODULE,
        {"files": [{"path": "/x", "state": "directory", "owner": "root", "group": "root", "mode": "rwx"}]},
        tmp_path,
    )
    assert rc != 0
    assert (
        result["msg"] == "node_state: bad input: files[0] (/x): mode must be an octal string such as '0644', got 'rwx'"
    )


# ---- units: one `systemctl show`, conservative ------------------------------------------------------

# `systemctl show --property=Id,LoadState,UnitFileState,ActiveState -- <units>` as systemd 252 prints it
# (captured in the Debian 12 test image: the lab's Proxmox stand-in); a unit it does not know still gets a block
SHOW_252 = """Id=nvidia-uvm-init.service
LoadState=loaded
ActiveState=active
UnitFileState=enabled

Id=nvidia-persistenced.service
LoadState=loaded
ActiveState=inactive
UnitFileState=disabled

Id=nonexist.service
LoadState=not-found
ActiveState=inactive
UnitFileState=
"""
UNITS = ["nvidia-uvm-init.service", "nvidia-persistenced.service", "nonexist.service"]


def test_units_are_clean_only_when_loaded_enabled_and_active():
    found = us.parse_show(SHOW_252, UNITS)
    assert us.unit_drift(found, UNITS) == [
        "unit nvidia-persistenced.service: UnitFileState disabled, wanted enabled, ActiveState inactive, wanted active",
        "unit nonexist.service: LoadState not-found, wanted loaded, UnitFileState unknown, wanted enabled, "
        "ActiveState inactive, wanted active",
    ]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["loaded", "not-found", "masked", "error", ""]),
            st.sampled_from(["enabled", "disabled", "static", "masked", "enabled-runtime", "indirect", ""]),
            st.sampled_from(["active", "inactive", "failed", "activating", "reloading", ""]),
        ),
        min_size=1,
        max_size=6,
    )
)
@settings(max_examples=examples(200))
def test_a_unit_is_clean_exactly_when_all_three_are_as_wanted(states):
    names = [f"u{i}.service" for i in range(len(states))]
    out = "\n".join(
        f"Id={name}\nLoadState={load}\nActiveState={active}\nUnitFileState={file_state}\n"
        for name, (load, file_state, active) in zip(names, states, strict=True)
    )
    drift = us.unit_drift(us.parse_show(out, names), names)
    expected = [n for n, s in zip(names, states, strict=True) if s != ("loaded", "enabled", "active")]
    assert [reason.split(":")[0] for reason in drift] == [f"unit {n}" for n in expected]


@pytest.mark.parametrize(
    ("out", "message"),
    [
        ("Id=a.service\nLoadState=loaded\n", "printed 1 unit(s) for the 2 named"),
        ("Id=a.service\nMainPID=1\n\nId=b.service\n", "printed 'MainPID=1', not one of"),
        ("garbage\n", "printed 'garbage'"),
    ],
)
def test_an_output_not_of_systemctls_format_is_refused(out, message):
    with pytest.raises(us.UnitStateError, match=re.escape(message)):
        us.parse_show(out, ["a.service", "b.service"])


@pytest.mark.parametrize("name", ["-H.service", "a b.service", "nvidia", "../x.service", "a.service\nb", 7])
def test_a_bad_unit_name_is_refused_naming_the_entry(name):
    with pytest.raises(us.UnitStateError, match=r"units\[1\]"):
        us.check_units(["ok.service", name])


def test_module_reads_units_with_one_systemctl_show(tmp_path):
    """The module runs systemctl show once for every unit (a stand-in that prints systemd 252's capture and
    records its argv) and names the units that are not loaded, enabled and active."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls"
    (tmp_path / "show.txt").write_text(SHOW_252)
    fake = bindir / "systemctl"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\ncat {tmp_path / "show.txt"}\n')
    fake.chmod(0o755)
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    rc, result = run_module(MODULE, {"units": UNITS}, tmp_path, env=env, check=True)
    assert rc == 0, result
    assert [r.split(":")[0] for r in result["drift"]] == ["unit nvidia-persistenced.service", "unit nonexist.service"]
    assert calls.read_text().splitlines() == [
        f"show --property=Id,LoadState,UnitFileState,ActiveState -- {' '.join(UNITS)}"
    ]
    rc, result = run_module(MODULE, {"units": ["ok.service", "-H.service"]}, tmp_path, env=env)
    assert rc != 0
    assert result["msg"].startswith("node_state: bad input: units[1]: '-H.service' is not a unit name")


# ---- an apt repository's state: the files dpkg lists for a package, a path's diversion, a stamp's age ---------


def test_module_reads_package_files_and_diversions_and_the_clock(tmp_path):
    """dpkg-query --listfiles once per package, dpkg-divert --listpackage and --truename once per path (stand-ins
    that print what dpkg 1.21 prints, captured on Debian 12, and record their argv); stat gives mtime, and the
    result the node's clock."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls"
    listed = "/.\n/usr/share/keyrings/cuda-archive-keyring.gpg\n/etc/apt/sources.list.d/cuda-debian12-x86_64.list\n"
    (bindir / "dpkg-query").write_text(
        f'#!/bin/sh\necho "dpkg-query $*" >> {calls}\n'
        f'[ "$2" = cuda-keyring ] && {{ printf "{listed}"; exit 0; }}\n'
        "echo \"dpkg-query: package '$2' is not installed\" >&2; exit 1\n"
    )
    (bindir / "dpkg-divert").write_text(
        f'#!/bin/sh\necho "dpkg-divert $*" >> {calls}\n'
        'case "$1 $2" in\n'
        '  "--listpackage /etc/a.list") echo LOCAL ;;\n'
        '  "--truename /etc/a.list") echo /etc/a.list.disabled ;;\n'
        '  "--truename "*) echo "$2" ;;\n'
        "esac\n"
    )
    for tool in bindir.iterdir():
        tool.chmod(0o755)
    stamp = tmp_path / "stamp"
    stamp.write_text("")
    os.utime(stamp, (1_700_000_000, 1_700_000_000))
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    args = {
        "package_files": ["cuda-keyring", "not-there"],
        "diversions": ["/etc/a.list", "/etc/b.list"],
        "paths": [str(stamp)],
    }
    rc, result = run_module(MODULE, args, tmp_path, env=env, check=True)
    assert rc == 0, result
    assert result["package_files"] == {"cuda-keyring": listed.splitlines(), "not-there": []}
    assert result["diversions"] == {
        "/etc/a.list": {"holder": "LOCAL", "divert": "/etc/a.list.disabled"},
        "/etc/b.list": {"holder": None, "divert": None},
    }
    assert result["stat"][str(stamp)]["mtime"] == 1_700_000_000
    assert abs(result["now"] - time.time()) < 60
    assert calls.read_text().splitlines() == [
        "dpkg-query --listfiles cuda-keyring",
        "dpkg-query --listfiles not-there",
        "dpkg-divert --listpackage /etc/a.list",
        "dpkg-divert --truename /etc/a.list",
        "dpkg-divert --listpackage /etc/b.list",
        "dpkg-divert --truename /etc/b.list",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"package_files": ["--admindir=/tmp/x"]}, "node_state: bad input: package_files: not a Debian package name"),
        ({"package_files": ["Cuda"]}, "node_state: bad input: package_files: not a Debian package name: 'Cuda'"),
        ({"diversions": ["etc/a.list"]}, "node_state: bad input: diversions: paths[0]: path must be an absolute path"),
        ({"diversions": ["/etc/../a.list"]}, "node_state: bad input: diversions: paths[0]: path '/etc/../a.list' has"),
    ],
)
def test_module_refuses_a_bad_package_or_diversion_path_naming_it(tmp_path, args, message):
    rc, result = run_module(MODULE, args, tmp_path)
    assert rc != 0
    assert result["msg"].startswith(message), result["msg"]


def test_a_diversion_that_is_not_dpkg_diverts_format_fails_the_task_naming_it(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "dpkg-divert").write_text('#!/bin/sh\nprintf "LOCAL\\nLD_PRELOAD=/x.so\\n"\n')
    (bindir / "dpkg-divert").chmod(0o755)
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    rc, result = run_module(MODULE, {"diversions": ["/etc/a.list"]}, tmp_path, env=env)
    assert rc != 0
    assert result["msg"].startswith("node_state: dpkg-divert --listpackage /etc/a.list is not one line of text"), result


# --------------------------------------------------------------------------- listing a directory


def make_tree(root: Path, names: dict[str, str]) -> None:
    """``names``: entry name -> 'dir', 'file', 'link-dir' (a symlink to a directory) or 'link-none'."""
    root.mkdir(exist_ok=True)
    (root / ".." / "elsewhere").resolve().mkdir(exist_ok=True)
    for name, kind in names.items():
        path = root / name
        if kind == "dir":
            path.mkdir()
        elif kind == "file":
            path.write_text("x", encoding="utf-8")
        elif kind == "link-dir":
            path.symlink_to((root / ".." / "elsewhere").resolve())
        else:
            path.symlink_to(root / "no-such-target")


def test_listing_leaves_out_hidden_names_and_reports_links_as_links(tmp_path):
    root = tmp_path / "releases"
    make_tree(root, {"a": "dir", ".partial": "dir", "b.txt": "file", "c": "link-dir", "d": "link-none"})
    listed = ns.list_directory(str(root))
    assert [e["name"] for e in listed] == ["a", "b.txt", "c", "d"]
    by_name = {e["name"]: e for e in listed}
    assert by_name["a"]["isdir"]
    assert not by_name["a"]["islnk"]
    assert by_name["b.txt"]["isreg"]
    assert by_name["c"]["islnk"]
    assert not by_name["c"]["isdir"]
    assert by_name["a"]["path"] == str(root / "a")
    assert ns.list_directory(str(tmp_path / "absent")) == []


def test_listing_refuses_a_file_and_a_directory_of_too_many_entries(tmp_path):
    (tmp_path / "f").write_text("", encoding="utf-8")
    with pytest.raises(NotADirectoryError):
        ns.list_directory(str(tmp_path / "f"))
    make_tree(tmp_path / "many", {f"r{i}": "dir" for i in range(5)})
    with pytest.raises(OSError, match="more than 4 entries to list"):
        ns.list_directory(str(tmp_path / "many"), limit=4)
    assert len(ns.list_directory(str(tmp_path / "many"), limit=5)) == 5


@settings(max_examples=examples(25))
@given(
    names=st.dictionaries(
        st.from_regex(r"\.?[A-Za-z0-9_-]{1,12}", fullmatch=True),
        st.sampled_from(["dir", "file", "link-dir", "link-none"]),
        max_size=8,
    )
)
def test_property_the_directories_listed_are_the_ones_ansible_find_finds(tmp_path_factory, names):
    """What the sglang role prunes by (its releases' directories and their mtimes) is what find returned."""
    work = tmp_path_factory.mktemp("find")
    root = work / "dir"
    make_tree(root, names)
    # a copy: run from ansible/modules, the module would import that directory's tempfile.py for the stdlib's
    find = work / "find_module.py"
    find.write_bytes(Path(ansible_find.__file__).read_bytes())
    rc, found = run_module(find, {"paths": [str(root)], "file_type": "directory", "recurse": False}, work)
    assert rc == 0, found
    want = {f["path"]: f["mtime"] for f in found["files"]}
    got = {e["path"]: e["mtime"] for e in ns.list_directory(str(root)) if e["isdir"] and not e["islnk"]}
    assert got == want


def test_module_lists_directories_and_names_a_bad_one(tmp_path):
    make_tree(tmp_path / "d", {"one": "dir", ".hidden": "dir"})
    rc, result = run_module(MODULE, {"list_dirs": [str(tmp_path / "d"), str(tmp_path / "gone")]}, tmp_path)
    assert rc == 0, result
    assert [e["name"] for e in result["listed"][str(tmp_path / "d")]] == ["one"]
    assert result["listed"][str(tmp_path / "gone")] == []
    rc, result = run_module(MODULE, {"list_dirs": ["relative/dir"]}, tmp_path)
    assert rc == 1
    assert "node_state: bad input: list_dirs: " in result["msg"]
    (tmp_path / "f").write_text("", encoding="utf-8")
    rc, result = run_module(MODULE, {"list_dirs": [str(tmp_path / "f")]}, tmp_path)
    assert rc == 1
    assert f"node_state: cannot list {tmp_path / 'f'}: Not a directory" in result["msg"]
