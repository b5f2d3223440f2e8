# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""atomic_file: the one crash-safe write and link swap of the collection (used by lxc_gpu_config,
sglang_patch_journal, sglang_deployment, model_store and the gate's baselines)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from ansible_collections.gpufleet.sglang.plugins.module_utils.common import atomic_file as af
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate import baseline as gate_baseline
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang import deployment as sglang_deployment
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang import model_store


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def fail_with(code: int):
    def raiser(*_args: object, **_kwargs: object) -> None:
        raise OSError(code, os.strerror(code))

    return raiser


# --------------------------------------------------------------------------- replace_file


def test_creates_and_replaces_with_the_mode_asked_for_whatever_the_umask(tmp_path):
    path = tmp_path / "f.conf"
    old = os.umask(0o077)
    try:
        af.replace_file(str(path), b"one\n", mode=0o644)
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        af.replace_file(str(path), b"two\n", mode=0o600)
    finally:
        os.umask(old)
    assert path.read_bytes() == b"two\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert names(tmp_path) == ["f.conf"]


def test_writes_everything_when_the_os_writes_a_little_at_a_time(tmp_path, monkeypatch):
    real_write = os.write
    monkeypatch.setattr(af.os, "write", lambda fd, data: real_write(fd, bytes(data[:3])))
    af.replace_file(str(tmp_path / "f"), b"0123456789" * 10)
    assert (tmp_path / "f").read_bytes() == b"0123456789" * 10


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another owner needs root")
def test_owner_is_set(tmp_path):
    path = tmp_path / "owned"
    af.replace_file(str(path), b"x", uid=65534, gid=65534)
    assert (path.stat().st_uid, path.stat().st_gid) == (65534, 65534)


@pytest.mark.parametrize(
    ("call", "code"),
    [("write", errno.ENOSPC), ("fsync", errno.EIO), ("fchmod", errno.EPERM), ("replace", errno.EXDEV)],
)
def test_an_error_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch, call, code):
    path = tmp_path / "f"
    af.replace_file(str(path), b"old\n", mode=0o640)
    monkeypatch.setattr(af.os, call, fail_with(code))
    with pytest.raises(af.FileWriteError) as info:
        af.replace_file(str(path), b"new\n", mode=0o600)
    assert isinstance(info.value, OSError)  # callers that handle OS errors keep handling it
    assert info.value.errno == code
    assert str(info.value) == f"cannot write {path}: {os.strerror(code)}"
    monkeypatch.undo()
    assert path.read_bytes() == b"old\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert names(tmp_path) == ["f"]


def test_a_directory_that_cannot_take_a_temp_file_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(af.tempfile, "mkstemp", fail_with(errno.EROFS))
    with pytest.raises(af.FileWriteError, match=f"cannot write {tmp_path}/f: Read-only file system"):
        af.replace_file(str(tmp_path / "f"), b"x")
    assert names(tmp_path) == []


# --------------------------------------------------------------------------- fsync_dir


@pytest.mark.parametrize("code", [errno.EINVAL, errno.ENOSYS, errno.ENOTSUP])
def test_fsync_dir_accepts_file_systems_that_refuse_it(tmp_path, monkeypatch, code):
    monkeypatch.setattr(af.os, "fsync", fail_with(code))
    af.fsync_dir(str(tmp_path))


def test_fsync_dir_raises_a_real_error(tmp_path, monkeypatch):
    monkeypatch.setattr(af.os, "fsync", fail_with(errno.EIO))
    with pytest.raises(OSError, match="Input/output error"):
        af.fsync_dir(str(tmp_path))


# --------------------------------------------------------------------------- swap_symlink


def test_swap_symlink_creates_repoints_and_reports_change(tmp_path):
    link = tmp_path / "current"
    assert af.swap_symlink("releases/a", str(link)) is True
    assert os.readlink(link) == "releases/a"
    assert af.swap_symlink("releases/a", str(link)) is False
    assert af.swap_symlink("releases/b", str(link)) is True
    assert os.readlink(link) == "releases/b"
    assert names(tmp_path) == ["current"]


