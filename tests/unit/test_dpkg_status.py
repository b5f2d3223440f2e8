# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""dpkg_status and node_state's packages: the read that lets the roles skip apt on a node that has it all.

The property the apt tasks' skip rests on: a wanted package is reported satisfied only when dpkg says
``ok installed`` for every line of it, at exactly the version asked for, with a wanted selection, so
that apt is skipped only where apt itself would change nothing. Anything else is left to apt. dpkg's
output is outside data: a line not in its format is refused with its number, never half-read. Named
cases, properties against a reference rule, hostile output, and the module on this machine's real dpkg
(and on a dpkg-query stand-in that prints garbage or fails)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lib.fuzz import examples
from lib.module import run_module

from ansible_collections.gpufleet.sglang.plugins.module_utils.common import dpkg_status as ds

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "plugins" / "modules" / "node_state.py"

STATES = sorted(ds._STATE)
DRIVER = "nvidia-driver-cuda=580.159.04-1"
WANTS = sorted(ds._WANT)


def line(name: str, version: str, want: str = "install", error: str = "ok", state: str = "installed") -> str:
    return f"{name}\t{version}\t{want} {error} {state}\n"


@pytest.mark.parametrize(
    ("out", "wanted", "selection", "missing"),
    [
        (line("nvidia-driver-cuda", "580.159.04-1"), ["nvidia-driver-cuda=580.159.04-1"], None, []),
        (line("nvidia-driver-cuda", "580.159.04-1"), ["nvidia-driver-cuda"], None, []),
        # another version, a downgrade or upgrade by hand: apt puts it back
        (line("nvidia-driver-cuda", "580.126.09-1"), [DRIVER], None, [DRIVER]),
        # an interrupted install: apt (dpkg --configure) finishes it
        (line("cuda-keyring", "1.1-1", state="half-configured"), ["cuda-keyring=1.1-1"], None, ["cuda-keyring=1.1-1"]),
        (line("cuda-keyring", "1.1-1", error="reinstreq"), ["cuda-keyring=1.1-1"], None, ["cuda-keyring=1.1-1"]),
        # removed, its configuration kept
        (line("lxc", "1:5.0.2-1", want="deinstall", state="config-files"), ["lxc"], None, ["lxc"]),
        (line("lxc", "", want="unknown", state="not-installed"), ["lxc"], None, ["lxc"]),
        # held counts as installed; only held counts for the hold task
        (line("libnvidia-compute", "580.159.04-1", want="hold"), ["libnvidia-compute=580.159.04-1"], None, []),
        (line("libnvidia-compute", "580.159.04-1"), ["libnvidia-compute"], "hold", ["libnvidia-compute"]),
        (line("libnvidia-compute", "580.159.04-1", want="hold"), ["libnvidia-compute"], "hold", []),
        # marked for removal while installed: apt's install would mark it back
        (line("lxc", "1:5.0.2-1", want="deinstall"), ["lxc"], None, ["lxc"]),
        # not listed at all (dpkg-query's "no packages found matching")
        ("", ["cuda-toolkit-13-0=13.0.2-1"], None, ["cuda-toolkit-13-0=13.0.2-1"]),
        # an epoch is part of the version
        (line("lxc", "1:5.0.2-1"), ["lxc=5.0.2-1"], None, ["lxc=5.0.2-1"]),
        (line("lxc", "1:5.0.2-1"), ["lxc=1:5.0.2-1"], None, []),
        # apt's version pattern, an architecture and a comparison are apt's to resolve
        (line("cuda-toolkit-13-0", "13.0.2-1"), ["cuda-toolkit-13-0=13.0*"], None, ["cuda-toolkit-13-0=13.0*"]),
        (line("lxcfs", "5.0.3-1"), ["lxcfs:amd64"], None, ["lxcfs:amd64"]),
        (line("lxcfs", "5.0.3-1"), ["lxcfs>=5.0"], None, ["lxcfs>=5.0"]),
        # a multi-arch package: every architecture's line must be as wanted
        (line("libfoo1", "2-1") + line("libfoo1", "2-1", state="unpacked"), ["libfoo1=2-1"], None, ["libfoo1=2-1"]),
        (line("libfoo1", "2-1") + line("libfoo1", "2-1"), ["libfoo1=2-1"], None, []),
        # order kept, each entry on its own
        (line("a1", "1") + line("b2", "2"), ["b2=3", "a1=1", "c3"], None, ["b2=3", "c3"]),
    ],
)
def test_named_cases(out, wanted, selection, missing):
    assert ds.unsatisfied(out, wanted, selection) == missing


