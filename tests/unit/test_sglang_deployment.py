"""The deployment record and the whole-deployment rollback (module_utils/sglang/deployment.py)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shlex
import socket
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from lib.deadline import deadline
from lib.module import Wrap, in_mount_namespace
from lib.module import run_module as run_module_at

from ansible_collections.gpufleet.sglang.plugins.filter.rollback_message import rollback_message_filter
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang import deployment as dep

REPO = Path(__file__).resolve().parents[2]


def tree(root: Path) -> dict[str, str]:
    """Every path under root with its content digest or link target (for 'nothing changed')."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "-> " + os.readlink(path)
            elif path.is_file():
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest() + f" {path.stat().st_mode:o}"
    return out


def make_node(base: Path, releases: tuple[str, str]) -> dict[str, Path]:
    """A node below ``base``: two releases (rel1, rel2), the link ``current`` to rel1, and in etc/ the four
    managed files: the unit, server.yaml, server.env (0640, CRLF, no final newline) and secrets.env (0600)."""
    rel1, rel2 = (base / "releases" / name for name in releases)
    etc = base / "etc"
    for d in (rel1, rel2, etc):
        d.mkdir(parents=True)
    link = base / "current"
    link.symlink_to(rel1)
    (etc / "unit.service").write_text("[Service]\nExecStart=/x --config /etc/c.yaml\nDescription=0.5.12.post1\n")
    (etc / "server.yaml").write_text("tp-size: 8\nattention-backend: flashinfer\n")
    (etc / "server.env").write_bytes(b"STANDIN_TOKENS_PER_S=3740\r\nNO_FINAL_NEWLINE=1")
    os.chmod(etc / "server.env", 0o640)
    (etc / "secrets.env").write_text("SGLANG_API_KEY=old-secret\n")
    os.chmod(etc / "secrets.env", 0o600)
    return {"root": base / "deployments", "etc": etc, "rel1": rel1, "rel2": rel2, "link": link}


@pytest.fixture
def node(tmp_path: Path) -> dict[str, Path]:
    return make_node(tmp_path, ("sglang-0.5.12.post1-aaa", "sglang-0.5.13-bbb"))


def files(n: dict[str, Path], extra: tuple[str, ...] = ()) -> list[tuple[str, bool]]:
    names = ["unit.service", "server.yaml", "server.env", *extra]
    return [(str(n["etc"] / name), False) for name in names] + [(str(n["etc"] / "secrets.env"), True)]


def test_record_is_idempotent_and_a_change_makes_a_new_current(node):
    first = dep.record(str(node["root"]), str(node["rel1"]), files(node), {"path": "/models/m"}, {"v": "0.5.12.post1"})
    assert first.changed
    assert first.created
    assert first.previous == ""
    again = dep.record(str(node["root"]), str(node["rel1"]), files(node), {"path": "/models/m"}, {"v": "0.5.12.post1"})
    assert (again.changed, again.current) == (False, first.current)
    (node["etc"] / "server.env").write_text("STANDIN_TOKENS_PER_S=2900\n")
    second = dep.record(str(node["root"]), str(node["rel2"]), files(node), {"path": "/models/m"}, {"v": "0.5.13"})
    assert second.changed
    assert second.current != first.current
    assert second.previous == first.current
    assert os.readlink(node["root"] / "current") == second.current
    assert os.readlink(node["root"] / "previous") == first.current
    stored = node["root"] / first.current / "files"
    assert all(oct(p.stat().st_mode & 0o777) == "0o600" for p in stored.iterdir())
    assert oct((node["root"] / first.current).stat().st_mode & 0o777) == "0o700"


