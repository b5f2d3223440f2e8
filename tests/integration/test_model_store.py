# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Role model_store, driven by ansible-runner against localhost, with the real huggingface_hub.

The Hub is tests/standins/hf_hub.py on a random loopback port (it logs every request, so a test
can prove that a second run asks the Hub nothing). The role builds its venv with the pinned
huggingface_hub from PyPI once per machine (the venv path is kept in GPUFLEET_CACHE).

Tests that start from a store already holding the snapshot (to damage it, copy it, run on it) get a
copy of one store that the ``downloaded`` fixture fetched once for the module from its own Hub
stand-in (``stored``): a run of the role costs seconds of CPU, and the download is the same each time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import ansible_runner
import pytest
from lib.cache import CACHE
from lib.playbook import CASES_PLAY, ansible_settings, runner_data_dir

if TYPE_CHECKING:  # the hub fixture is in conftest.py
    from integration.conftest import HubStandIn

VENV = CACHE / "model-store-hf-venv"

PLAY = """
- name: Model store
  hosts: localhost
  gather_facts: false
  roles:
    - role: gpufleet.sglang.model_store
"""


class Run:
    def __init__(self, runner: ansible_runner.Runner) -> None:
        self.rc = runner.rc
        self.output = runner.stdout.read()
        self.facts: dict = {}
        self.failed_msgs: list[str] = []
        self.changed_tasks: list[str] = []
        self.skipped_tasks: list[str] = []
        self.progress: list[str] = []
        for ev in runner.events:
            data = ev.get("event_data", {})
            res = data.get("res", {})
            if ev.get("event") == "runner_on_skipped":
                self.skipped_tasks.append(data.get("task", ""))
            if ev.get("event") == "runner_on_ok":
                facts = res.get("ansible_facts", {})
                if "model_store_facts" in facts:
                    self.facts = facts["model_store_facts"]
                if res.get("changed"):
                    self.changed_tasks.append(data.get("task", ""))
                if data.get("task_action") == "ansible.builtin.debug" and "MiB/s" in str(res.get("msg")):
                    self.progress.append(res["msg"])
            if ev.get("event") == "runner_on_failed":
                self.failed_msgs.append(str(res.get("msg", "")))


def run_role(tmp_path: Path, models: list[dict], check: bool = False, **more) -> Run:
    pdd = runner_data_dir(tmp_path, PLAY)
    extravars = {
        "model_store_models": models,
        "model_store_dir": str(tmp_path / "store"),
        "model_store_venv": str(VENV),
        "model_store_poll_s": 1,
        "model_store_reserve_bytes": 0,
        **more,
    }
    runner = ansible_runner.run(
        private_data_dir=str(pdd),
        playbook="play.yml",
        extravars=extravars,
        envvars=ansible_settings(),
        cmdline="--check" if check else None,
        quiet=True,
        timeout=600,
    )
    return Run(runner)


def model(hub: HubStandIn, **more) -> dict:
    return {"name": "tiny", "repo": "gpufleet-test/tiny-moe", "revision": "main", "endpoint": hub.url, **more}


def downloads(h: HubStandIn) -> list[dict]:
    return [r for r in h.requests() if "/resolve/" in r["path"] and r["method"] == "GET"]


def snapshot_files(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file() and p.name != ".gpufleet-model.json"
    }


class Downloaded:
    """A store holding the snapshot, fetched once per module from ``hub`` (a first run, checked)."""

    def __init__(self, hub: HubStandIn, store: Path, facts: dict) -> None:
        self.hub, self.store, self.facts = hub, store, facts

    def copy_to(self, tmp_path: Path) -> Path:
        """A copy of the store at ``tmp_path / "store"`` (where :func:`run_role` keeps it; its links,
        all relative, kept as links); returns the snapshot directory in the copy."""
        shutil.copytree(self.store, tmp_path / "store", symlinks=True)
        return tmp_path / "store" / Path(self.facts["path"]).relative_to(self.store)


