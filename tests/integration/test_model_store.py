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
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import ansible_runner
import pytest
from lib.cache import CACHE
from lib.playbook import ansible_settings, runner_data_dir

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
        self.progress: list[str] = []
        for ev in runner.events:
            data = ev.get("event_data", {})
            res = data.get("res", {})
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


def test_not_enough_space_is_refused_before_any_byte(tmp_path, hub):
    h = hub("--size-mb", "4")
    run = run_role(tmp_path, [model(h)], model_store_reserve_bytes=2**60)
    assert run.rc != 0
    msg = " ".join(run.failed_msgs)
    assert "not enough space" in msg
    assert "the download needs 4.0 MiB" in msg
    assert "nothing was downloaded" in msg
    assert downloads(h) == []
    assert not list((tmp_path / "store").glob("gpufleet-test/tiny-moe/*"))


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


def test_bad_declarations_are_named_before_any_change(tmp_path, hub):
    h = hub("--size-mb", "1")
    run = run_role(
        tmp_path,
        [model(h), model(h), {"name": "x", "repo": "no-slash", "revision": "main"}, model(h, name="l", source="local")],
    )
    assert run.rc != 0
    msg = " ".join(run.failed_msgs)
    assert "model tiny: declared twice" in msg
    assert "model x: repo 'no-slash' is not '<org>/<name>'" in msg
    assert "model l: a local source needs revision set to the 40-hex commit" in msg
    assert h.requests() == []
    assert not (tmp_path / "store").exists()


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


def tree(h: HubStandIn) -> list[dict]:
    with urllib.request.urlopen(f"{h.url}/api/models/gpufleet-test/tiny-moe/tree/main", timeout=10) as resp:
        return json.loads(resp.read())


def store_files(tmp_path: Path) -> list[Path]:
    return [p for p in (tmp_path / "store").rglob("*") if p.is_file() or p.is_symlink()]


def test_a_file_growing_past_its_declared_size_is_cut_off_and_removed(tmp_path, hub):
    h = hub("--size-mb", "1", "--endless", "model.safetensors")
    began = time.monotonic()
    run = run_role(tmp_path, [model(h)])
    assert run.rc != 0
    msg = " ".join(run.failed_msgs)
    size = next(e["size"] for e in tree(h) if e["path"] == "model.safetensors")
    assert f"model tiny: model.safetensors went past the {size} bytes expected of it" in msg, run.output
    assert f"reading stopped at byte {size + 1}" in msg
    assert "the partial file was removed" in msg
    assert time.monotonic() - began < 300
    left = [p.name for p in store_files(tmp_path)]
    assert "model.safetensors" not in left
    assert not [n for n in left if n.endswith(".incomplete")], left
    assert not list((tmp_path / "store").glob("gpufleet-test/tiny-moe/[0-9a-f]*[0-9a-f]"))  # no snapshot


@pytest.mark.parametrize(
    ("planted", "why"),
    [("../../escape.txt", "'..' segment"), ("/tmp/escape.txt", "is absolute"), ("a//b.txt", "empty segment")],
)
def test_a_listing_name_that_is_not_a_plain_relative_path_is_refused(tmp_path, hub, planted, why):
    h = hub("--size-mb", "1", "--tree-extra", planted)
    run = run_role(tmp_path, [model(h)])
    assert run.rc != 0
    msg = " ".join(run.failed_msgs)
    assert "the file list of gpufleet-test/tiny-moe@" in msg, run.output
    assert why in msg
    assert downloads(h) == []
    assert not (tmp_path / "escape.txt").exists()
    assert "Traceback" not in run.output


def test_a_commit_that_is_not_40_hex_is_refused_before_it_names_a_directory(tmp_path, hub):
    h = hub("--size-mb", "1", "--commit-sha", "../../../outside")
    run = run_role(tmp_path, [model(h)])
    assert run.rc != 0
    assert "answered for gpufleet-test/tiny-moe@main the commit '../../../outside' is not a commit id" in " ".join(
        run.failed_msgs
    ), run.output
    assert not (tmp_path / "outside").exists()
    assert not (tmp_path / "store" / ".gpufleet" / "refs.json").exists()
    assert downloads(h) == []