def test_rollback_restores_every_file_byte_identical_then_refuses_a_second_time(node):
    before = {p.name: (p.read_bytes(), p.stat().st_mode) for p in node["etc"].iterdir()}
    first = dep.record(str(node["root"]), str(node["rel1"]), files(node, ("late.env",)), {}, {"v": "old"})
    # the upgrade: new unit, new environment, a file that did not exist, the secret changed
    (node["etc"] / "unit.service").write_text("[Service]\nDescription=0.5.13\n")
    (node["etc"] / "server.env").write_text("STANDIN_TOKENS_PER_S=2900\n")
    os.chmod(node["etc"] / "server.env", 0o644)
    (node["etc"] / "late.env").write_text("NEW=1\n")
    (node["etc"] / "secrets.env").write_text("SGLANG_API_KEY=new-secret\n")
    node["link"].unlink()
    node["link"].symlink_to(node["rel2"])
    dep.record(str(node["root"]), str(node["rel2"]), files(node, ("late.env",)), {}, {"v": "new"})

    out = dep.rollback(str(node["root"]), str(node["link"]))
    assert out.current == first.current
    assert out.release_link_changed
    assert sorted(Path(p).name for p in out.files_changed) == ["late.env", "secrets.env", "server.env", "unit.service"]
    after = {p.name: (p.read_bytes(), p.stat().st_mode) for p in node["etc"].iterdir()}
    assert after == before  # bytes (CRLF, no final newline) and modes; late.env removed again
    assert os.readlink(node["link"]) == str(node["rel1"])
    secret_diff = next(d for d in out.diffs if d["before_header"].endswith("secrets.env"))
    assert "secret" in secret_diff["before"]
    assert "new-secret" not in str(out.diffs)
    assert "old-secret" not in str(out.diffs)
    assert not [p for p in node["etc"].iterdir() if p.name.startswith(".")]  # no temp files left

    snapshot = tree(node["root"].parent)
    with pytest.raises(dep.DeploymentError, match=r"no previous deployment to roll back to .*nothing was changed"):
        dep.rollback(str(node["root"]), str(node["link"]))
    assert tree(node["root"].parent) == snapshot


def test_check_mode_changes_nothing(node):
    dep.record(str(node["root"]), str(node["rel1"]), files(node), {}, {})
    (node["etc"] / "server.yaml").write_text("tp-size: 4\n")
    snapshot = tree(node["root"].parent)
    planned = dep.record(str(node["root"]), str(node["rel2"]), files(node), {}, {}, check=True)
    assert planned.changed
    assert planned.created
    assert tree(node["root"].parent) == snapshot
    dep.record(str(node["root"]), str(node["rel2"]), files(node), {}, {})
    snapshot = tree(node["root"].parent)
    plan = dep.rollback(str(node["root"]), str(node["link"]), check=True)
    assert [Path(p).name for p in plan.files_changed] == ["server.yaml"]
    assert tree(node["root"].parent) == snapshot


def test_corrupted_copy_or_missing_release_is_refused_and_changes_nothing(node):
    first = dep.record(str(node["root"]), str(node["rel1"]), files(node), {}, {})
    (node["etc"] / "server.yaml").write_text("tp-size: 4\n")
    dep.record(str(node["root"]), str(node["rel2"]), files(node), {}, {})
    stored = node["root"] / first.current / "files" / "1"
    good = stored.read_bytes()
    stored.write_bytes(b"tampered\n")
    snapshot = tree(node["root"].parent)
    with pytest.raises(dep.DeploymentError, match="does not match its sha256"):
        dep.rollback(str(node["root"]), str(node["link"]))
    assert tree(node["root"].parent) == snapshot
    stored.write_bytes(good)
    node["rel1"].rmdir()
    with pytest.raises(dep.DeploymentError, match=r"needs release .*sglang-0.5.12.post1-aaa, which is gone"):
        dep.rollback(str(node["root"]), str(node["link"]))


def test_links_and_large_files_are_refused(node, tmp_path):
    (node["etc"] / "linked.env").symlink_to(node["etc"] / "server.env")
    with pytest.raises(dep.DeploymentError, match=r"linked\.env is not a regular file"):
        dep.record(str(node["root"]), str(node["rel1"]), files(node, ("linked.env",)), {}, {})
    (node["etc"] / "big").write_bytes(b"x" * (dep.MAX_FILE_BYTES + 1))
    with pytest.raises(dep.DeploymentError, match="over the 1048576-byte limit"):
        dep.record(str(node["root"]), str(node["rel1"]), files(node, ("big",)), {}, {})
    with pytest.raises(dep.DeploymentError, match="not an absolute path"):
        dep.record(str(node["root"]), str(node["rel1"]), [("relative.env", False)], {}, {})
    assert not node["root"].exists()