@pytest.fixture(scope="module")
def downloaded(module_hub, tmp_path_factory) -> Downloaded:
    h = module_hub("--size-mb", "1")
    where = tmp_path_factory.mktemp("downloaded")
    first = run_role(where, [model(h)])
    assert first.rc == 0, first.output
    assert first.facts["tiny"]["verified"] is True
    return Downloaded(h, where / "store", first.facts["tiny"])


@pytest.fixture
def stored(downloaded, tmp_path) -> tuple[HubStandIn, Path]:
    """The module's Hub stand-in and the snapshot directory of a copy of its store in ``tmp_path``."""
    return downloaded.hub, downloaded.copy_to(tmp_path)


def test_first_download_then_nothing(tmp_path, hub):
    # 8 s at 1 MiB/s: the job runs well past the first wait (model_store_poll_s, 1 s), so a progress line shows
    h = hub("--size-mb", "8", "--rate-mbps", "1")
    first = run_role(tmp_path, [model(h)])
    assert first.rc == 0, first.output
    facts = first.facts["tiny"]
    commit = facts["commit"]
    assert len(commit) == 40
    snap = tmp_path / "store" / "gpufleet-test" / "tiny-moe" / commit
    assert facts["path"] == str(snap)
    assert facts["file_count"] == 5
    assert facts["verified"] is True
    assert facts["total_bytes"] == sum(p.stat().st_size for p in snap.iterdir() if not p.name.startswith("."))
    assert os.readlink(tmp_path / "store" / "current" / "tiny") == f"../gpufleet-test/tiny-moe/{commit}"
    assert not (snap / ".cache").exists()
    assert not list(snap.parent.glob("*.partial"))
    assert first.progress, "no progress line while downloading:\n" + first.output
    assert len(downloads(h)) == 5

    before = len(h.requests())
    second = run_role(tmp_path, [model(h)])
    assert second.rc == 0, second.output
    assert second.changed_tasks == []
    assert len(h.requests()) == before, "the second run asked the Hub again"
    assert second.facts["tiny"]["commit"] == commit
    # the probe found the venv, its tooling and the store as the role makes them: none of their tasks ran, and
    # their include was one skipped task
    assert "Install what the look found missing (venv tooling, huggingface_hub, the store)" in second.skipped_tasks
    assert "Create the store" not in second.skipped_tasks
    # the look (one synchronous module call) found the snapshot whole: no followed download started
    assert "Start fetching tiny" in second.skipped_tasks
    assert "Look in the store for tiny" not in second.skipped_tasks

    # a store whose mode changed is found by the same probe and fixed, nothing fetched again
    (tmp_path / "store").chmod(0o700)
    third = run_role(tmp_path, [model(h)])
    assert third.rc == 0, third.output
    assert third.changed_tasks == ["Create the store"]
    assert (tmp_path / "store").stat().st_mode & 0o7777 == 0o755
    assert len(downloads(h)) == 5


def test_corrupted_download_is_fetched_again(tmp_path, hub):
    h = hub("--size-mb", "4", "--corrupt-once", "model.safetensors")
    run = run_role(tmp_path, [model(h)])
    assert run.rc == 0, run.output
    assert run.facts["tiny"]["refetched"] == ["model.safetensors"]
    assert len([r for r in downloads(h) if r["path"].endswith("model.safetensors")]) == 2


def test_full_verify_finds_a_file_damaged_on_disk(tmp_path, stored):
    h, snap = stored  # a store where the snapshot was downloaded and verified
    good = snap.joinpath("config.json").read_bytes()
    snap.joinpath("config.json").write_bytes(good.replace(b"64", b"65"))
    quick = run_role(tmp_path, [model(h)])
    assert quick.rc == 0
    assert quick.changed_tasks == []  # same size: quick mode trusts the recorded verification
    full = run_role(tmp_path, [model(h)], model_store_verify="full")
    assert full.rc == 0, full.output
    assert full.facts["tiny"]["refetched"] == ["config.json"]
    assert snap.joinpath("config.json").read_bytes() == good


