# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The patch journal: pure functions, and the module run as Ansible runs it (an args file).

The on-disk state a killed run leaves is made for real: the module's ``begin`` writes the
journal, GNU patch applies the diff, and the process stops there (as a kill between apply and
verify would). A restore killed half-way is made with RLIMIT_FSIZE: the write of the restored
file fails, and the file must still be whole.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from lib.module import run_module as run_module_at

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.patch_journal import (
    JournalError,
    dump_journal,
    load_journal,
    missing_dirs,
    new_entries,
    patch_targets,
)

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "plugins" / "modules" / "sglang_patch_journal.py"

ORIGINAL = "".join(f"line {i}\n" for i in range(1, 200))
PATCH = """--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -1,3 +1,3 @@
-line 1
+LINE ONE
 line 2
 line 3
--- /dev/null
+++ b/pkg/new/sub/added.py
@@ -0,0 +1 @@
+created by the patch
"""


# --------------------------------------------------------------------------- pure functions


def test_patch_targets_strips_and_names_created_and_deleted_files():
    deleted = "--- a/pkg/old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
    assert patch_targets(PATCH + deleted, 1) == ["pkg/mod.py", "pkg/new/sub/added.py", "pkg/old.py"]
    assert patch_targets("--- x/y/a.py\t2020-01-01\n+++ x/y/a.py\t2020-01-02\n", 2) == ["a.py"]


@pytest.mark.parametrize(
    ("text", "strip", "message"),
    [
        ("--- a/../etc/passwd\n+++ b/../etc/passwd\n", 1, "leaves the patched tree"),
        ("--- /etc/passwd\n+++ /etc/passwd\n", 0, "absolute path '/etc/passwd'"),
        ("--- a\n+++ b\n", 1, "has no component left after stripping 1"),
        ("just text\n", 1, "the patch names no file"),
        ('--- "a/x y"\n+++ "b/x y"\n', 1, "quoted file name"),
        ("--- a/x\n+++ b/x\n", -1, "strip must be >= 0"),
    ],
)
def test_patch_targets_refuses(text, strip, message):
    with pytest.raises(JournalError, match=message):
        patch_targets(text, strip)


def test_missing_dirs_and_first_backup_wins():
    present = {"pkg"}
    assert missing_dirs("pkg/new/sub/added.py", present.__contains__) == ["pkg/new", "pkg/new/sub"]
    assert missing_dirs("pkg/mod.py", present.__contains__) == []
    journal = {"entries": [{"path": "pkg/mod.py", "existed": True, "created_dirs": []}]}
    added = new_entries(journal, ["pkg/mod.py", "pkg/x.py"], [], {"pkg/x.py": ["pkg"]})
    assert added == [{"path": "pkg/x.py", "existed": False, "created_dirs": ["pkg"]}]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{", "is not a patch journal"),
        (b'{"version": 2, "entries": []}', "is not a version 1 patch journal"),
        (b'{"version": 1, "entries": [{"path": "../x", "existed": true}]}', "leaves the patched tree"),
        (b'{"version": 1, "entries": [{"path": "/x", "existed": true}]}', "leaves the patched tree"),
        (b'{"version": 1, "entries": [{"path": "x", "existed": false, "created_dirs": ["/"]}]}', "leaves"),
        (b'{"version": 1, "entries": {}}', "has no list of entries"),
    ],
)
def test_load_journal_refuses_what_it_did_not_write(data, message):
    with pytest.raises(JournalError, match=message):
        load_journal(data, "J/journal.json")


def test_dump_load_round_trip():
    entries = [{"path": "a/b.py", "existed": True, "created_dirs": []}]
    assert load_journal(dump_journal(entries), "j")["entries"] == entries


# --------------------------------------------------------------------------- the module


def run_module(args: dict, workdir: Path, *, fsize: int | None = None) -> tuple[int, dict]:
    return run_module_at(MODULE, args, workdir, fsize=fsize)


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "site"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text(ORIGINAL)
    (root / "pkg" / "mod.py").chmod(0o640)
    patch = tmp_path / "change.patch"
    patch.write_text(PATCH)
    return {"root": root, "journal": tmp_path / ".rel.patch-journal", "patch": patch, "work": tmp_path}


def interrupted(tree: dict[str, Path]) -> None:
    """What a run killed between apply and verify leaves: journal written, patch applied."""
    rc, result = run_module(
        {"journal": str(tree["journal"]), "root": str(tree["root"]), "state": "begin", "patch": str(tree["patch"])},
        tree["work"],
    )
    assert rc == 0, result
    assert result["files"] == ["pkg/mod.py", "pkg/new/sub/added.py"]
    subprocess.run(
        ["patch", "--batch", "-p1", "-d", str(tree["root"]), "-i", str(tree["patch"])], check=True, capture_output=True
    )
    assert (tree["root"] / "pkg" / "mod.py").read_text().startswith("LINE ONE\n")
    assert (tree["root"] / "pkg" / "new" / "sub" / "added.py").exists()