def test_adopt_records_only_a_node_without_a_deployment(node):
    adopted = dep.record(str(node["root"]), str(node["rel1"]), files(node), {}, {}, only_if_none=True)
    assert adopted.changed
    (node["etc"] / "server.yaml").write_text("tp-size: 4\n")
    again = dep.record(str(node["root"]), str(node["rel2"]), files(node), {}, {}, only_if_none=True)
    assert (again.changed, again.current) == (False, adopted.current)
    assert dep.query(str(node["root"])).current == adopted.current


def test_foreign_manifest_is_named(node):
    first = dep.record(str(node["root"]), str(node["rel1"]), files(node), {}, {})
    (node["root"] / first.current / "manifest.json").write_text("[]")
    with pytest.raises(dep.DeploymentError, match="not a gpufleet deployment manifest"):
        dep.query(str(node["root"]))


def test_restore_current_undoes_changes_made_after_the_last_record(node):
    first = dep.record(str(node["root"]), str(node["rel1"]), files(node), {"path": "/models/m"}, {"v": "0.5.12.post1"})
    before = {p: Path(p).read_bytes() for p, _secret in files(node)}
    # a run switched the release and rewrote the environment, then failed before recording
    node["link"].unlink()
    node["link"].symlink_to(node["rel2"])
    (node["etc"] / "server.env").write_text("STANDIN_TOKENS_PER_S=1\n")
    planned = dep.restore_current(str(node["root"]), str(node["link"]), check=True)
    assert planned.changed
    assert planned.files_changed == [str(node["etc"] / "server.env")]
    assert (node["etc"] / "server.env").read_text() == "STANDIN_TOKENS_PER_S=1\n"
    done = dep.restore_current(str(node["root"]), str(node["link"]))
    assert (done.changed, done.current, done.previous) == (True, first.current, "")
    assert done.release_link_changed
    assert os.readlink(node["link"]) == str(node["rel1"])
    assert {p: Path(p).read_bytes() for p, _secret in files(node)} == before
    assert os.stat(node["etc"] / "server.env").st_mode & 0o777 == 0o640
    state = tree(node["root"])
    again = dep.restore_current(str(node["root"]), str(node["link"]))
    assert not again.changed
    assert tree(node["root"]) == state


def test_restore_current_keeps_previous_and_needs_a_current(node):
    with pytest.raises(dep.DeploymentError, match="no current deployment to restore"):
        dep.restore_current(str(node["root"]), str(node["link"]))
    dep.record(str(node["root"]), str(node["rel1"]), files(node), {}, {"v": "1"})
    (node["etc"] / "server.yaml").write_text("tp-size: 4\n")
    second = dep.record(str(node["root"]), str(node["rel2"]), files(node), {}, {"v": "2"})
    (node["etc"] / "server.yaml").write_text("tp-size: 2\n")
    done = dep.restore_current(str(node["root"]), str(node["link"]))
    assert (done.current, done.previous) == (second.current, second.previous)
    assert (node["etc"] / "server.yaml").read_text() == "tp-size: 4\n"
    assert dep.query(str(node["root"])).previous == second.previous


# --------------------------------------------------------------------------- all-or-nothing restore

# the os calls a restore makes to change anything (and mkstemp's os.open, fsync_dir's os.open)
FAULTABLE = ("open", "write", "fsync", "fchmod", "fchown", "replace", "rename", "symlink", "unlink")


class Faults:
    """Count the faultable os calls of one restore; raise OSError(EIO) on call ``fail_at``
    (1-based), and with ``and_after`` on every call after it too (a failing disk)."""

    def __init__(self, fail_at: int = 0, and_after: bool = False) -> None:
        self.fail_at = fail_at
        self.and_after = and_after
        self.calls: list[str] = []
        self.real = {name: getattr(os, name) for name in FAULTABLE}

    def __enter__(self) -> Faults:
        for name, real in self.real.items():
            setattr(os, name, self._wrap(name, real))
        return self

    def __exit__(self, *exc: object) -> None:
        for name, real in self.real.items():
            setattr(os, name, real)

    def _wrap(self, name, real):
        def call(*args, **kwargs):
            self.calls.append(name)
            n = len(self.calls)
            if self.fail_at and (n == self.fail_at or (self.and_after and n > self.fail_at)):
                raise OSError(errno.EIO, f"injected fault in os.{name} (call {n})")
            return real(*args, **kwargs)

        return call


def attempt(fn, *args, faults: Faults | None = None):
    """(result, None) or (None, the DeploymentError): run under ``faults``."""
    with faults or Faults():
        try:
            return fn(*args), None
        except dep.DeploymentError as exc:
            return None, exc