def test_a_file_cut_short_on_disk_is_fetched_again_by_the_followed_download(tmp_path, stored):
    h, snap = stored
    good = snap.joinpath("config.json").read_bytes()
    snap.joinpath("config.json").write_bytes(good[:-3])
    before = len(downloads(h))
    run = run_role(tmp_path, [model(h)])
    assert run.rc == 0, run.output
    # the look found the size wrong and left it pending, writing nothing; the followed download repaired it
    assert "Start fetching tiny" not in run.skipped_tasks
    assert run.facts["tiny"]["refetched"] == ["config.json"]
    assert snap.joinpath("config.json").read_bytes() == good
    assert len(downloads(h)) == before + 1


LOOK_PLAY = """
- name: A look at the store (model_store_fetch with download false)
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Look
      gpufleet.sglang.model_store_fetch:
        store: "{{ store }}"
        name: tiny
        repo: gpufleet-test/tiny-moe
        revision: "{{ revision }}"
        endpoint: "{{ endpoint }}"
        download: false
      vars:
        ansible_python_interpreter: "{{ venv }}/bin/python"
      register: look
    - name: Keep it
      ansible.builtin.copy:
        content: "{{ look | to_json }}"
        dest: "{{ store }}.look.json"
        mode: "0644"
"""


@pytest.mark.parametrize("revision", ["main", "commit"])
def test_a_look_that_needs_a_download_writes_nothing_and_fetches_nothing(tmp_path, hub, revision):
    h = hub("--size-mb", "1")
    store = tmp_path / "store"
    store.mkdir()
    rev = tree_commit(h) if revision == "commit" else "main"
    runner = ansible_runner.run(
        private_data_dir=str(runner_data_dir(tmp_path, LOOK_PLAY)),
        playbook="play.yml",
        extravars={"store": str(store), "revision": rev, "endpoint": h.url, "venv": str(VENV)},
        envvars=ansible_settings(),
        quiet=True,
        timeout=300,
    )
    assert runner.rc == 0, runner.stdout.read()
    look = json.loads((tmp_path / "store.look.json").read_text())
    assert look["pending"] is True
    assert look["changed"] is False
    assert len(look["commit"]) == 40
    assert list(store.iterdir()) == [], "a look that needs a download wrote into the store"
    assert downloads(h) == []


def test_a_trickling_hub_cannot_hold_the_look_past_its_deadline(tmp_path, hub):
    """A mirror that answers the look's one Hub call (the branch's commit) with its headers and then a byte a
    second: each read gets a byte before any per-read timeout, and the answer (several hundred bytes) would take
    minutes. The look keeps the followed download's deadline (model_store_download_timeout_s): the run fails
    there, naming the look, with nothing written to the store, and the module's process is gone (the mirror
    sees its client leave), not left talking to the Hub behind the failed run."""
    h = hub("--size-mb", "1", "--trickle-api", "1")
    began = time.monotonic()
    run = run_role(tmp_path, [model(h)], model_store_download_timeout_s=8)
    took = time.monotonic() - began
    assert run.rc != 0, run.output
    # the deadline, not the mirror, ended it: the answer alone needs minutes at a byte a second
    assert took < 8 + 90, f"{took:.0f} s"
    looked = run.output.split("TASK [gpufleet.sglang.model_store : Look in the store for tiny]")
    assert len(looked) == 2, run.output
    # the module stopped itself at its deadline and says so, naming the model and the deadline
    said = [m for m in run.failed_msgs if m.startswith("model tiny: the look did not finish within its deadline")]
    assert said, run.failed_msgs
    assert "(8 s, deadline_s)" in said[0], said
    assert "nothing was written" in said[0], said
    assert h.url not in run.output
    assert not (tmp_path / "store").exists() or [p.name for p in (tmp_path / "store").iterdir()] == []
    assert downloads(h) == []
    # the mirror logs a request when it ends: the API call ended with its client gone (-1) soon after the run
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not [r for r in h.requests() if r["path"].startswith("/api/")]:
        time.sleep(0.5)
    api = [r for r in h.requests() if r["path"].startswith("/api/")]
    assert api, h.requests()
    assert all(r["status"] == -1 for r in api), api