def test_next_run_restores_removes_created_files_and_the_journal(tree):
    interrupted(tree)
    args = {"journal": str(tree["journal"]), "root": str(tree["root"]), "state": "recover"}

    rc, planned = run_module({**args, "_ansible_check_mode": True}, tree["work"])
    assert rc == 0, planned
    assert planned["changed"] is True
    assert planned["restored"] == ["pkg/mod.py"]
    assert planned["removed"] == ["pkg/new/sub/added.py"]
    assert (tree["journal"] / "journal.json").exists()  # check mode keeps the undo information
    assert (tree["root"] / "pkg" / "mod.py").read_text().startswith("LINE ONE\n")

    rc, result = run_module(args, tree["work"])
    assert rc == 0, result
    assert result["pending"] is True
    assert result["changed"] is True
    assert (tree["root"] / "pkg" / "mod.py").read_text() == ORIGINAL
    assert (tree["root"] / "pkg" / "mod.py").stat().st_mode & 0o7777 == 0o640
    assert sorted(os.listdir(tree["root"] / "pkg")) == ["mod.py"]  # created file and its dirs gone, no 0-byte file
    assert not tree["journal"].exists()

    rc, again = run_module(args, tree["work"])
    assert rc == 0, again
    assert again["changed"] is False
    assert again["pending"] is False


def test_restore_killed_half_way_leaves_the_file_whole_and_the_journal(tree):
    interrupted(tree)
    patched = (tree["root"] / "pkg" / "mod.py").read_bytes()
    args = {"journal": str(tree["journal"]), "root": str(tree["root"]), "state": "recover"}
    rc, result = run_module(args, tree["work"], fsize=100)
    assert rc != 0
    assert f"cannot write {tree['root'] / 'pkg' / 'mod.py'}: File too large" in result["msg"]
    assert (tree["root"] / "pkg" / "mod.py").read_bytes() == patched  # never truncated in place
    assert sorted(os.listdir(tree["root"] / "pkg")) == ["mod.py", "new"]  # no temp file
    assert (tree["journal"] / "journal.json").exists()

    rc, result = run_module(args, tree["work"])
    assert rc == 0, result
    assert (tree["root"] / "pkg" / "mod.py").read_text() == ORIGINAL
    assert not tree["journal"].exists()


def test_second_begin_keeps_the_first_backup(tree):
    interrupted(tree)
    rc, result = run_module(
        {"journal": str(tree["journal"]), "root": str(tree["root"]), "state": "begin", "patch": str(tree["patch"])},
        tree["work"],
    )
    assert rc == 0, result
    assert result["changed"] is False
    assert (tree["journal"] / "files" / "pkg" / "mod.py").read_text() == ORIGINAL


def test_commit_removes_the_journal_and_check_mode_only_scratch(tree):
    interrupted(tree)
    (tree["journal"] / "scratch").mkdir()
    (tree["journal"] / "scratch" / "x.patch").write_text(PATCH)
    args = {"journal": str(tree["journal"]), "root": str(tree["root"]), "state": "commit"}
    rc, result = run_module({**args, "_ansible_check_mode": True}, tree["work"])
    assert rc == 0, result
    assert sorted(os.listdir(tree["journal"])) == ["files", "journal.json"]
    rc, result = run_module(args, tree["work"])
    assert rc == 0, result
    assert not tree["journal"].exists()
    assert (tree["root"] / "pkg" / "mod.py").read_text().startswith("LINE ONE\n")  # commit keeps the patch


def test_patch_escaping_the_tree_is_refused_before_anything_is_written(tree):
    tree["patch"].write_text("--- a/../outside.py\n+++ b/../outside.py\n@@ -0,0 +1 @@\n+x\n")
    rc, result = run_module(
        {"journal": str(tree["journal"]), "root": str(tree["root"]), "state": "begin", "patch": str(tree["patch"])},
        tree["work"],
    )
    assert rc != 0
    assert "leaves the patched tree ('..')" in result["msg"]
    assert not tree["journal"].exists()


def test_corrupt_journal_is_named_and_kept(tree):
    tree["journal"].mkdir()
    (tree["journal"] / "journal.json").write_text("{not json")
    rc, result = run_module(
        {"journal": str(tree["journal"]), "root": str(tree["root"]), "state": "recover"}, tree["work"]
    )
    assert rc != 0
    assert f"{tree['journal'] / 'journal.json'} is not a patch journal" in result["msg"]
    assert (tree["journal"] / "journal.json").read_text() == "{not json"
    assert (tree["root"] / "pkg" / "mod.py").read_text() == ORIGINAL


def test_journal_without_journal_json_is_removed_and_nothing_restored(tree):
    """Killed inside begin, before journal.json: nothing was patched, the partial backups go."""
    (tree["journal"] / "files" / "pkg").mkdir(parents=True)
    (tree["journal"] / "files" / "pkg" / "mod.py").write_text("partial")
    (tree["root"] / "pkg" / "mod.py").write_text("edited by hand after the kill\n")
    rc, result = run_module(
        {"journal": str(tree["journal"]), "root": str(tree["root"]), "state": "recover"}, tree["work"]
    )
    assert rc == 0, result
    assert result["changed"] is False
    assert result["pending"] is False
    assert not tree["journal"].exists()
    assert (tree["root"] / "pkg" / "mod.py").read_text() == "edited by hand after the kill\n"