def two_deployments(base: Path) -> dict:
    """A node on deployment B (new) with A (old) as previous; they differ in five ways across the
    managed files (content, mode, a file only A has, a file only B has, the secret) and the release."""
    base.mkdir()
    node = make_node(base, ("a", "b"))
    root, etc, rel_a, rel_b, link = node["root"], node["etc"], node["rel1"], node["rel2"], node["link"]
    names = ["unit.service", "server.yaml", "server.env", "secrets.env", "only-a.env", "only-b.env"]
    paths = [str(etc / n) for n in names]
    managed = [(p, p.endswith("secrets.env")) for p in paths]
    (etc / "only-a.env").write_text("A_ONLY=1\n")
    a = dep.record(str(root), str(rel_a), managed, {}, {"v": "a"})
    (etc / "unit.service").write_text("[Service]\nDescription=B\n")
    os.chmod(etc / "server.env", 0o644)
    (etc / "secrets.env").write_text("SGLANG_API_KEY=b\n")
    (etc / "only-a.env").unlink()
    (etc / "only-b.env").write_text("B_ONLY=1\n")
    link.unlink()
    link.symlink_to(rel_b)
    b = dep.record(str(root), str(rel_b), managed, {}, {"v": "b"})
    return {"base": base, "root": root, "link": link, "etc": etc, "paths": paths, "a": a.current, "b": b.current}


def node_state(n: dict) -> dict:
    """Everything a restore may change, exactly: each managed file's bytes, mode and owner (or
    absent), the release link, the records' links (paths relative to the node, to compare nodes)."""
    out: dict = {}
    for path in n["paths"]:
        name = os.path.basename(path)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            out[name] = None
            continue
        out[name] = (Path(path).read_bytes(), st.st_mode, st.st_uid, st.st_gid)
    out["release_link"] = os.path.relpath(os.readlink(n["link"]), n["base"])
    for name in ("current", "previous"):
        link = n["root"] / name
        target = os.readlink(link) if os.path.lexists(link) else None
        out[name] = {n["a"]: "A", n["b"]: "B"}.get(target, target)
    return out


def temporaries(n: dict) -> list[str]:
    return sorted(
        str(p) for d in (n["etc"], n["root"], n["link"].parent) for p in d.iterdir() if p.name.startswith(".")
    )


def wanted_states(tmp_path: Path, restore) -> tuple[dict, dict, int]:
    """The state before, the state after a restore that succeeds, and how many faultable calls it makes."""
    n = two_deployments(tmp_path / "reference")
    before = node_state(n)
    with Faults() as counted:
        restore(n)
    return before, node_state(n), len(counted.calls)


def test_rollback_is_all_or_nothing_whatever_step_fails(tmp_path):
    """A fault at every single os call of a rollback, one run each: the node is on exactly one of the
    two deployments, byte for byte, and the outcome says which."""

    def restore(n):
        return dep.rollback(str(n["root"]), str(n["link"]))

    before, after, steps = wanted_states(tmp_path, restore)
    assert before != after
    assert after["current"] != before["current"]
    assert after["previous"] is None
    assert steps > 20  # staging, swapping and fsyncing five files, the release link and the records
    outcomes = {"failed": 0, "done": 0}
    for k in range(1, steps + 1):
        n = two_deployments(tmp_path / f"k{k}")
        out, exc = attempt(dep.rollback, str(n["root"]), str(n["link"]), faults=Faults(fail_at=k))
        if exc is not None:
            message = str(exc)
            assert node_state(n) == before, (k, message)
            assert not exc.mixed, (k, message)
            assert exc.node_on in ("", n["b"]), (k, message)
            assert n["b"] in message, (k, message)
            assert "nothing was changed" in message or "every change was undone" in message, (k, message)
            assert f"on deployment {n['a']}" not in message, (k, message)
            assert temporaries(n) == [], (k, temporaries(n))
            outcomes["failed"] += 1
            continue
        assert node_state(n) == after, k
        assert out.current == n["a"], k
        assert [w for w in out.warnings if "could not remove the temporary" not in w] == []
        assert len(temporaries(n)) == len(out.warnings), (k, temporaries(n), out.warnings)
        outcomes["done"] += 1
    # the fault hit the reading, the staging and the swap (failed) and the clean-up after it (done)
    assert outcomes["failed"] > steps // 2
    assert outcomes["done"] >= 1