def test_interrupted_download_resumes(tmp_path, hub):
    # huggingface_hub writes 10 MiB chunks: a cut after 15 MB leaves one chunk on disk to resume from
    h = hub("--size-mb", "24", "--cut-once", "model.safetensors:15000000")
    run = run_role(tmp_path, [model(h)])
    if run.rc != 0:  # the cut ended this run: the next one resumes from the partial file
        assert "partial download kept" in run.output
        run = run_role(tmp_path, [model(h)])
    assert run.rc == 0, run.output
    ranged = [r for r in downloads(h) if r["path"].endswith("model.safetensors") and r["range"]]
    assert ranged, f"no ranged (resumed) request: {downloads(h)}"
    assert ranged[0]["range"] == "bytes=10485760-"
    assert run.facts["tiny"]["verified"] is True


def test_gated_repo_token_and_wrong_revision(tmp_path, hub):
    h = hub("--size-mb", "1")
    gated = model(h, name="gated", repo="gpufleet-test/gated-moe")
    no_token = run_role(tmp_path, [gated])
    assert no_token.rc != 0
    assert "the Hub refused gpufleet-test/gated-moe (gated or private, 401)" in " ".join(no_token.failed_msgs)
    wrong = run_role(tmp_path, [gated], model_store_hf_token="hf_wrong_token_000")
    assert wrong.rc != 0
    assert "hf_wrong_token_000" not in wrong.output
    ok = run_role(tmp_path, [gated], model_store_hf_token=h.token)
    assert ok.rc == 0, ok.output
    assert h.token not in ok.output
    assert all(r["auth"] == "present" for r in h.requests()[-7:])
    bad_rev = run_role(tmp_path, [model(h, revision="no-such-branch")])
    assert bad_rev.rc != 0
    assert "revision 'no-such-branch' not found in gpufleet-test/tiny-moe" in " ".join(bad_rev.failed_msgs)


def test_local_source_and_check_mode(tmp_path, downloaded):
    (tmp_path / "a").mkdir()
    src = downloaded.copy_to(tmp_path / "a")  # another host's store, downloaded from the Hub
    commit = downloaded.facts["commit"]
    local = {
        "name": "tiny",
        "repo": "gpufleet-test/tiny-moe",
        "revision": commit,
        "source": "local",
        "local_path": str(src),
    }
    planned = run_role(tmp_path, [local], check=True)
    assert planned.rc == 0, planned.output
    assert not (tmp_path / "store" / "gpufleet-test").exists()
    copied = run_role(tmp_path, [local])
    assert copied.rc == 0, copied.output
    assert snapshot_files(Path(copied.facts["tiny"]["path"])) == snapshot_files(src)


# -- a hostile Hub or mirror, a hostile local source, records of the wrong shape ----------------


def tree_commit(h: HubStandIn) -> str:
    """The commit the Hub stand-in's main points at."""
    with urllib.request.urlopen(f"{h.url}/api/models/gpufleet-test/tiny-moe/revision/main", timeout=10) as resp:
        return json.loads(resp.read())["sha"]


def tree(h: HubStandIn) -> list[dict]:
    with urllib.request.urlopen(f"{h.url}/api/models/gpufleet-test/tiny-moe/tree/main", timeout=10) as resp:
        return json.loads(resp.read())