@pytest.mark.parametrize(
    ("out", "named"),
    [
        ("bash 5.2 install ok installed\n", "line 1"),
        ("bash\t5.2\tinstall ok\n", "line 1"),
        (line("bash", "5.2") + "bash\t5.2\tinstall ok installed extra\n", "line 2"),
        ("Bash\t5.2\tinstall ok installed\n", "line 1"),
        ("bash\t5.2\tinstall ok frobnicated\n", "line 1"),
        ("bash\t5.2\twant ok installed\n", "line 1"),
        ("bash\t5.2 ; rm -rf /\tinstall ok installed\n", "line 1"),
        ("bash\t5.2\tinstall ok installed\tmore\n", "line 1"),
        ("\x1b[31mbash\t5.2\tinstall ok installed\n", "line 1"),
    ],
)
def test_output_not_in_dpkgs_format_is_refused_naming_the_line(out, named):
    with pytest.raises(ds.DpkgStatusError, match=named):
        ds.unsatisfied(out, ["bash"])


@pytest.mark.parametrize(
    "spec",
    ["", "Bash", "bash=", "-rf", "a", "bash;reboot", "bash 5", "../x", "bash\n=1", "bash:", "bash=>1", 3, None, [1]],
)
def test_a_wanted_entry_that_is_not_a_package_is_refused(spec):
    with pytest.raises(ds.DpkgStatusError, match=r"package|text"):
        ds.unsatisfied(line("bash", "5.2"), [spec])


def test_a_bad_selection_or_wanted_list_is_refused():
    with pytest.raises(ds.DpkgStatusError, match="selection"):
        ds.unsatisfied("", ["bash"], "purge")
    with pytest.raises(ds.DpkgStatusError, match="list"):
        ds.unsatisfied("", "bash")


names = st.from_regex(r"[a-z0-9][a-z0-9+.-]{1,12}", fullmatch=True)
versions = st.from_regex(r"([0-9]:)?[0-9][0-9a-z.+~]{0,6}(-[0-9]{1,2})?", fullmatch=True)
errors = st.sampled_from(["ok", "reinstreq"])
entries = st.tuples(names, versions, st.sampled_from(WANTS), errors, st.sampled_from(STATES))


@given(status=st.lists(entries, min_size=1, max_size=8), data=st.data(), selection=st.none() | st.just("hold"))
@settings(max_examples=examples(200))
def test_satisfied_exactly_when_every_line_is_installed_as_asked(status, data, selection):
    # the wanted names and versions mostly those dpkg lists, so that each rule is reached
    listed_names = st.sampled_from([e[0] for e in status])
    listed_versions = st.sampled_from([e[1] for e in status])
    wanted = data.draw(
        st.lists(st.tuples(listed_names | names, st.none() | listed_versions | versions), min_size=1, max_size=6)
    )
    out = "".join(line(*entry) for entry in status)
    specs = [name if version is None else f"{name}={version}" for name, version in wanted]
    got = ds.unsatisfied(out, specs, selection)
    allowed = {"hold"} if selection else {"install", "hold"}
    for (name, version), spec in zip(wanted, specs, strict=True):
        # (version, want, error, state) of each line dpkg prints for the name
        lines = [entry[1:] for entry in status if entry[0] == name]
        ok = bool(lines) and all(
            want in allowed and err == "ok" and state == "installed" and (version is None or have == version)
            for have, want, err, state in lines
        )
        assert (spec in got) is not ok, (spec, lines)


@given(st.text(max_size=300))
@settings(max_examples=examples(300))
def test_any_output_is_read_or_refused_never_misread(out):
    try:
        found = ds.parse_dpkg_status(out)
    except ds.DpkgStatusError as exc:
        refused = str(exc)
        assert refused.startswith("dpkg-query's line "), refused
        return
    # what was read is what dpkg's format says, line by line
    for name, lines in found.items():
        for version, want, err, state in lines:
            assert f"{name}\t{version}\t{want} {err} {state}" in out


@given(st.text(max_size=60))
@settings(max_examples=examples(300))
def test_any_wanted_text_is_a_package_as_apt_takes_it_or_refused(spec):
    # an inventory's package list: whatever it holds, no traceback, and nothing but a Debian package
    # name ever reaches dpkg-query's argv
    try:
        name, _version, _exact = ds.split_spec(spec)
    except ds.DpkgStatusError as exc:
        refused = str(exc)
        assert refused.startswith("not a Debian package as apt takes it"), refused
        return
    assert ds._NAME.match(name), name
    assert spec.startswith(name)


def test_the_module_reads_this_machines_real_dpkg(tmp_path):
    shown = subprocess.run(
        ["dpkg-query", "--show", "--showformat", "${Version}", "bash"], check=True, capture_output=True, text=True
    )
    bash = f"bash={shown.stdout}"
    rc, result = run_module(
        MODULE,
        {"packages": [bash, "bash=0.0-0", "gpufleet-no-such-package"], "held": ["bash"]},
        tmp_path,
    )
    assert rc == 0, result
    assert result["changed"] is False
    assert result["packages_missing"] == ["bash=0.0-0", "gpufleet-no-such-package"]
    assert result["not_held"] == ["bash"]
    # nothing asked, nothing run
    rc, result = run_module(MODULE, {}, tmp_path, check=True)
    assert (rc, result["packages_missing"], result["not_held"]) == (0, [], [])