def test_a_fault_during_the_swap_names_the_deployment_the_node_is_still_on(tmp_path, monkeypatch):
    n = two_deployments(tmp_path / "n")
    before = node_state(n)
    real = os.replace
    done = []

    def third_swap_fails(src, dst, *args, **kwargs):
        # the third rename of a staged file into place: two managed files are already swapped
        if ".tmp" in str(src) and str(dst).startswith(str(n["etc"])):
            done.append(dst)
            if len(done) == 3:
                raise OSError(errno.EIO, "Input/output error")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", third_swap_fails)
    with pytest.raises(dep.DeploymentError) as caught:
        dep.rollback(str(n["root"]), str(n["link"]))
    monkeypatch.undo()
    message = str(caught.value)
    assert f"every change was undone: the node is on deployment {n['b']}" in message
    assert "the file is unchanged" not in message
    assert caught.value.node_on == n["b"]
    assert node_state(n) == before
    assert temporaries(n) == []
    # and the rollback can simply be run again
    again = dep.rollback(str(n["root"]), str(n["link"]))
    assert again.current == n["a"]


def test_a_failing_undo_is_reported_as_mixed_with_the_files_named(tmp_path):
    """A disk that fails from some call on: the undo fails too; the message says exactly which
    deployment (or that it is a mix, and of what) and that is what is on disk."""

    def restore(n):
        return dep.rollback(str(n["root"]), str(n["link"]))

    before, after, steps = wanted_states(tmp_path, restore)
    seen_mixed = 0
    for k in range(1, steps + 1):
        n = two_deployments(tmp_path / f"k{k}")
        out, failed = attempt(dep.rollback, str(n["root"]), str(n["link"]), faults=Faults(fail_at=k, and_after=True))
        state = node_state(n)
        if failed is None:
            assert out.current == n["a"]
            assert state == after, k
        elif failed.mixed:
            seen_mixed += 1
            assert "the node is MIXED" in str(failed)
            assert state not in (before, after), k
            named = str(failed).split("the node is MIXED: ", 1)[1].split(" are those of", 1)[0].split(", ")
            assert named
            for path in named:
                if path in n["paths"]:
                    assert state[os.path.basename(path)] == after[os.path.basename(path)], (k, path)
        elif failed.node_on == n["a"]:
            assert state == after, (k, str(failed))
        else:
            assert state == before, (k, str(failed))
            assert failed.node_on in ("", n["b"])
    assert seen_mixed >= 1


def test_restore_current_is_all_or_nothing_whatever_step_fails(tmp_path):
    """restored: the live files drifted from the record; a fault anywhere leaves them as they were
    (and says they differ from the record) or makes them the record, never a mix."""

    def drift(n):
        Path(n["paths"][0]).write_text("[Service]\nDescription=drifted\n")
        Path(n["paths"][1]).unlink()
        n["link"].unlink()
        n["link"].symlink_to(n["root"])

    def restore(n):
        drift(n)
        return dep.restore_current(str(n["root"]), str(n["link"]))

    reference = two_deployments(tmp_path / "drifted")
    drift(reference)
    drifted = node_state(reference)
    recorded, after, steps = wanted_states(tmp_path, restore)
    assert after == recorded  # restored = exactly the recorded deployment again
    for k in range(1, steps + 1):
        n = two_deployments(tmp_path / f"k{k}")
        drift(n)
        out, exc = attempt(dep.restore_current, str(n["root"]), str(n["link"]), faults=Faults(fail_at=k))
        if exc is not None:
            assert node_state(n) == drifted, (k, str(exc))
            assert exc.node_on == ""  # the node was not on a whole deployment before
            assert not exc.mixed
            assert n["b"] in str(exc)
            assert temporaries(n) == []
            continue
        assert node_state(n) == after, k
        assert out.current == n["b"]


# --------------------------------------------------------------------------- manifests are records from disk


def manifest_path(n: dict, dep_id: str) -> Path:
    return n["root"] / dep_id / "manifest.json"