# Every refusal below is one case of one playbook run (CASES_PLAY: the role, or the module alone, once per
# case, each in a block whose rescue records the message), started by the module fixture ``refusals``:
# a run of ansible-playbook costs about a second of CPU before its first task, and these cases need
# nothing of each other but the run. Each case has its own directory (its store in <dir>/store), its own
# Hub stand-in (its request log proves that nothing was downloaded), and its outcome in
# <dir>/outcome-<case>.json.
CASE_TASKS = """
- name: Case {{ case.name }}
  block:
    - name: Note when the case began
      ansible.builtin.set_fact:
        case_began: "{{ now(utc=true).timestamp() }}"
    - name: The role
      ansible.builtin.include_role:
        name: gpufleet.sglang.model_store
      vars:
        model_store_models: "{{ case.models }}"
        model_store_dir: "{{ case.dir }}/store"
        model_store_reserve_bytes: "{{ case.reserve_bytes | default(0) }}"
      when: case.kind == 'role'
    - name: The module alone
      gpufleet.sglang.model_store_fetch:
        store: "{{ case.dir }}/store"
        name: tiny
        repo: gpufleet-test/tiny-moe
        endpoint: "{{ case.endpoint }}"
      vars:
        ansible_python_interpreter: "{{ model_store_venv }}/bin/python"
      when: case.kind == 'module'
    - name: Record the outcome
      ansible.builtin.copy:
        content: "{{ {'ok': true} | to_json }}"
        dest: "{{ case.dir }}/outcome-{{ case.name }}.json"
        mode: "0644"
  rescue:
    - name: Record the failure
      ansible.builtin.copy:
        content: >-
          {{ {'ok': false, 'msg': ansible_failed_result.msg,
              'seconds': now(utc=true).timestamp() - case_began | float} | to_json }}
        dest: "{{ case.dir }}/outcome-{{ case.name }}.json"
        mode: "0644"
"""


@dataclass
class Case:
    """One case of the batch: its directory (the store is ``dir / "store"``), its Hub stand-in (None for a
    local source), what the play recorded (for an endpoint case also ``direct``: the module alone), and the
    output of the whole run it was part of (``direct_output``: the module's run at -vvv)."""

    dir: Path
    hub: HubStandIn | None
    outcome: dict = field(default_factory=dict)
    output: str = ""
    direct_output: str = ""

    @property
    def msg(self) -> str:
        return str(self.outcome.get("msg", ""))


def run_batch(where: Path, cases: dict[str, dict], verbosity: int = 0) -> str:
    """Run CASES_PLAY over ``cases`` (name -> the case's fields) in one ansible-playbook; returns its output."""
    pdd = runner_data_dir(where, CASES_PLAY)
    (pdd / "project" / "case.yml").write_text(CASE_TASKS)
    runner = ansible_runner.run(
        private_data_dir=str(pdd),
        playbook="play.yml",
        extravars={
            "cases": [{"name": name, **fields} for name, fields in cases.items()],
            "model_store_venv": str(VENV),
            "model_store_poll_s": 1,
        },
        envvars=ansible_settings(),
        verbosity=verbosity,
        quiet=True,
        timeout=600,
    )
    output = runner.stdout.read()
    assert runner.rc == 0, output  # every case ends in its block or its rescue
    return output


LISTINGS = {
    "listing-dotdot": ("../../escape.txt", "'..' segment"),
    "listing-absolute": ("/tmp/escape.txt", "is absolute"),
    "listing-empty-segment": ("a//b.txt", "empty segment"),
}

CREDENTIAL = "hf_Cred1t$ecret"
ENDPOINTS = {
    "credentials-userinfo": "http://user:{c}@127.0.0.1:{port}",
    "credentials-userinfo-quoted": "http://user:{q}@127.0.0.1:{port}",
    "credentials-query": "http://127.0.0.1:{port}/?token={q}",
}
CREDENTIAL_FORMS = [CREDENTIAL, quote(CREDENTIAL, safe=""), quote(CREDENTIAL)]

RECORDS = {
    "record-list": (lambda p: p.write_text("[]"), "is a list, not an object with repo, commit and files"),
    "record-no-commit": (lambda p: p.write_text('{"repo": "gpufleet-test/tiny-moe"}'), "has no 'commit'"),
    "record-not-utf8": (lambda p: p.write_bytes(b"\xff\xfe"), "is not UTF-8"),
    "record-fifo": (lambda p: (p.unlink(), os.mkfifo(p)), "is a FIFO, not a regular file"),
}