def test_a_symlink_in_a_local_source_is_refused_not_followed(tmp_path, hub):
    hub("--size-mb", "1")
    src = tmp_path / "nfs" / "snapshot"
    src.mkdir(parents=True)
    (src / "config.json").write_text("{}\n")
    (tmp_path / "host-secret").write_text("root:hash:19000\n")
    (src / "tokenizer.json").symlink_to(tmp_path / "host-secret")
    local = {
        "name": "tiny",
        "repo": "gpufleet-test/tiny-moe",
        "revision": "0" * 40,
        "source": "local",
        "local_path": str(src),
    }
    run = run_role(tmp_path, [local])
    assert run.rc != 0
    assert f"{src}/tokenizer.json is a symlink" in " ".join(run.failed_msgs), run.output
    assert "never followed" in " ".join(run.failed_msgs)
    for path in store_files(tmp_path):
        assert path.is_symlink() or b"root:hash" not in path.read_bytes()


CREDENTIAL = "hf_Cred1t$ecret"


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://user:{c}@127.0.0.1:{port}",
        "http://user:{q}@127.0.0.1:{port}",
        "http://127.0.0.1:{port}/?token={q}",
    ],
)
def test_credentials_in_an_endpoint_reach_no_output_and_no_file(tmp_path, hub, endpoint):
    h = hub("--size-mb", "1")
    url = endpoint.format(c=CREDENTIAL, q=quote(CREDENTIAL, safe=""), port=h.port)
    forms = [CREDENTIAL, quote(CREDENTIAL, safe=""), quote(CREDENTIAL)]
    through_role = run_role(tmp_path, [model(h, endpoint=url)])
    assert through_role.rc != 0
    assert "credentials in an endpoint URL are refused" in " ".join(through_role.failed_msgs)
    direct = run_module_directly(tmp_path, url)  # the module's own refusal, with its invocation shown
    assert direct.rc != 0
    assert "credentials in an endpoint URL are refused" in " ".join(direct.failed_msgs), direct.output
    for text in (through_role.output, direct.output, json.dumps(through_role.facts)):
        for form in forms:
            assert form not in text
    for path in store_files(tmp_path):
        if not path.is_symlink():
            for form in forms:
                assert form.encode() not in path.read_bytes(), path
    assert h.requests() == []


def run_module_directly(tmp_path: Path, endpoint: str) -> Run:
    pdd = tmp_path / f"direct-{time.monotonic_ns()}"
    (pdd / "project").mkdir(parents=True)
    (pdd / "project" / "play.yml").write_text(
        """
- name: The module alone
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Fetch
      gpufleet.sglang.model_store_fetch:
        store: "{{ store }}"
        name: tiny
        repo: gpufleet-test/tiny-moe
        endpoint: "{{ endpoint }}"
      vars:
        ansible_python_interpreter: "{{ venv }}/bin/python"
"""
    )
    runner = ansible_runner.run(
        private_data_dir=str(pdd),
        playbook="play.yml",
        extravars={"store": str(tmp_path / "store"), "endpoint": endpoint, "venv": str(VENV)},
        envvars=ansible_settings(),
        verbosity=3,
        quiet=True,
        timeout=300,
    )
    return Run(runner)


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


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda p: p.write_text("[]"), "is a list, not an object with repo, commit and files"),
        (lambda p: p.write_text('{"repo": "gpufleet-test/tiny-moe"}'), "has no 'commit'"),
        (lambda p: p.write_bytes(b"\xff\xfe"), "is not UTF-8"),
        (lambda p: (p.unlink(), os.mkfifo(p)), "is a FIFO, not a regular file"),
    ],
)
def test_a_snapshot_record_of_the_wrong_shape_is_named(tmp_path, stored, damage, why):
    h, snap = stored  # a store where the snapshot was downloaded and verified
    record = snap / ".gpufleet-model.json"
    damage(record)
    run = run_role(tmp_path, [model(h)])
    assert run.rc != 0
    assert why in " ".join(run.failed_msgs), run.output
    assert "Traceback" not in run.output