def rewrite(n: dict, dep_id: str, change) -> None:
    path = manifest_path(n, dep_id)
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda d: d.update(files={}), "files is a dict, not a list"),
        (lambda d: d.update(release_dir="relative/rel"), "release_dir the path 'relative/rel' is not an absolute path"),
        (
            lambda d: d.update(release_dir="/opt/x/../../etc"),
            "release_dir the path '/opt/x/../../etc' is not a normalised",
        ),
        (lambda d: d.update(model=[]), "model is a list, not an object"),
        (lambda d: d.pop("created"), "missing ['created']"),
        (lambda d: d.update(extra=1), "unexpected ['extra']"),
        (lambda d: d["files"].__setitem__(0, "x"), "files[0] is a str, not an object"),
        (lambda d: d["files"][0].update(path="/etc/../etc/shadow"), "files[0].path the path '/etc/../etc/shadow'"),
        (lambda d: d["files"][0].update(path="//etc/x"), "files[0].path the path '//etc/x'"),
        (lambda d: d["files"][0].update(path="/etc/x\n"), "control character"),
        (lambda d: d["files"][0].update(stored="../../../etc/passwd"), "files[0].stored is '../../../etc/passwd'"),
        (lambda d: d["files"][0].update(stored=0), "files[0].stored is 0, not the decimal index"),
        (lambda d: d["files"][0].update(sha256="x" * 64), "files[0].sha256 is"),
        (lambda d: d["files"][0].update(mode=420), "files[0].mode is 420, not four octal digits"),
        (lambda d: d["files"][0].update(uid=-1), "files[0].uid is -1, not a non-negative integer"),
        (lambda d: d["files"][0].update(gid=True), "files[0].gid is True"),
        (lambda d: d["files"][0].update(secret="no"), "files[0].secret is 'no', not true or false"),
        (lambda d: d["files"][1].update(path=d["files"][0]["path"]), "twice"),
        (lambda d: d["files"][0].pop("sha256"), "missing ['sha256']"),
        (lambda d: d["files"][0].update(absent=True), "unexpected ['gid', 'mode', 'sha256', 'uid']"),
    ],
)
def test_a_wrong_manifest_is_named_before_any_file_operation(tmp_path, change, needle):
    n = two_deployments(tmp_path / "n")
    rewrite(n, n["a"], change)
    before = node_state(n)
    with pytest.raises(dep.DeploymentError) as caught:
        dep.rollback(str(n["root"]), str(n["link"]))
    assert needle in str(caught.value)
    assert f"deployment {n['a']}: manifest.json" in str(caught.value)
    assert "nothing was changed" in str(caught.value)
    assert node_state(n) == before


def test_a_manifest_path_inside_the_records_is_refused(tmp_path):
    n = two_deployments(tmp_path / "n")
    target = str(n["root"] / "current")
    rewrite(n, n["a"], lambda d: d["files"][0].update(path=target))
    with pytest.raises(dep.DeploymentError, match=r"lies in the deployment records"):
        dep.rollback(str(n["root"]), str(n["link"]))
    with pytest.raises(dep.DeploymentError, match=r"lies in the deployment records"):
        dep.record(str(n["root"]), "/opt/r", [(target, False)], {}, {})


@pytest.mark.parametrize("target", ["../../etc", "/etc", "d-0123", "d-0123456789ABCDEF", "d-0123456789abcdef/x", ".."])
def test_a_record_link_that_is_not_a_deployment_id_is_refused(tmp_path, target):
    n = two_deployments(tmp_path / "n")
    (n["root"] / "previous").unlink()
    (n["root"] / "previous").symlink_to(target)
    before = node_state(n)
    with pytest.raises(dep.DeploymentError, match=r"previous points at .*(not a deployment id|'d-' and 16 hex digits)"):
        dep.rollback(str(n["root"]), str(n["link"]))
    assert node_state(n) == before


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory", "socket"])
def test_a_manifest_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path, kind, monkeypatch):
    n = two_deployments(tmp_path / "n")
    path = manifest_path(n, n["b"])
    kept = path.read_bytes()
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        (tmp_path / "elsewhere.json").write_bytes(kept)
        path.symlink_to(tmp_path / "elsewhere.json")
    elif kind == "directory":
        path.mkdir()
    else:
        monkeypatch.chdir(path.parent)  # an AF_UNIX path is limited to 108 bytes
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(path.name)
        sock.close()

    with deadline(5), pytest.raises(dep.DeploymentError, match=r"manifest .*manifest\.json is not a regular file"):
        dep.query(str(n["root"]))