@pytest.fixture(scope="module")
def refusals(module_hub, downloaded, tmp_path_factory) -> dict[str, Case]:
    """Every refusal case, run in two playbook runs: the role's cases, then the module alone for each
    endpoint with credentials, at -vvv (its invocation shown)."""
    where = tmp_path_factory.mktemp("refusals")
    cases: dict[str, Case] = {}
    fields: dict[str, dict] = {}

    def add(name: str, hub: HubStandIn | None, models: list[dict], **more) -> Path:
        cases[name] = Case(where / name, hub)
        cases[name].dir.mkdir()
        fields[name] = {"kind": "role", "dir": str(cases[name].dir), "models": models, **more}
        return cases[name].dir

    h = module_hub("--size-mb", "4")
    add("space", h, [model(h)], reserve_bytes=2**60)
    h = module_hub("--size-mb", "1")
    bad = [
        model(h),
        model(h),
        {"name": "x", "repo": "no-slash", "revision": "main"},
        model(h, name="l", source="local"),
    ]
    add("declarations", h, bad)
    h = module_hub("--size-mb", "1", "--endless", "model.safetensors")
    add("growing", h, [model(h)])
    for name, (planted, _why) in LISTINGS.items():
        h = module_hub("--size-mb", "1", "--tree-extra", planted)
        add(name, h, [model(h)])
    h = module_hub("--size-mb", "1", "--commit-sha", "../../../outside")
    add("commit", h, [model(h)])

    d = add("symlink", None, [])
    src = d / "nfs" / "snapshot"
    src.mkdir(parents=True)
    (src / "config.json").write_text("{}\n")
    (d / "host-secret").write_text("root:hash:19000\n")
    (src / "tokenizer.json").symlink_to(d / "host-secret")
    fields["symlink"]["models"] = [
        {
            "name": "tiny",
            "repo": "gpufleet-test/tiny-moe",
            "revision": "0" * 40,
            "source": "local",
            "local_path": str(src),
        }
    ]

    for name, endpoint in ENDPOINTS.items():
        h = module_hub("--size-mb", "1")
        url = endpoint.format(c=CREDENTIAL, q=quote(CREDENTIAL, safe=""), port=h.port)
        add(name, h, [model(h, endpoint=url)], endpoint=url)

    for name, (damage, _why) in RECORDS.items():
        d = add(name, downloaded.hub, [model(downloaded.hub)])
        snap = downloaded.copy_to(d)
        damage(snap / ".gpufleet-model.json")

    output = run_batch(where, fields)
    direct_output = run_batch(
        where, {f"{name}-module": {**fields[name], "kind": "module"} for name in ENDPOINTS}, verbosity=3
    )
    for name, case in cases.items():
        case.output = output
        case.outcome = json.loads((case.dir / f"outcome-{name}.json").read_text())
        if name in ENDPOINTS:
            case.outcome["direct"] = json.loads((case.dir / f"outcome-{name}-module.json").read_text())
            case.direct_output = direct_output
    return cases


def refused(case: Case, *parts: str) -> str:
    """The message the role refused ``case`` with; the test fails if it did not refuse, or if the message
    does not name each of ``parts``."""
    assert case.outcome["ok"] is False, case.output
    assert "Traceback" not in case.output
    missing = [part for part in parts if part not in case.msg]
    assert not missing, (missing, case.msg)
    return case.msg


def store_files(d: Path) -> list[Path]:
    return [p for p in (d / "store").rglob("*") if p.is_file() or p.is_symlink()]


def test_not_enough_space_is_refused_before_any_byte(refusals):
    case = refusals["space"]
    refused(case, "not enough space", "the download needs 4.0 MiB", "nothing was downloaded")
    assert downloads(case.hub) == []
    assert not list((case.dir / "store").glob("gpufleet-test/tiny-moe/*"))


def test_bad_declarations_are_named_before_any_change(refusals):
    case = refusals["declarations"]
    refused(
        case,
        "model tiny: declared twice",
        "model x: repo 'no-slash' is not '<org>/<name>'",
        "model l: a local source needs revision set to the 40-hex commit",
    )
    assert case.hub.requests() == []
    assert not (case.dir / "store").exists()


