"""The deployment record and the whole-deployment rollback (module_utils/sglang_deployment.py)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from ansible_collections.gpufleet.sglang.plugins.module_utils import sglang_deployment as dep


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


@pytest.fixture
def node(tmp_path: Path) -> dict[str, Path]:
    rel1 = tmp_path / "releases" / "sglang-0.5.12.post1-aaa"
    rel2 = tmp_path / "releases" / "sglang-0.5.13-bbb"
    rel1.mkdir(parents=True)
    rel2.mkdir(parents=True)
    etc = tmp_path / "etc"
    etc.mkdir()
    link = tmp_path / "current"
    link.symlink_to(rel1)
    (etc / "unit.service").write_text("[Service]\nExecStart=/x --config /etc/c.yaml\nDescription=0.5.12.post1\n")
    (etc / "server.yaml").write_text("tp-size: 8\nattention-backend: flashinfer\n")
    (etc / "server.env").write_bytes(b"STANDIN_TOKENS_PER_S=3740\r\nNO_FINAL_NEWLINE=1")
    os.chmod(etc / "server.env", 0o640)
    (etc / "secrets.env").write_text("SGLANG_API_KEY=old-secret\n")
    os.chmod(etc / "secrets.env", 0o600)
    return {"root": tmp_path / "deployments", "etc": etc, "rel1": rel1, "rel2": rel2, "link": link}


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