def test_a_stored_copy_that_is_a_fifo_or_a_link_is_refused(tmp_path):
    n = two_deployments(tmp_path / "n")
    stored = n["root"] / n["a"] / "files" / "0"
    stored.unlink()
    os.mkfifo(stored)
    before = node_state(n)
    with (
        deadline(5),
        pytest.raises(dep.DeploymentError, match=r"stored copy of .*unit\.service .* is not a regular file \(a FIFO\)"),
    ):
        dep.rollback(str(n["root"]), str(n["link"]))
    assert node_state(n) == before


@pytest.mark.parametrize(
    ("where", "needle"),
    [("outside", r"leads out of .* through a symlink"), ("inside", r"is not a directory \(a symbolic link\)")],
)
def test_a_deployment_directory_that_is_a_link_is_refused(tmp_path, where, needle):
    n = two_deployments(tmp_path / "n")
    real = n["root"] / n["a"]
    moved = tmp_path / "moved" if where == "outside" else n["root"] / "moved"
    real.rename(moved)
    real.symlink_to(moved)
    before = node_state(n)
    with pytest.raises(dep.DeploymentError, match=needle):
        dep.rollback(str(n["root"]), str(n["link"]))
    assert node_state(n) == before


@pytest.mark.parametrize("path", ["/etc/x/../shadow", "/etc//x", "/etc/x/", "/", "/etc/./x", "/etc/x\x00"])
def test_record_refuses_a_managed_path_that_is_not_normalised(tmp_path, path):
    with pytest.raises(dep.DeploymentError, match=r"managed file .* is not a normalised absolute path"):
        dep.record(str(tmp_path / "d"), "/opt/r", [(path, False)], {}, {})
    assert not (tmp_path / "d").exists()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
entry_fields = {
    "path": st.sampled_from(["/etc/a", "etc/a", "/etc/../a", "//a", "/", "", "/etc/a/"]) | st.text(max_size=12),
    "sha256": st.sampled_from(["0" * 64, "A" * 64, "0" * 63]) | json_values,
    "mode": st.sampled_from(["0644", "644", "0o644", "9999"]) | json_values,
    "uid": st.sampled_from([0, -1, True, 1.5, "0"]),
    "gid": st.sampled_from([0, -1, False, None]),
    "stored": st.sampled_from(["0", "1", "01", "../x", "", "0/1", 0]),
    "secret": st.sampled_from([True, False, 0, "yes"]),
    "absent": st.sampled_from([True, False, 1]),
}


@given(
    top=st.fixed_dictionaries(
        {},
        optional={
            "schema": st.sampled_from([1, True, 2, "1"]),
            "id": st.sampled_from(["ID", "d-0", None]),
            "created": json_values,
            "release_dir": entry_fields["path"],
            "model": json_values,
            "meta": json_values,
            "files": st.lists(st.fixed_dictionaries({}, optional=entry_fields) | json_values, max_size=3) | json_values,
            "extra": json_values,
        },
    )
)
def test_fuzz_manifest_shapes_are_accepted_or_named(tmp_path_factory, top):
    """Any JSON in manifest.json: a DeploymentError naming it, or a manifest whose every path and id
    is as record() writes them; never another exception."""
    root = tmp_path_factory.mktemp("fuzz")
    dep_id = "d-0123456789abcdef"
    (root / dep_id / "files").mkdir(parents=True)
    for name in ("0", "1", "01"):
        (root / dep_id / "files" / name).write_bytes(b"")
    doc = {k: (dep_id if v == "ID" else v) for k, v in top.items()}
    (root / dep_id / "manifest.json").write_text(json.dumps(doc))
    manifest, exc = attempt(dep.load_manifest, str(root), dep_id)
    if exc is not None:
        assert str(exc).startswith(f"deployment {dep_id}:")
        return
    assert manifest["schema"] == 1
    assert manifest["id"] == dep_id
    for entry in manifest["files"]:
        assert entry["path"].startswith("/")
        assert os.path.normpath(entry["path"]) == entry["path"]
        assert not entry["path"].startswith("//")
        assert entry["stored"].isdigit()


# --------------------------------------------------------------------------- the play's message (rollback.yml)