def test_a_file_growing_past_its_declared_size_is_cut_off_and_removed(refusals):
    case = refusals["growing"]
    msg = refused(case)
    size = next(e["size"] for e in tree(case.hub) if e["path"] == "model.safetensors")
    assert f"model tiny: model.safetensors went past the {size} bytes expected of it" in msg
    assert f"reading stopped at byte {size + 1}" in msg
    assert "the partial file was removed" in msg
    assert case.outcome["seconds"] < 300
    left = [p.name for p in store_files(case.dir)]
    assert "model.safetensors" not in left
    assert not [n for n in left if n.endswith(".incomplete")], left
    assert not list((case.dir / "store").glob("gpufleet-test/tiny-moe/[0-9a-f]*[0-9a-f]"))  # no snapshot


@pytest.mark.parametrize("name", list(LISTINGS))
def test_a_listing_name_that_is_not_a_plain_relative_path_is_refused(refusals, name):
    case = refusals[name]
    msg = refused(case)
    assert "the file list of gpufleet-test/tiny-moe@" in msg
    assert LISTINGS[name][1] in msg
    assert downloads(case.hub) == []
    assert not (case.dir / "escape.txt").exists()


def test_a_commit_that_is_not_40_hex_is_refused_before_it_names_a_directory(refusals):
    case = refusals["commit"]
    msg = refused(case)
    assert "answered for gpufleet-test/tiny-moe@main the commit '../../../outside' is not a commit id" in msg
    assert not (case.dir / "outside").exists()
    assert not (case.dir / "store" / ".gpufleet" / "refs.json").exists()
    assert downloads(case.hub) == []


def test_a_symlink_in_a_local_source_is_refused_not_followed(refusals):
    case = refusals["symlink"]
    msg = refused(case)
    assert f"{case.dir}/nfs/snapshot/tokenizer.json is a symlink" in msg
    assert "never followed" in msg
    for path in store_files(case.dir):
        assert path.is_symlink() or b"root:hash" not in path.read_bytes()


@pytest.mark.parametrize("name", list(ENDPOINTS))
def test_credentials_in_an_endpoint_reach_no_output_and_no_file(refusals, name):
    case = refusals[name]
    assert "credentials in an endpoint URL are refused" in refused(case)
    direct = case.outcome["direct"]  # the module's own refusal, with its invocation shown (-vvv)
    assert direct["ok"] is False
    assert "credentials in an endpoint URL are refused" in direct["msg"]
    for form in CREDENTIAL_FORMS:
        assert form not in case.output
        assert form not in case.direct_output
        assert form not in json.dumps(case.outcome)
    for path in store_files(case.dir):
        if not path.is_symlink():
            for form in CREDENTIAL_FORMS:
                assert form.encode() not in path.read_bytes(), path
    assert case.hub.requests() == []


@pytest.mark.parametrize("name", list(RECORDS))
def test_a_snapshot_record_of_the_wrong_shape_is_named(refusals, name):
    assert RECORDS[name][1] in refused(refusals[name])


def test_refs_recorded_with_credentials_by_an_older_version_are_removed(tmp_path, hub):
    h = hub("--size-mb", "1")
    refs = tmp_path / "store" / ".gpufleet" / "refs.json"
    refs.parent.mkdir(parents=True)
    old_key = f"http://user:{CREDENTIAL}@127.0.0.1:{h.port} gpufleet-test/tiny-moe@main"
    refs.write_text(json.dumps({old_key: "f" * 40}))
    run = run_role(tmp_path, [model(h)])
    assert run.rc == 0, run.output
    assert CREDENTIAL not in refs.read_text()
    assert json.loads(refs.read_text()) == {f"{h.url} gpufleet-test/tiny-moe@main": run.facts["tiny"]["commit"]}
    assert "recorded with credentials in their endpoint; they were removed" in run.output
    assert CREDENTIAL not in run.output
