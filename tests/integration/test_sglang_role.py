"""Role sglang on localhost against real SGLang wheels (installed without dependencies).

Driven with ansible-runner: the `patch` entry point on an unpacked wheel, and the whole role
installing from a local wheelhouse into a temporary sglang_root. Files are compared by sha256.
The role's bad-input cases go through extensions/molecule/common/bad_input.yml, the harness every role's
invalid input goes through, with localhost as its target.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import ansible_runner
import pytest
import yaml
from lib.playbook import CASES_PLAY, ansible_settings, runner_data_dir
from lib.sglang_wheels import (
    ENABLED_UPSTREAM,
    PATCH_NEEDED,
    WHEEL_DIR,
    WheelIndex,
    install_wheel,
    uv_wheel_path,
    wheel_path,
)

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.source import LAYOUTS, inspect_sglang

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
MODEL_RUNNER = next(layout.relpath for layout in LAYOUTS if layout.name == "model_runner")
UV_VERSION = str(yaml.safe_load((REPO / "roles/sglang/defaults/main.yml").read_text())["sglang_uv_version"])

# Runs the `patch` entry point once per case; a case that fails has its message recorded
# (the harness's rescue), so one playbook run covers several cases.
CASE_TASKS = """
- name: Case {{ case.name }}
  block:
    - name: Patch entry point
      ansible.builtin.include_role:
        name: gpufleet.sglang.sglang
        tasks_from: patch
      vars:
        sglang_patch_site_packages: "{{ case.site }}"
        sglang_patch_record_dir: "{{ case.record }}"
        sglang_autotune_backends: "{{ case.backends | default(['flashinfer_cutlass']) }}"
        sglang_extra_patches: "{{ case.extra | default([]) }}"
    - name: Record the outcome
      ansible.builtin.copy:
        content: "{{ {'ok': true, 'state': __sglang_patch_state} | to_json }}"
        dest: "{{ case.out }}"
        mode: "0644"
      check_mode: false
      changed_when: false
  rescue:
    - name: Record the failure
      ansible.builtin.copy:
        content: "{{ {'ok': false, 'msg': ansible_failed_result.msg} | to_json }}"
        dest: "{{ case.out }}"
        mode: "0644"
      check_mode: false
      changed_when: false
"""

ROLE_PLAY = """
- hosts: localhost
  gather_facts: false
  roles:
    - role: gpufleet.sglang.sglang
  post_tasks:
    - name: Show sglang_facts
      ansible.builtin.copy:
        content: "{{ sglang_facts | to_nice_json }}"
        dest: "{{ facts_out }}"
        mode: "0644"
      check_mode: false
      changed_when: false
"""


class Run:
    def __init__(self, runner: ansible_runner.Runner):
        self.rc = runner.rc
        self.changed = runner.stats.get("changed", {}).get("localhost", 0) if runner.stats else None
        self.output = runner.stdout.read()
        # each task's outcomes by its name (runner_on_ok, runner_on_skipped, ...; not its start), from the events
        self.tasks: dict[str, list[str]] = {}
        for event in runner.events:
            data = event.get("event_data", {})
            if (
                event.get("event", "").startswith("runner_on_")
                and event["event"] != "runner_on_start"
                and "task" in data
            ):
                self.tasks.setdefault(data["task"], []).append(event["event"])


def play(tmp_path: Path, text: str, extravars: dict, *, check: bool = False, diff: bool = False) -> Run:
    pdd = runner_data_dir(tmp_path, text)
    (pdd / "project" / "case.yml").write_text(CASE_TASKS)
    cmdline = " ".join(flag for flag, on in (("--check", check), ("--diff", diff)) if on)
    runner = ansible_runner.run(
        private_data_dir=str(pdd),
        playbook="play.yml",
        inventory=f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}",
        extravars=extravars,
        cmdline=cmdline or None,
        envvars=ansible_settings(),
        quiet=True,
    )
    return Run(runner)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def case(tmp_path: Path, name: str, site: Path, **more) -> dict:
    return {
        "name": name,
        "site": str(site),
        "record": str(tmp_path / f"record-{name}"),
        "out": str(tmp_path / f"outcome-{name}.json"),
        **more,
    }


def outcome(tmp_path: Path, name: str) -> dict:
    return json.loads((tmp_path / f"outcome-{name}.json").read_text())


EXTRA_OK = """--- a/sglang/version.py
+++ b/sglang/version.py
@@ -1,3 +1,4 @@
+# gpufleet extra patch
 try:
     from sglang._version import __version__, __version_tuple__
 except ImportError:
"""

EXTRA_BAD = EXTRA_OK.replace("from sglang._version import", "from sglang.not_the_context import")


def test_patch_enables_commented_backend_and_is_idempotent(tmp_path):
    template = tmp_path / "extra.patch.j2"
    template.write_text(EXTRA_OK)
    sites, originals, cases = {}, {}, []
    for version in PATCH_NEEDED:
        sites[version] = install_wheel(version, tmp_path / version)
        before = inspect_sglang(str(sites[version]))
        assert "flashinfer_cutlass" in before["commented_backends"]
        assert "flashinfer_cutlass" not in before["autotuned_backends"]
        originals[version] = (sites[version] / MODEL_RUNNER).read_text(encoding="utf-8").splitlines()
        cases.append(case(tmp_path, version, sites[version], extra=[{"name": "marker", "template": str(template)}]))

    first = play(tmp_path, CASES_PLAY, {"cases": cases})
    assert first.rc == 0, first.output
    patched = {}
    for version, site in sites.items():
        assert outcome(tmp_path, version) == {"ok": True, "state": "patched"}, first.output
        after = inspect_sglang(str(site))
        assert after["version"] == version
        assert "flashinfer_cutlass" in after["autotuned_backends"]
        assert "flashinfer_cutlass" not in after["commented_backends"]
        assert after["autotune_file_pristine"] is False
        now = (site / MODEL_RUNNER).read_text(encoding="utf-8").splitlines()
        changed = [d for d in difflib.unified_diff(originals[version], now, lineterm="", n=0) if d[:1] in "+-"]
        # exactly one line changed: the commented entry, uncommented in place
        assert changed[2:] == ['-            # "flashinfer_cutlass",', '+            "flashinfer_cutlass",']
        kept = (tmp_path / f"record-{version}" / "flashinfer-autotune.patch").read_text()
        assert kept.startswith(f"--- a/{MODEL_RUNNER}\n+++ b/{MODEL_RUNNER}\n@@ -")
        assert (site / "sglang/version.py").read_text().startswith("# gpufleet extra patch\ntry:\n")
        patched[version] = sha(site / MODEL_RUNNER)

    second = play(tmp_path, CASES_PLAY, {"cases": cases})
    assert second.rc == 0, second.output
    assert second.changed == 0, second.output
    for version, site in sites.items():
        assert f"flashinfer_cutlass autotune already patched in SGLang {version}" in second.output
        assert sha(site / MODEL_RUNNER) == patched[version]
        assert (site / "sglang/version.py").read_text().count("# gpufleet extra patch") == 1


def test_enabled_upstream_changes_nothing(tmp_path):
    sites = {v: install_wheel(v, tmp_path / v) for v in ENABLED_UPSTREAM}
    files = {v: Path(inspect_sglang(str(site))["autotune_file"]) for v, site in sites.items()}
    originals = {v: sha(f) for v, f in files.items()}
    run = play(tmp_path, CASES_PLAY, {"cases": [case(tmp_path, v, site) for v, site in sites.items()]})
    assert run.rc == 0, run.output
    assert run.changed == 0, run.output
    for version in ENABLED_UPSTREAM:
        assert outcome(tmp_path, version) == {"ok": True, "state": "enabled_upstream"}
        assert f"flashinfer_cutlass autotune enabled upstream in SGLang {version}" in run.output
        assert sha(files[version]) == originals[version]
        assert not (tmp_path / f"record-{version}").exists()


def test_check_diff_shows_patch_and_changes_nothing(tmp_path):
    site = install_wheel("0.5.8", tmp_path / "site")
    original = sha(site / MODEL_RUNNER)
    run = play(tmp_path, CASES_PLAY, {"cases": [case(tmp_path, "check", site)]}, check=True, diff=True)
    assert run.rc == 0, run.output
    assert outcome(tmp_path, "check") == {"ok": True, "state": "would_patch"}
    assert '+-            # "flashinfer_cutlass",' in run.output
    assert '++            "flashinfer_cutlass",' in run.output
    assert sha(site / MODEL_RUNNER) == original
    assert not (tmp_path / "record-check").exists()
    assert not (tmp_path / "record-check.journal").exists()


def test_failures_are_clear_and_leave_files_byte_identical(tmp_path):
    cases, targets = [], {}

    # unknown layout: the decision function renamed
    site = install_wheel("0.5.12.post1", tmp_path / "unknown")
    target = site / MODEL_RUNNER
    target.write_text(target.read_text(encoding="utf-8").replace("_should_run_flashinfer_autotune", "_decide_tuning"))
    cases.append(case(tmp_path, "unknown", site))
    targets["unknown"] = target

    # corrupted context: CRLF line ends make the dry-run fail
    site = install_wheel("0.5.8", tmp_path / "crlf")
    target = site / MODEL_RUNNER
    target.write_bytes(target.read_bytes().replace(b"\n", b"\r\n"))
    cases.append(case(tmp_path, "crlf", site))
    targets["crlf"] = target

    # applies but verifies wrong: an entry commented without its comma before another entry;
    # uncommented, Python joins the two strings, so the verify fails and the file is restored
    site = install_wheel("0.5.8", tmp_path / "verify")
    target = site / MODEL_RUNNER
    text = target.read_text(encoding="utf-8").replace('            # "flashinfer_cutlass",\n', "")
    text = text.replace(
        '            "flashinfer_mxfp4",\n', '            # "flashinfer_cutlass"\n            "flashinfer_mxfp4",\n'
    )
    target.write_text(text, encoding="utf-8")
    assert inspect_sglang(str(site))["commented_backends"] == ["flashinfer_cutlass"]
    cases.append(case(tmp_path, "verify", site))
    targets["verify"] = target

    # a wanted backend that is neither active nor commented
    site = install_wheel("0.5.8", tmp_path / "absent")
    cases.append(case(tmp_path, "absent", site, backends=["flashinfer_bogus"]))
    targets["absent"] = site / MODEL_RUNNER

    # an extra patch whose context does not match
    site = install_wheel("0.5.13", tmp_path / "extra")
    template = tmp_path / "bad.patch.j2"
    template.write_text(EXTRA_BAD)
    cases.append(case(tmp_path, "extra", site, extra=[{"name": "bad", "template": str(template)}]))
    targets["extra"] = site / "sglang/version.py"

    originals = {name: sha(path) for name, path in targets.items()}
    run = play(tmp_path, CASES_PLAY, {"cases": cases})
    assert run.rc == 0, run.output
    got = {name: outcome(tmp_path, name) for name in targets}
    assert not any(o["ok"] for o in got.values()), got
    for name, path in targets.items():
        assert sha(path) == originals[name], (name, got[name])
    assert leftovers(tmp_path, tmp_path) == []

    named = {
        "unknown": (
            "unknown SGLang autotune layout",
            "SGLang 0.5.12.post1",
            "sglang/srt/model_executor/runner/base_runner.py",
        ),
        "crlf": (
            "patch flashinfer-autotune does not apply to SGLang 0.5.8",
            "Nothing was changed",
            "sha256 is unchanged",
        ),
        "verify": (
            "flashinfer_cutlassflashinfer_mxfp4",
            "Restored the files it touched from backups",
            "sha256 is unchanged",
        ),
        "absent": ("cannot enable the FlashInfer autotune for flashinfer_bogus", "SGLang 0.5.8", "flashinfer_cutlass"),
        "extra": ("patch bad does not apply to SGLang 0.5.13",),
    }
    for name, parts in named.items():
        for part in parts:
            assert part in got[name]["msg"], (name, part)


# ---- the whole role, installing from a local wheelhouse -----------------------------------


def role_vars(tmp_path: Path, version: str, **more) -> dict:
    wheel_path(version)  # make sure the wheelhouse has it, and the uv wheel the role installs
    uv_wheel_path(UV_VERSION)
    (tmp_path / "uv-cache").mkdir(exist_ok=True)
    return {
        "sglang_root": str(tmp_path / "opt-sglang"),
        "sglang_source": "wheelhouse",
        "sglang_wheelhouse": str(WHEEL_DIR),
        "sglang_version": version,
        "sglang_python": sys.executable,
        "sglang_pip_extra_args": ["--no-deps", "--no-compile"],
        "sglang_uv_cache_dir": str(tmp_path / "uv-cache"),
        "sglang_uv_compile_bytecode": False,
        "facts_out": str(tmp_path / "facts.json"),
        **more,
    }


def steady_run_reads_the_release_once(tmp_path: Path, runs: tuple[Run, Run], facts: dict, manifest: dict) -> None:
    """On the installed release the site-packages come from the probe (sysconfig's venv scheme of the
    node's Python) and install.yml's one read; the venv's own Python is asked only on the first run, and
    patch.yml takes the journal and the kept patch from that read. Both ways give the same directory.
    Then a journal left in that read's place is found and undone (role_undoes_a_killed_patch_run)."""
    first, second = runs
    assert json.loads((Path(facts["release_dir"]) / "gpufleet-release.json").read_text()) == manifest
    platlib = subprocess.run(
        [facts["venv_python"], "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert facts["site_packages"] == platlib
    assert json.loads((tmp_path / "facts.json").read_text())["site_packages"] == platlib
    assert first.tasks["Find the venv's site-packages"] == ["runner_on_ok"]
    # the second run reaches none of the install's or the journal's steps: each include is one skipped task
    for task in (
        "Create the release's directories and venv, install SGLang",
        "Read and undo an interrupted patch run",
        "Write the release's files and switch current",
    ):
        assert second.tasks[task] == ["runner_on_skipped"], (task, second.tasks.get(task))
    for task in (
        "Find the venv's site-packages",
        "Create the venv",
        "Look for an interrupted patch run's journal and the autotune patch kept with the release",
        "Point current at the verified release",
    ):
        assert task not in second.tasks, (task, second.tasks[task])
    role_undoes_a_killed_patch_run(tmp_path, Path(facts["release_dir"]), facts, manifest)


def role_undoes_a_killed_patch_run(tmp_path: Path, release: Path, facts: dict, manifest: dict) -> None:
    """A patch run killed under the role's own run leaves its journal next to the release: the next run
    finds it in install.yml's one read and restores the files it lists before it decides anything."""
    autotune = Path(facts["autotune_file"])
    autotune = autotune if autotune.is_absolute() else Path(facts["site_packages"]) / autotune
    before = autotune.read_text(encoding="utf-8")
    journal = release.parent / f".{release.name}.patch-journal"
    journal_module(
        {
            "journal": str(journal),
            "root": facts["site_packages"],
            "state": "begin",
            "patch": str(release / "patches" / "flashinfer-autotune.patch"),
        },
        tmp_path,
    )
    autotune.write_text(before + "# half of a patch run that was killed\n", encoding="utf-8")
    recovered = play(tmp_path, ROLE_PLAY, role_vars(tmp_path, "0.5.12.post1"))
    assert recovered.rc == 0, recovered.output
    assert "did not finish; restored" in recovered.output, recovered.output
    assert autotune.read_text(encoding="utf-8") == before
    assert not journal.exists()
    assert json.loads((release / "gpufleet-release.json").read_text()) == manifest


def old_releases_and_what_find_would_not_list(releases: Path, elsewhere: Path) -> set[str]:
    """Two releases older than the installed ones (the prune removes the oldest first, never current or
    previous) and what find does not list (a hidden directory, a symlink, a file), which the prune leaves
    alone; returns the names of the latter."""
    for age, name in enumerate(["sglang-0.5.1-00000000aa", "sglang-0.5.2-00000000bb"]):
        (releases / name).mkdir()
        os.utime(releases / name, (1_000_000 + age, 1_000_000 + age))
    (releases / ".sglang-0.4.0-partial").mkdir()
    (releases / "linked").symlink_to(elsewhere)
    (releases / "notes.txt").write_text("kept\n")
    return {".sglang-0.4.0-partial", "linked", "notes.txt"}


def test_role_installs_patches_switches_and_keeps_previous(tmp_path):
    root = tmp_path / "opt-sglang"

    check = play(tmp_path, ROLE_PLAY, role_vars(tmp_path, "0.5.12.post1"), check=True)
    assert check.rc == 0, check.output
    assert "is not installed yet" in check.output
    assert not root.exists()

    first = play(tmp_path, ROLE_PLAY, role_vars(tmp_path, "0.5.12.post1"))
    assert first.rc == 0, first.output
    facts = json.loads((tmp_path / "facts.json").read_text())
    assert facts["version"] == "0.5.12.post1"
    assert facts["layout"] == "model_runner"
    assert facts["patch_state"] == "patched"
    assert "flashinfer_cutlass" in facts["autotuned_backends"]
    release = Path(facts["release_dir"])
    assert release.parent == root / "releases"
    assert release.name.startswith("sglang-0.5.12.post1-")
    assert os.readlink(root / "current") == str(release)
    assert Path(facts["venv_python"]).is_file()
    # the release's environment: published for the server's environment file, and written quoted in the release
    assert (facts["env"], (release / "gpufleet.env").read_text().splitlines()[-1]) == (
        {"FLASHINFER_CUDA_ARCH_LIST": "12.0a"},
        'FLASHINFER_CUDA_ARCH_LIST="12.0a"',
    )
    manifest = json.loads((release / "gpufleet-release.json").read_text())
    assert manifest["patch_state"] == "patched"
    assert manifest["patches"] == ["flashinfer-autotune"]
    on_disk = inspect_sglang(facts["site_packages"])
    assert "flashinfer_cutlass" in on_disk["autotuned_backends"]

    assert manifest["autotune_file_sha256"] == on_disk["autotune_file_sha256"]
    assert not list(root.glob("releases/.*.patch-journal"))

    # Without RECORD the patch state still comes from the verified file: the manifest keeps the patch.
    for record in Path(facts["site_packages"]).glob("sglang-*.dist-info/RECORD"):
        record.unlink()
    second = play(tmp_path, ROLE_PLAY, role_vars(tmp_path, "0.5.12.post1"))
    assert second.rc == 0, second.output
    assert second.changed == 0, second.output
    steady_run_reads_the_release_once(tmp_path, (first, second), facts, manifest)

    # Drift on the installed release (the role reads it in one node_state call and writes only on a
    # difference): each change is found and undone, and nothing is reinstalled.
    env_text = (release / "gpufleet.env").read_text()
    manifest_text = (release / "gpufleet-release.json").read_text()
    with (release / "gpufleet.env").open("a") as env:
        env.write("EDITED_BY_HAND=1\n")
    (release / "gpufleet-release.json").chmod(0o600)
    release.chmod(0o700)
    fixed = play(tmp_path, ROLE_PLAY, role_vars(tmp_path, "0.5.12.post1"))
    assert fixed.rc == 0, fixed.output
    # the directories' task, the environment file, the manifest (its mode): nothing installed again
    assert fixed.changed == 3, fixed.output
    assert (release / "gpufleet.env").read_text() == env_text
    assert (release / "gpufleet-release.json").read_text() == manifest_text
    assert stat.S_IMODE((release / "gpufleet-release.json").stat().st_mode) == 0o644
    assert stat.S_IMODE(release.stat().st_mode) == 0o755

    unlisted = old_releases_and_what_find_would_not_list(root / "releases", tmp_path)
    third = play(tmp_path, ROLE_PLAY, role_vars(tmp_path, "0.5.13"))
    assert third.rc == 0, third.output
    new = json.loads((tmp_path / "facts.json").read_text())
    assert new["patch_state"] == "enabled_upstream"
    assert (os.readlink(root / "current"), os.readlink(root / "previous"), new["previous_release_dir"]) == (
        new["release_dir"],
        str(release),
        str(release),
    )
    # sglang_keep_releases (3): the newest of the old ones stays beside current and previous
    assert {p.name for p in (root / "releases").iterdir()} == unlisted | {
        "sglang-0.5.2-00000000bb",
        release.name,
        Path(new["release_dir"]).name,
    }


# ---- bad input: the shared harness (extensions/molecule/common/bad_input.yml), on this machine ----------

BAD_INPUT_PLAY = f"""
- name: Bad input fails before any change, naming the bad value
  ansible.builtin.import_playbook: {REPO / "extensions" / "molecule" / "common" / "bad_input.yml"}
"""


def node_role_vars(tmp_path: Path, **more) -> dict:
    """role_vars for SGLang 0.5.23 under tmp_path/node, the directory the bad-input cases watch."""
    node = tmp_path / "node"
    node.mkdir(exist_ok=True)
    return role_vars(node, "0.5.23", **more)


BAD_INPUTS = [
    ("unknown-installer", {"sglang_installer": "conda"}, ["sglang_installer", "conda", "uv, pip"]),
    ("symlink-link-mode", {"sglang_uv_link_mode": "symlink"}, ["sglang_uv_link_mode", "symlink"]),
    (
        "relative-cache",
        {"sglang_uv_cache_dir": "var/cache/uv"},
        ["sglang_uv_cache_dir='var/cache/uv'", "absolute path"],
    ),
    ("dotdot-cache", {"sglang_uv_cache_dir": "/srv/../etc"}, ["sglang_uv_cache_dir='/srv/../etc'", "without '..'"]),
    ("unpinned-uv", {"sglang_uv_version": "latest"}, ["sglang_uv_version='latest'", "exact version"]),
    # the release's environment goes into the server's environment file: a newline would add a line of its own
    (
        "env-newline",
        {"sglang_env": {"HF_HOME": "/srv/hf\nLD_PRELOAD=/tmp/evil.so"}},
        ["sglang_env: environment variable HF_HOME contains the non-printable character U+000A"],
    ),
    ("env-bad-name", {"sglang_env": {"BAD-NAME": "1"}}, ["sglang_env: environment variable name 'BAD-NAME'"]),
]


class Refused:
    """Every bad-input case of this module in one run of the harness (it runs all cases at once, each on
    its own host): each test asserts that the run passed and that its own host rescued its failure."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.missing = tmp_path / "node" / "not-mounted"
        self.cases = [
            {
                "name": "interpreter older than sglang_python_min_version",
                "host": "old-python",
                "vars": node_role_vars(tmp_path, sglang_python_min_version="9.0"),
                "expect": [f"{sys.executable} on old-python is Python", "needs Python >= 9.0"],
            },
            {
                "name": "unknown sglang_source",
                "host": "unknown-source",
                "vars": node_role_vars(tmp_path, sglang_source="svn"),
                "expect": ["sglang_source", "svn"],
            },
            *(
                {
                    "name": f"bad input {more}",
                    "host": f"bad-{name}",
                    "vars": node_role_vars(tmp_path, **more),
                    "expect": expected,
                }
                for name, more, expected in BAD_INPUTS
            ),
            {
                "name": "sglang_uv_cache_dir does not exist",
                "host": "unmounted-cache",
                "vars": node_role_vars(tmp_path, sglang_uv_cache_dir=str(self.missing)),
                "expect": [
                    f"sglang_uv_cache_dir={self.missing} on unmounted-cache does not exist",
                    "proxmox_lxc_gpu_wheel_cache",
                ],
            },
        ]
        self.run = play(
            tmp_path,
            BAD_INPUT_PLAY,
            {
                "bad_input_target": "localhost",
                "bad_input_role": "gpufleet.sglang.sglang",
                "bad_input_gather_facts": False,
                "bad_input_watch": [str(tmp_path / "node")],
                "bad_input_cases": self.cases,
            },
        )

    def assert_refused(self, host: str) -> None:
        """rc 0: every case failed with its texts and the watched files are as they were (the harness fails
        otherwise); each case's host rescued its failure once, `host` among them."""
        assert host in [c["host"] for c in self.cases]
        assert self.run.rc == 0, self.run.output
        assert self.run.output.count("rescued=1 ") == len(self.cases), self.run.output
        assert re.search(rf"^{re.escape(host)}\s+:.* rescued=1 ", self.run.output, re.MULTILINE), self.run.output
        assert not (self.tmp_path / "node" / "opt-sglang").exists()


@pytest.fixture(scope="module")
def refused(tmp_path_factory) -> Refused:
    return Refused(tmp_path_factory.mktemp("bad-input"))


def test_role_refuses_too_old_python(refused):
    refused.assert_refused("old-python")


def test_role_rejects_bad_input(refused):
    refused.assert_refused("unknown-source")


@pytest.mark.parametrize("name", [case[0] for case in BAD_INPUTS])
def test_role_rejects_bad_settings(refused, name):
    refused.assert_refused(f"bad-{name}")


def test_role_refuses_a_missing_shared_cache_and_creates_nothing(refused):
    """A cache path that is not there (the bind mount is missing) would give a private, unshared
    cache on the container's disk: the role stops before it creates anything."""
    refused.assert_refused("unmounted-cache")
    assert not refused.missing.exists()


# ---- uv, the host-shared wheel cache and the pip fallback, through a real index -----------


@pytest.fixture(scope="module")
def served_index():
    """One index for the module: its URL is part of the release pins, so releases of different tests
    that share a cache (node_a) are the same release."""
    # max-age an hour, not PyPI's 600 s: under load the tests that read node-a's cache run minutes after it was
    # filled, and a cached project page must still be fresh when the index stops serving SGLang
    served = WheelIndex([wheel_path("0.5.23"), uv_wheel_path(UV_VERSION)], max_age=3600)
    yield served
    served.down()


@pytest.fixture
def index(served_index):
    """The module's index as a test finds it: serving every project, no request seen yet."""
    served_index.blocked.clear()
    served_index.requests.clear()
    yield served_index
    served_index.blocked.clear()


def node_vars(tmp_path: Path, node: str, index: WheelIndex, cache: Path, **more) -> dict:
    """Role variables for one container of a host: its own sglang_root, the host's shared cache."""
    settings = {
        "sglang_root": str(tmp_path / node),
        "sglang_wheelhouse": index.url,
        "sglang_uv_cache_dir": str(cache),
        "sglang_pip_extra_args": ["--no-deps"],
        "sglang_uv_compile_bytecode": True,
        "facts_out": str(tmp_path / f"facts-{node}.json"),
    }
    return role_vars(tmp_path, "0.5.23", **{**settings, **more})


class NodeA:
    """node-a of a host installed from an empty shared cache, with what each step left: the check-mode run
    before it, the install, the index's requests after each, the cache's entries after the check."""

    def __init__(self, tmp_path: Path, index: WheelIndex):
        self.tmp_path = tmp_path
        self.cache = tmp_path / "host-wheel-cache"
        self.cache.mkdir()
        index.blocked.clear()
        index.requests.clear()
        self.check = play(tmp_path, ROLE_PLAY, node_vars(tmp_path, "node-a", index, self.cache), check=True)
        self.node_exists_after_check = (tmp_path / "node-a").exists()
        self.cache_after_check = list(self.cache.iterdir())
        self.requests_after_check = list(index.requests)
        self.first = play(tmp_path, ROLE_PLAY, node_vars(tmp_path, "node-a", index, self.cache))
        self.requests_after_first = list(index.requests)
        facts = tmp_path / "facts-node-a.json"
        self.facts = json.loads(facts.read_text()) if facts.exists() else {}


@pytest.fixture(scope="module")
def node_a(tmp_path_factory, served_index) -> NodeA:
    """One uv install of node-a into an empty shared cache, for the tests that start from it: the
    second-node test reads it and installs more nodes from its cache; the damaged-cache test damages a copy."""
    return NodeA(tmp_path_factory.mktemp("node-a-host"), served_index)


def release_files(release: Path) -> dict[str, str]:
    """sha256 of every file of the sglang package in a release, by path below site-packages."""
    site = next(release.glob("venv/lib/python*/site-packages"))
    return {str(p.relative_to(site)): sha(p) for p in sorted(site.glob("sglang/**/*.py"))}


def test_uv_second_node_takes_the_wheels_from_the_shared_cache(node_a, index):
    # node-a's host (its check-mode run, its install and the shared cache) comes from the node_a fixture
    tmp_path, cache = node_a.tmp_path, node_a.cache

    check = node_a.check
    assert check.rc == 0, check.output
    assert "is not installed yet" in check.output
    assert not node_a.node_exists_after_check
    assert node_a.cache_after_check == []
    assert node_a.requests_after_check == []

    first = node_a.first
    assert first.rc == 0, first.output
    facts_a = node_a.facts
    assert facts_a["version"] == "0.5.23"
    assert facts_a["patch_state"] == "enabled_upstream"
    assert (tmp_path / f"node-a/tools/uv-{UV_VERSION}/bin/uv").is_file()
    assert len(index.wheel_downloads("sglang", node_a.requests_after_first)) == 1, node_a.requests_after_first
    assert len(index.wheel_downloads("uv", node_a.requests_after_first)) == 1, node_a.requests_after_first
    site_a = Path(facts_a["site_packages"])
    assert list(site_a.glob("sglang/__pycache__/version.cpython-*.pyc")), "uv --compile-bytecode wrote no .pyc"
    assert (site_a / "sglang/version.py").stat().st_nlink == 1  # copied, not linked to the cache

    again = play(tmp_path, ROLE_PLAY, node_vars(tmp_path, "node-a", index, cache))
    assert again.rc == 0, again.output
    assert again.changed == 0, again.output

    # The index stops serving SGLang (project page and wheel): node B can only get it from the cache.
    index.blocked.add("sglang")
    served_before = len(index.requests)
    # without uv's bytecode compile (node-a's install checked it; it is not among the pins, so the release is one)
    second = play(tmp_path, ROLE_PLAY, node_vars(tmp_path, "node-b", index, cache, sglang_uv_compile_bytecode=False))
    assert second.rc == 0, second.output
    assert [p for p in index.requests[served_before:] if "sglang" in p] == []
    facts_b = json.loads((tmp_path / "facts-node-b.json").read_text())
    assert facts_b["release_id"] == facts_a["release_id"]
    manifest_a = json.loads((Path(facts_a["release_dir"]) / "gpufleet-release.json").read_text())
    manifest_b = json.loads((Path(facts_b["release_dir"]) / "gpufleet-release.json").read_text())
    assert manifest_b["autotune_file"] == manifest_a["autotune_file"].replace("/node-a/", "/node-b/")
    assert {**manifest_b, "autotune_file": ""} == {**manifest_a, "autotune_file": ""}
    assert release_files(Path(facts_b["release_dir"])) == release_files(Path(facts_a["release_dir"]))

    # The control: a node with an empty cache cannot install while the index withholds SGLang,
    # so node B's install came from the shared cache. It fails without a release or a current link.
    empty = tmp_path / "empty-cache"
    empty.mkdir()
    control = play(tmp_path, ROLE_PLAY, node_vars(tmp_path, "node-c", index, empty))
    assert control.rc != 0, control.output
    assert "sglang" in control.output
    assert not (tmp_path / "node-c/current").exists()
    assert not list((tmp_path / "node-c").glob("releases/*/gpufleet-release.json"))


def test_two_nodes_install_at_once_into_one_shared_cache(tmp_path, index):
    """Two containers of a host installing the same release at the same time, one empty cache:
    uv's locks keep the cache consistent; both releases are complete and verified."""
    cache = tmp_path / "host-wheel-cache"
    cache.mkdir()
    runs = []
    for node in ("node-a", "node-b"):
        pdd = tmp_path / f"runner-{node}"
        (pdd / "project").mkdir(parents=True)
        (pdd / "project" / "play.yml").write_text(ROLE_PLAY)
        runner = ansible_runner.run_async(
            private_data_dir=str(pdd),
            playbook="play.yml",
            inventory=f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}",
            extravars=node_vars(tmp_path, node, index, cache, sglang_uv_compile_bytecode=False),
            envvars=ansible_settings(),
            quiet=True,
        )[1]
        runs.append(runner)
    deadline = time.monotonic() + 600
    while any(r.status in ("unstarted", "starting", "running") for r in runs):
        assert time.monotonic() < deadline, "two concurrent installs did not finish in 600 s"
        time.sleep(1)
    for node, runner in zip(("node-a", "node-b"), runs, strict=True):
        assert runner.rc == 0, runner.stdout.read()
        facts = json.loads((tmp_path / f"facts-{node}.json").read_text())
        assert facts["version"] == "0.5.23"
        assert facts["patch_state"] == "enabled_upstream"
    a = json.loads((tmp_path / "facts-node-a.json").read_text())["release_dir"]
    b = json.loads((tmp_path / "facts-node-b.json").read_text())["release_dir"]
    assert release_files(Path(b)) == release_files(Path(a))


def test_damaged_cache_cannot_become_current(tmp_path, node_a, index):
    """A cache entry that lost a file (a partial or damaged cache) gives a release that fails
    verification: no manifest, current not switched."""
    # a copy of the cache node-a filled (node_a fixture): the other tests keep theirs whole
    first = node_a.first
    assert first.rc == 0, first.output
    cache = tmp_path / "host-wheel-cache"
    shutil.copytree(node_a.cache, cache, symlinks=True)
    autotune = node_a.facts["autotune_file"]
    relpath = autotune.split("site-packages/", 1)[1]
    damaged = list(cache.glob(f"archive-v0/*/{relpath}"))
    assert len(damaged) == 1, damaged
    damaged[0].unlink()

    index.blocked.add("sglang")
    second = play(tmp_path, ROLE_PLAY, node_vars(tmp_path, "node-b", index, cache, sglang_uv_compile_bytecode=False))
    assert second.rc != 0, second.output
    assert relpath in second.output, second.output
    assert not (tmp_path / "node-b/current").exists()
    assert not list((tmp_path / "node-b").glob("releases/*/gpufleet-release.json"))


def test_pip_fallback_installs_the_same_release_and_uv_keeps_it(tmp_path, index):
    cache = tmp_path / "host-wheel-cache"
    cache.mkdir()
    # pip without its bytecode compile (4,719 modules; the uv test checks uv's .pyc): pins and release stay one
    # for both installers, the arguments being the same
    pip_args = {"sglang_pip_extra_args": ["--no-deps", "--no-compile"]}
    first = play(tmp_path, ROLE_PLAY, node_vars(tmp_path, "node-p", index, cache, sglang_installer="pip", **pip_args))
    assert first.rc == 0, first.output
    facts = json.loads((tmp_path / "facts-node-p.json").read_text())
    assert facts["version"] == "0.5.23"
    assert facts["patch_state"] == "enabled_upstream"
    assert os.readlink(tmp_path / "node-p/current") == facts["release_dir"]
    assert not (tmp_path / "node-p/tools").exists()  # pip needs no uv
    assert index.wheel_downloads("uv") == []
    assert list(cache.iterdir()) == []  # pip does not touch uv's cache

    # Switching the installer does not reinstall: same pins, same release; uv is not even fetched.
    switched = play(tmp_path, ROLE_PLAY, node_vars(tmp_path, "node-p", index, cache, sglang_installer="uv", **pip_args))
    assert switched.rc == 0, switched.output
    assert switched.changed == 0, switched.output
    assert json.loads((tmp_path / "facts-node-p.json").read_text())["release_id"] == facts["release_id"]
    assert not (tmp_path / "node-p/tools").exists()


# ---- crash safety: an interrupted run is undone by the next one; a failure leaves nothing ----

CREATE_FILE = """--- /dev/null
+++ b/sglang/gpufleet_marker/created.py
@@ -0,0 +1 @@
+# created by a gpufleet extra patch
"""

JOURNAL_MODULE = REPO / "plugins" / "modules" / "sglang_patch_journal.py"


def journal_module(args: dict, workdir: Path) -> dict:
    """Run sglang_patch_journal as Ansible runs it (the state a killed run leaves is made for real)."""
    args_file = workdir / "journal-args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "collections"), *sys.path]))
    proc = subprocess.run(
        [sys.executable, str(JOURNAL_MODULE), str(args_file)], check=True, capture_output=True, text=True, env=env
    )
    return json.loads(proc.stdout)


def leftovers(tmp_path: Path, site: Path) -> list[str]:
    """Journal directories and temporary files anywhere under the test's directories."""
    found = [str(p) for p in tmp_path.glob("*.journal")]
    found += [str(p) for p in site.rglob("*") if p.name.startswith(".gpufleet") or p.name.endswith((".orig", ".rej"))]
    return found


def test_interrupted_run_is_undone_and_patched_again_without_record(tmp_path):
    site = install_wheel("0.5.12.post1", tmp_path / "interrupted")
    for record in site.glob("sglang-*.dist-info/RECORD"):
        record.unlink()  # as in a source checkout: RECORD cannot tell patched from upstream
    target = site / MODEL_RUNNER
    original = target.read_text(encoding="utf-8")
    original_sha = sha(target)
    patched_text = original.replace('            # "flashinfer_cutlass",\n', '            "flashinfer_cutlass",\n', 1)
    diff = "".join(
        difflib.unified_diff(
            original.splitlines(keepends=True),
            patched_text.splitlines(keepends=True),
            f"a/{MODEL_RUNNER}",
            f"b/{MODEL_RUNNER}",
        )
    )
    the_case = case(tmp_path, "interrupted", site)
    record_dir = Path(the_case["record"])
    record_dir.mkdir()
    (record_dir / "flashinfer-autotune.patch").write_text(diff)
    # what a run killed between apply and verify leaves: the journal written, the patch applied
    result = journal_module(
        {
            "journal": f"{record_dir}.journal",
            "root": str(site),
            "state": "begin",
            "patch": str(record_dir / "flashinfer-autotune.patch"),
        },
        tmp_path,
    )
    assert result["files"] == [MODEL_RUNNER]
    subprocess.run(
        ["patch", "--batch", "-p1", "-d", str(site), "-i", str(record_dir / "flashinfer-autotune.patch")],
        check=True,
        capture_output=True,
    )
    assert "flashinfer_cutlass" in inspect_sglang(str(site))["autotuned_backends"]

    first = play(tmp_path, CASES_PLAY, {"cases": [the_case]})
    assert first.rc == 0, first.output
    assert "did not finish; restored" in first.output, first.output
    assert f"{MODEL_RUNNER}" in first.output.split("did not finish; restored", 1)[1][:200]
    assert outcome(tmp_path, "interrupted") == {"ok": True, "state": "patched"}, first.output
    assert sha(target) != original_sha
    assert target.read_text(encoding="utf-8") == patched_text
    assert leftovers(tmp_path, site) == []

    second = play(tmp_path, CASES_PLAY, {"cases": [the_case]})
    assert second.rc == 0, second.output
    assert second.changed == 0, second.output
    # verified from the file (the kept patch reverses cleanly), not from the missing RECORD
    assert outcome(tmp_path, "interrupted") == {"ok": True, "state": "patched"}, second.output
    assert "flashinfer_cutlass autotune already patched in SGLang 0.5.12.post1" in second.output
    assert leftovers(tmp_path, site) == []


def test_failed_run_restores_every_file_and_removes_created_ones(tmp_path):
    site = install_wheel("0.5.8", tmp_path / "created")
    create = tmp_path / "create.patch.j2"
    create.write_text(CREATE_FILE)
    bad = tmp_path / "bad.patch.j2"
    bad.write_text(EXTRA_BAD)
    files = [site / MODEL_RUNNER, site / "sglang/version.py"]
    originals = [sha(f) for f in files]
    extra = [{"name": "create", "template": str(create)}, {"name": "bad", "template": str(bad)}]
    run = play(tmp_path, CASES_PLAY, {"cases": [case(tmp_path, "created", site, extra=extra)]})
    assert run.rc == 0, run.output
    got = outcome(tmp_path, "created")
    assert got["ok"] is False
    assert "patch bad does not apply to SGLang 0.5.8" in got["msg"]
    assert "Restored the files it touched from backups" in got["msg"]
    assert "sha256 is unchanged" in got["msg"]
    # the autotune patch and the created file were applied before `bad` failed: both undone
    assert [sha(f) for f in files] == originals
    assert not (site / "sglang/gpufleet_marker").exists()  # no 0-byte file, no empty directory
    assert leftovers(tmp_path, site) == []