def rollback_tasks() -> dict[str, dict]:
    """The set_fact tasks of playbooks/tasks/rollback.yml by name (blocks and rescues flattened)."""
    doc = yaml.safe_load((REPO / "playbooks" / "tasks" / "rollback.yml").read_text())
    found: dict[str, dict] = {}

    def walk(tasks):
        for task in tasks:
            found[task.get("name", "")] = task
            for section in ("block", "rescue", "always"):
                walk(task.get(section, []))

    walk(doc)
    return found


def render(expression: str, variables: dict) -> str:
    from ansible.parsing.dataloader import DataLoader  # noqa: PLC0415
    from ansible.template import Templar, trust_as_template  # noqa: PLC0415

    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expression))


def compose_message(tasks: dict[str, dict], facts: dict) -> str:
    """The "Compose the message" task: its facts rendered as Ansible would, then the filter it pipes them to."""
    expression = tasks["Compose the message"]["ansible.builtin.set_fact"]["__rollout_message"]
    assert expression.rstrip().endswith("| gpufleet.sglang.rollback_message }}")
    fields = render(expression.replace("| gpufleet.sglang.rollback_message }}", "}}"), facts)
    return rollback_message_filter(fields)


@pytest.mark.parametrize(
    ("failed_result", "left"),
    [
        (
            {"node_on": "d-00000000000000bb", "mixed": False},
            "left on deployment d-00000000000000bb, as before the rollback,",
        ),
        (
            {"node_on": "d-00000000000000aa", "mixed": False},
            "left on deployment d-00000000000000aa, the one it went back to,",
        ),
        ({"node_on": "", "mixed": True}, "left with a MIX of two deployments (as named above),"),
        ({"node_on": "", "mixed": False}, "left with its files as they were before the rollback,"),
        ({}, "left with its files as they were before the rollback,"),
    ],
)
def test_rollback_message_says_what_the_failed_restore_left(failed_result, left):
    tasks = rollback_tasks()
    facts = {
        "ansible_failed_result": dict(failed_result, msg="sglang_deployment: restoring deployment ... failed"),
        "__rollout_after": {"current": "d-00000000000000bb"},
    }
    noted = tasks["Note why the node could not go back"]["ansible.builtin.set_fact"]
    for name, expression in noted.items():
        facts[name] = render(expression, facts)
    facts.update(
        inventory_hostname="gpu-1",
        __rollout_what="throughput gate FAIL (slow)",
        __rollout_action="rolled_back",
        __rollout_out_of_gateway=True,
    )
    message = compose_message(tasks, facts)
    assert "It could not go back (sglang_deployment: restoring deployment ... failed)" in message
    assert f"the node is {left} STOPPED and OUT of the gateway." in " ".join(message.split())


# --------------------------------------------------------------------------- the module, as Ansible runs it


def run_deployment_module(args: dict, workdir: Path, *, wrap: Wrap | None = None) -> tuple[int, dict]:
    """Run plugins/modules/sglang_deployment.py on an args file; ``wrap``: the command line around it
    (:func:`lib.module.in_mount_namespace`)."""
    return run_module_at(REPO / "plugins" / "modules" / "sglang_deployment.py", args, workdir, wrap=wrap)


@pytest.mark.skipif(os.geteuid() != 0, reason="a read-only bind mount needs root")
def test_module_rollback_on_a_read_only_etc_fails_naming_the_deployment_the_node_is_on(tmp_path):
    n = two_deployments(tmp_path / "n")
    before = node_state(n)
    etc = shlex.quote(str(n["etc"]))
    rc, result = run_deployment_module(
        {"root": str(n["root"]), "release_link": str(n["link"]), "state": "rolled_back"},
        tmp_path,
        wrap=in_mount_namespace(f"mount --bind {etc} {etc}; mount -o remount,ro,bind {etc}"),
    )
    assert rc == 1
    assert result["failed"] is True
    assert result["node_on"] == n["b"]
    assert result["mixed"] is False
    assert "Read-only file system" in result["msg"]
    assert f"nothing was changed: the node is on deployment {n['b']}" in result["msg"]
    assert node_state(n) == before
    rc, result = run_deployment_module(
        {"root": str(n["root"]), "release_link": str(n["link"]), "state": "rolled_back"}, tmp_path
    )
    assert (rc, result["current"], result["changed"]) == (0, n["a"], True)