def fake_dpkg_query(tmp_path: Path, script: str) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / "dpkg-query"
    tool.write_text(f"#!/bin/sh\n{script}\n")
    tool.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("printf 'lxc\\t1:5.0\\tinstall ok installed\\n<script>alert(1)</script>\\n'", "dpkg-query's line 2"),
        ("echo 'dpkg-query: error: database locked' >&2; exit 2", "dpkg-query exited 2: dpkg-query: error: database"),
    ],
)
def test_the_module_fails_on_a_dpkg_query_it_cannot_trust(tmp_path, script, message):
    rc, result = run_module(MODULE, {"packages": ["lxc"]}, tmp_path, env=fake_dpkg_query(tmp_path, script))
    assert rc != 0
    assert message in result["msg"], result["msg"]


def test_the_module_refuses_a_bad_package_before_running_dpkg(tmp_path):
    env = fake_dpkg_query(tmp_path, f"touch {tmp_path}/ran")
    rc, result = run_module(MODULE, {"packages": ["lxc; reboot"]}, tmp_path, env=env)
    assert rc != 0
    assert result["msg"] == (
        "node_state: bad input: not a Debian package as apt takes it (name, name=version, name:arch): 'lxc; reboot'"
    )
    assert not (tmp_path / "ran").exists()


# ---- dpkg-divert's answers (the diversion of cuda-keyring's list, read by node_state) -------------------------


# what dpkg-divert 1.21 (Debian 12) prints for a local diversion, a package's, and a path that is not diverted
@pytest.mark.parametrize(
    ("listpackage", "truename", "wanted"),
    [
        ("LOCAL\n", "/etc/x.list.disabled\n", {"holder": "LOCAL", "divert": "/etc/x.list.disabled"}),
        ("dash\n", "/bin/sh.distrib\n", {"holder": "dash", "divert": "/bin/sh.distrib"}),
        ("", "/etc/x.list\n", {"holder": None, "divert": None}),
    ],
)
def test_diversions_as_dpkg_divert_prints_them(listpackage, truename, wanted):
    path = "/bin/sh" if listpackage.startswith("dash") else "/etc/x.list"
    assert ds.parse_diversion(path, listpackage, truename) == wanted


@pytest.mark.parametrize(
    ("listpackage", "truename", "message"),
    [
        ("LOCAL\nextra\n", "/x\n", "dpkg-divert --listpackage /etc/x.list is not one line of text"),
        ("LOCAL\n", "/x\n/y\n", "dpkg-divert --truename /etc/x.list is not one line of text"),
        ("LOCAL\n", "relative\n", "dpkg-divert --truename /etc/x.list is not an absolute path"),
        ("$(reboot)\n", "/x\n", "dpkg-divert --listpackage /etc/x.list is not LOCAL or a package"),
        (b"LOCAL\n", "/x\n", "dpkg-divert --listpackage /etc/x.list is bytes, not text"),
    ],
)
def test_an_answer_not_of_dpkg_diverts_format_is_refused_naming_it(listpackage, truename, message):
    with pytest.raises(ds.DpkgStatusError, match="^" + re.escape(message)):
        ds.parse_diversion("/etc/x.list", listpackage, truename)


@given(listpackage=st.text(max_size=40), truename=st.text(max_size=40))
@settings(max_examples=examples(300))
def test_property_any_answer_is_read_as_dpkg_says_or_refused(listpackage, truename):
    """Never another exception; an empty holder means not diverted; else one line each, the holder LOCAL or a
    package name, the divert an absolute path, with no control character in either."""
    try:
        got = ds.parse_diversion("/etc/x.list", listpackage, truename)
    except ds.DpkgStatusError:
        return
    if got["holder"] is None:
        assert got["divert"] is None
        assert listpackage in ("", "\n")
        return
    assert got["holder"] == listpackage.removesuffix("\n")
    assert got["divert"] == truename.removesuffix("\n")
    assert got["divert"].startswith("/")
    assert not any(ord(c) < 32 or ord(c) == 127 for c in got["holder"] + got["divert"])
    assert got["holder"] == "LOCAL" or re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", got["holder"])


@given(name=st.text(max_size=30))
@settings(max_examples=examples(300))
def test_property_a_package_name_is_dpkgs_form_or_refused(name):
    if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", name):
        with pytest.raises(ds.DpkgStatusError, match=r"^not a Debian package name"):
            ds.check_name(name)
        return
    assert ds.check_name(name) == name
    assert re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", name)
    assert not name.startswith("-")
