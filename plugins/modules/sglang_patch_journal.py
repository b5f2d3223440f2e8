#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_patch_journal
short_description: Crash-safe backups around source patches, finished or undone by the next run
version_added: "0.1.0"
description:
  - Keeps a journal directory (next to the release) of the files a patch will touch, so that a run
    killed between applying a patch and verifying it leaves enough behind for the next run to put
    the tree back exactly as it was.
  - O(state=begin) reads the patch file, lists the files it touches (refusing absolute paths and
    C(..)), copies each existing one into the journal (mode and owner kept) and records the ones the
    patch will create, then writes C(journal.json) atomically. Files already listed keep their
    first backup, so several patches of one run are undone together.
  - O(state=recover) undoes what C(journal.json) lists, if there is one. Each backed-up file is
    written back through a temporary file renamed over it (never copied in place); each file the
    patch created is removed with the directories it created, then the journal is removed. It is
    safe to run again after being killed. Without C(journal.json) (nothing was patched yet) it
    only removes the journal.
  - O(state=commit) removes the journal once the patched tree is verified.
author:
  - gpufleet.sglang contributors (!UNKNOWN)
options:
  journal:
    description: The journal directory (created by O(state=begin)).
    type: path
    required: true
  root:
    description: The tree the patches apply to (for SGLang, the C(site-packages) directory).
    type: path
    required: true
  state:
    description: What to do, see the description.
    type: str
    choices: [begin, recover, commit]
    required: true
  patch:
    description: The unified diff about to be applied (O(state=begin) only).
    type: path
  strip:
    description: Leading path components the patch command strips (its C(-p)).
    type: int
    default: 1
attributes:
  check_mode:
    support: full
    description: >-
      O(state=recover) reports what it would restore and removes only scratch files; O(state=begin) and
      O(state=commit) keep the backups (nothing is patched in check mode) and remove only scratch files.
  diff_mode:
    support: none
    description: The patch itself is what a diff would show; the role keeps it with the release.
notes:
  - Stdlib only; runs on the target host.
"""

EXAMPLES = r"""
- name: Finish or undo an interrupted patch run
  gpufleet.sglang.sglang_patch_journal:
    journal: /opt/sglang/releases/.sglang-0.5.12.post1-abc.patch-journal
    root: /opt/sglang/releases/sglang-0.5.12.post1-abc/venv/lib/python3.11/site-packages
    state: recover

- name: Back up what the patch touches before applying it
  gpufleet.sglang.sglang_patch_journal:
    journal: /opt/sglang/releases/.sglang-0.5.12.post1-abc.patch-journal
    root: /opt/sglang/releases/sglang-0.5.12.post1-abc/venv/lib/python3.11/site-packages
    state: begin
    patch: /opt/sglang/releases/.sglang-0.5.12.post1-abc.patch-journal/scratch/flashinfer-autotune.patch
"""

RETURN = r"""
pending:
  description: Whether a C(journal.json) was found (an interrupted or failed run) before this call.
  returned: always
  type: bool
  sample: false
restored:
  description: Files written back from their backups (relative to O(root)); with O(state=recover).
  returned: always
  type: list
  elements: str
  sample: [sglang/srt/model_executor/model_runner.py]
removed:
  description: Files the patches had created, removed (relative to O(root)); with O(state=recover).
  returned: always
  type: list
  elements: str
  sample: []
files:
  description: Files the journal lists after this call (relative to O(root)).
  returned: always
  type: list
  elements: str
  sample: [sglang/srt/model_executor/model_runner.py]