def test_swap_symlink_error_keeps_the_old_link_and_no_temp(tmp_path, monkeypatch):
    link = tmp_path / "current"
    af.swap_symlink("releases/a", str(link))
    monkeypatch.setattr(af.os, "replace", fail_with(errno.EACCES))
    with pytest.raises(af.FileWriteError, match=f"cannot point {link} at releases/b: Permission denied"):
        af.swap_symlink("releases/b", str(link))
    monkeypatch.undo()
    assert os.readlink(link) == "releases/a"
    assert names(tmp_path) == ["current"]


def test_swap_symlink_clears_a_temp_link_left_by_a_crash(tmp_path):
    link = tmp_path / "current"
    stale = tmp_path / f".gpufleet.current.{os.getpid()}.tmp"
    stale.symlink_to("nowhere")
    assert af.swap_symlink("releases/a", str(link)) is True
    assert names(tmp_path) == ["current"]


# --------------------------------------------------------------------------- stage_file, stage_symlink


def test_stage_file_and_link_leave_the_destination_alone_until_renamed(tmp_path):
    path, link = tmp_path / "unit.service", tmp_path / "current"
    path.write_bytes(b"old\n")
    link.symlink_to("releases/a")
    staged = af.stage_file(str(path), b"new\n", mode=0o640, prefix=".")
    staged_link = af.stage_symlink("releases/b", str(link), prefix=".")
    other_link = af.stage_symlink("releases/c", str(link), prefix=".")  # a second one: its own name
    assert (path.read_bytes(), os.readlink(link)) == (b"old\n", "releases/a")
    assert Path(staged).parent == tmp_path
    assert Path(staged).name.startswith(".unit.service.")
    assert (Path(staged).read_bytes(), stat.S_IMODE(os.stat(staged).st_mode)) == (b"new\n", 0o640)
    assert (os.readlink(staged_link), os.readlink(other_link)) == ("releases/b", "releases/c")
    os.replace(staged, path)
    os.replace(staged_link, link)
    os.unlink(other_link)
    assert (path.read_bytes(), os.readlink(link)) == (b"new\n", "releases/b")
    assert names(tmp_path) == ["current", "unit.service"]


def test_stage_file_error_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(af.os, "fsync", fail_with(errno.EIO))
    with pytest.raises(af.FileWriteError, match=f"cannot write {tmp_path / 'f'}: Input/output error"):
        af.stage_file(str(tmp_path / "f"), b"x")
    monkeypatch.undo()
    assert names(tmp_path) == []


# --------------------------------------------------------------------------- the callers use it


def test_callers_write_through_atomic_file(tmp_path, monkeypatch):
    calls: list[str] = []
    real_replace = af.replace_file

    def spy(path: str, data: bytes, **kw: object) -> None:
        calls.append(os.path.basename(path))
        real_replace(path, data, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(gate_baseline, "replace_file", spy)
    monkeypatch.setattr(model_store, "replace_file", spy)
    monkeypatch.setattr(sglang_deployment, "replace_file", spy)
    gate_baseline.atomic_write(str(tmp_path / "b.json"), "{}\n")
    model_store.write_json(str(tmp_path / "sub" / "refs.json"), {"a": 1})
    sglang_deployment.atomic_write(str(tmp_path / "env"), b"K=V\n", 0o600, os.getuid(), os.getgid())
    assert calls == ["b.json", "refs.json", "env"]
    assert stat.S_IMODE((tmp_path / "b.json").stat().st_mode) == 0o644
    assert (tmp_path / "sub" / "refs.json").read_text() == '{\n  "a": 1\n}\n'
    assert stat.S_IMODE((tmp_path / "env").stat().st_mode) == 0o600


def test_deployment_errors_keep_their_wording(tmp_path, monkeypatch):
    monkeypatch.setattr(af.os, "replace", fail_with(errno.ENOSPC))
    with pytest.raises(sglang_deployment.DeploymentError, match=r"cannot write .*/env: No space left on device; "):
        sglang_deployment.atomic_write(str(tmp_path / "env"), b"x", 0o600, os.getuid(), os.getgid())
    with pytest.raises(sglang_deployment.DeploymentError, match=r"cannot point .*/current at a: No space left"):
        sglang_deployment._atomic_symlink("a", str(tmp_path / "current"))
    assert names(tmp_path) == []


def test_model_store_point_link(tmp_path):
    link = tmp_path / "current" / "tiny"
    assert model_store.point_link(str(link), "../x/1") is True
    assert model_store.point_link(str(link), "../x/1") is False
    assert os.readlink(link) == "../x/1"