"""

import contextlib
import os
import shutil
import stat

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.atomic_file import (
    FileWriteError,
    fsync_dir,
    replace_file,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.patch_journal import (
    FILES_DIR,
    JOURNAL_FILE,
    SCRATCH_DIR,
    JournalError,
    dump_journal,
    load_journal,
    missing_dirs,
    new_entries,
    patch_targets,
)


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _owner(st: os.stat_result) -> dict:
    return {"uid": st.st_uid, "gid": st.st_gid} if os.geteuid() == 0 else {}


def _load(journal: str) -> dict | None:
    path = os.path.join(journal, JOURNAL_FILE)
    if not os.path.exists(path):
        return None
    return load_journal(_read(path), path)


def _inside(root: str, relpath: str) -> str:
    return os.path.join(root, *relpath.split("/"))


def _remove_scratch(journal: str) -> None:
    """Remove the scratch files (rendered patches), and the journal directory if that empties it."""
    scratch = os.path.join(journal, SCRATCH_DIR)
    if os.path.isdir(scratch):
        shutil.rmtree(scratch)
    with contextlib.suppress(OSError):
        os.rmdir(journal)  # only when nothing else is left in it


def _remove_journal(journal: str) -> None:
    """Drop journal.json first (the commit point), then the rest."""
    path = os.path.join(journal, JOURNAL_FILE)
    if os.path.exists(path):
        os.unlink(path)
        fsync_dir(journal)
    if os.path.isdir(journal):
        shutil.rmtree(journal)
        fsync_dir(os.path.dirname(os.path.abspath(journal)))


def _restore_entry(journal: str, root: str, entry: dict, check_mode: bool) -> bool:
    """Put back the backup of a file that existed before the patch; True when it differed."""
    target = _inside(root, entry["path"])
    backup = _inside(os.path.join(journal, FILES_DIR), entry["path"])
    data = _read(backup)
    st = os.stat(backup)
    if os.path.isfile(target) and not os.path.islink(target):
        now = os.stat(target)
        if _read(target) == data and stat.S_IMODE(now.st_mode) == stat.S_IMODE(st.st_mode):
            return False
    if not check_mode:
        replace_file(target, data, mode=stat.S_IMODE(st.st_mode), prefix=".gpufleet-restore.", **_owner(st))
    return True


def _remove_entry(root: str, entry: dict, check_mode: bool) -> bool:
    """Remove a file the patch created (and the directories it made, if empty); True when it existed."""
    target = _inside(root, entry["path"])
    existed = os.path.lexists(target)
    if existed and not check_mode:
        os.unlink(target)
        fsync_dir(os.path.dirname(target))
    for directory in reversed(entry.get("created_dirs", [])):
        if not check_mode:
            with contextlib.suppress(FileNotFoundError, OSError):
                os.rmdir(_inside(root, directory))  # only if the patch left it empty
    return existed


def _finish(journal: str, check_mode: bool) -> None:
    if check_mode:
        _remove_scratch(journal)
    else:
        _remove_journal(journal)


def recover(journal: str, root: str, check_mode: bool) -> dict:
    """Undo what journal.json lists; see the module description."""
    result = {"pending": False, "restored": [], "removed": [], "files": [], "changed": False}
    if not os.path.isdir(journal):
        return result
    entries = (_load(journal) or {}).get("entries")
    if entries is None:
        # No journal.json: killed before it was written, so nothing was patched yet.
        _finish(journal, check_mode)
        return result
    result["pending"] = True
    result["files"] = [e["path"] for e in entries]
    for entry in entries:
        if entry["existed"]:
            if _restore_entry(journal, root, entry, check_mode):
                result["restored"].append(entry["path"])
        elif _remove_entry(root, entry, check_mode):
            result["removed"].append(entry["path"])
    result["changed"] = bool(result["restored"] or result["removed"])
    _finish(journal, check_mode)
    return result


def begin(journal: str, root: str, patch: str, strip: int, check_mode: bool) -> dict:
    """Back up the files ``patch`` touches and list them in journal.json."""
    with open(patch, encoding="utf-8") as handle:
        targets = patch_targets(handle.read(), strip)
    current = _load(journal) or {"entries": []}
    result = {"pending": bool(current["entries"]), "restored": [], "removed": [], "changed": False}
    existing, absent = [], {}
    for relpath in targets:
        target = _inside(root, relpath)
        if os.path.islink(target):
            raise JournalError(f"patch target {target} is a symlink; refusing to patch through it")
        if os.path.exists(target):
            if not os.path.isfile(target):
                raise JournalError(f"patch target {target} is not a regular file")
            existing.append(relpath)
        else:
            absent[relpath] = missing_dirs(relpath, lambda d: os.path.isdir(_inside(root, d)))
    added = new_entries(current, targets, existing, absent)
    entries = current["entries"] + added
    result["files"] = [e["path"] for e in entries]
    if check_mode or not added:
        return result
    os.makedirs(journal, mode=0o700, exist_ok=True)
    for entry in added:
        if entry["existed"]:
            source = _inside(root, entry["path"])
            st = os.stat(source)
            backup = _inside(os.path.join(journal, FILES_DIR), entry["path"])
            os.makedirs(os.path.dirname(backup), mode=0o700, exist_ok=True)
            replace_file(backup, _read(source), mode=stat.S_IMODE(st.st_mode), prefix=".gpufleet-backup.", **_owner(st))
    replace_file(os.path.join(journal, JOURNAL_FILE), dump_journal(entries), mode=0o600, prefix=".gpufleet-journal.")
    result["changed"] = True
    return result


def commit(journal: str, check_mode: bool) -> dict:
    """Remove the journal of a verified run (check mode: only its scratch files)."""
    result = {"pending": False, "restored": [], "removed": [], "files": [], "changed": False}
    if not os.path.isdir(journal):
        return result
    loaded = _load(journal)
    result["pending"] = loaded is not None
    result["files"] = [e["path"] for e in (loaded or {}).get("entries", [])]
    if check_mode:
        _remove_scratch(journal)
    else:
        _remove_journal(journal)
    return result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "journal": {"type": "path", "required": True},
            "root": {"type": "path", "required": True},
            "state": {"type": "str", "choices": ["begin", "recover", "commit"], "required": True},
            "patch": {"type": "path"},
            "strip": {"type": "int", "default": 1},
        },
        required_if=[("state", "begin", ["patch"])],
        supports_check_mode=True,
    )
    p = module.params
    journal, root = p["journal"], p["root"]
    if not os.path.isdir(root):
        module.fail_json(msg=f"patched tree {root} is not a directory", journal=journal)
    try:
        if p["state"] == "recover":
            result = recover(journal, root, module.check_mode)
        elif p["state"] == "begin":
            result = begin(journal, root, p["patch"], p["strip"], module.check_mode)
        else:
            result = commit(journal, module.check_mode)
    except JournalError as exc:
        module.fail_json(msg=f"patch journal {journal}: {exc}", journal=journal)
    except FileWriteError as exc:
        module.fail_json(msg=f"patch journal {journal}: {exc}", journal=journal)
    except (OSError, UnicodeDecodeError) as exc:
        where = getattr(exc, "filename", None) or journal
        module.fail_json(
            msg=f"patch journal {journal}: {where}: {getattr(exc, 'strerror', None) or exc}", journal=journal
        )
    module.exit_json(journal=journal, **result)


if __name__ == "__main__":
    main()
