#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_store_fetch
short_description: Fetch one model snapshot into the host's model store, by resolved commit, verified
version_added: "0.1.0"
description:
  - Resolves O(revision) (a branch, tag or commit) to a commit once and records it, so later runs
    ask the Hub nothing for that revision.
  - Downloads the repository's files at that commit with C(huggingface_hub) into
    C(<store>/<org>/<repo>/<commit>/) (through a C(.partial) directory, so a server never sees half
    a snapshot and an interrupted download resumes), after checking that the sizes the Hub reports
    fit in the free space.
  - Verifies every file against the Hub's metadata (sha256 of LFS files, git blob id of the others,
    and the size), fetches a failing file again once, and records what was verified.
  - Points C(<store>/current/<name>) at the snapshot.
  - A snapshot already verified is checked by size (O(verify=quick)) or re-hashed (O(verify=full))
    and nothing is downloaded.
  - Must run with a Python that has C(huggingface_hub) (the model_store role's venv). The token is
    an option that is never logged (it travels in the module's arguments, not on a command line).
author:
  - gpufleet.sglang contributors (!UNKNOWN)
options:
  store:
    description: The store directory.
    type: path
    required: true
  name:
    description: The model's name in the inventory (the C(current) link's name).
    type: str
    required: true
  repo:
    description: The repository, C(<org>/<name>).
    type: str
    required: true
  revision:
    description: A branch, tag or 40-hex commit.
    type: str
    default: main
  source:
    description:
      - C(hub) - the Hub, or a mirror at O(endpoint).
      - C(local) - a directory at O(local_path) holding the snapshot (for example on NFS).
    type: str
    choices: [hub, local]
    default: hub
  endpoint:
    description: A Hub mirror's URL (what C(HF_ENDPOINT) sets); empty for the Hub itself.
    type: str
    default: ""
  local_path:
    description: With O(source=local), the directory holding the snapshot (for example on NFS).
    type: path
  include:
    description: Glob patterns of files to fetch (all when empty).
    type: list
    elements: str
    default: []
  exclude:
    description: Glob patterns of files to leave out.
    type: list
    elements: str
    default: []
  verify:
    description: How an existing snapshot is checked; C(full) re-hashes every file.
    type: str
    choices: [quick, full]
    default: quick
  refresh:
    description: Resolve a branch or tag again (a branch may have moved) instead of using the recorded commit.
    type: bool
    default: false
  reserve_bytes:
    description: Bytes that must stay free in the store after the download.
    type: int
    default: 1073741824
  token:
    description: A Hugging Face token for gated or private repositories; never logged.
    type: str
  max_workers:
    description: Parallel file downloads.
    type: int
    default: 8
attributes:
  check_mode:
    support: full
    description: Resolves the revision and reports what would be downloaded; writes nothing.
  diff_mode:
    support: none
    description: No file content is shown.
notes:
  - Progress (bytes done, total, rate) is written to C(<store>/.gpufleet/progress-<name>.json) while it runs,
    for the role's polling task.
requirements:
  - huggingface_hub (in the Python that runs the module)
"""

EXAMPLES = r"""
- name: Fetch GLM-5-NVFP4 at a pinned commit
  gpufleet.sglang.model_store_fetch:
    store: /srv/gpufleet/models
    name: glm5
    repo: zai-org/GLM-5-NVFP4
    revision: main
    token: "{{ vault_hf_token }}"
  vars:
    ansible_python_interpreter: /opt/gpufleet/hf-venv/bin/python
"""

RETURN = r"""
commit:
  description: The resolved commit.
  returned: success
  type: str
model_path:
  description: The snapshot directory (what a server's C(--model-path) points at).
  returned: success
  type: str
total_bytes:
  description: Bytes in the snapshot.
  returned: success
  type: int
file_count:
  description: Files in the snapshot.
  returned: success
  type: int
verified:
  description: Whether every file matched the Hub's metadata (C(quick) checks sizes of a snapshot verified before).
  returned: success
  type: bool
downloaded_bytes:
  description: Bytes downloaded by this run.
  returned: success
  type: int
download_mb_per_s:
  description: Download rate of this run (MiB/s); 0 when nothing was downloaded.
  returned: success
  type: float
verify_mb_per_s:
  description: Hashing rate of the verification (MiB/s); 0 when only sizes were checked.
  returned: success
  type: float
link:
  description: The C(current/<name>) link pointing at the snapshot.
  returned: success
  type: str
refetched:
  description: Files that failed verification and were fetched again.
  returned: success
  type: list
  elements: str
"""

import os
import shutil
import threading
import time
import traceback
from typing import Any

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpufleet.sglang.plugins.module_utils import model_store as ms

try:
    import huggingface_hub
    from huggingface_hub import HfApi, hf_hub_download, snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from huggingface_hub.utils import filter_repo_objects

    HF_IMPORT_ERROR = None
except ImportError:
    HF_IMPORT_ERROR = traceback.format_exc()


def hub_error(name: str, repo: str, revision: str, exc: Exception) -> str:
    """A message that says which model, what the Hub said and what to do (never the token)."""
    if isinstance(exc, RevisionNotFoundError):
        return f"model {name}: revision {revision!r} not found in {repo} (check model's revision)"
    if isinstance(exc, GatedRepoError):
        return (
            f"model {name}: the Hub refused {repo} (gated or private, {exc.response.status_code}): set a token with "
            "access to it (model_store_hf_token, from vault_hf_token)"
        )
    if isinstance(exc, RepositoryNotFoundError):
        return f"model {name}: repository {repo} not found, or private and no valid token was given"
    if isinstance(exc, HfHubHTTPError):
        return f"model {name}: the Hub answered {exc.response.status_code} for {repo}@{revision}"
    return f"model {name}: cannot reach the Hub for {repo}@{revision}: {type(exc).__name__}"


class Progress:
    """Writes bytes done / total / rate of a running download every second, for the polling task."""

    def __init__(self, path: str, name: str, base: str, total: int, start: int) -> None:
        self.path, self.name, self.base, self.total, self.start = path, name, base, total, start
        self.stop = threading.Event()
        self.began = time.monotonic()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def write(self, phase: str) -> None:
        done = ms.bytes_on_disk(self.base) if os.path.isdir(self.base) else self.total
        elapsed = max(time.monotonic() - self.began, 1e-6)
        ms.write_json(
            self.path,
            {
                "name": self.name,
                "phase": phase,
                "done": min(done, self.total),
                "total": self.total,
                "rate_mb_per_s": round(max(done - self.start, 0) / elapsed / 1048576, 1),
                "elapsed_s": round(elapsed, 1),
            },
        )

    def run(self) -> None:
        while not self.stop.wait(1.0):
            self.write("downloading")

    def __enter__(self) -> Progress:
        self.write("downloading")
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def entries_from_hub(api: Any, repo: str, commit: str, include: list[str], exclude: list[str]) -> list[dict]:
    files = [f for f in api.list_repo_tree(repo_id=repo, revision=commit, recursive=True) if hasattr(f, "blob_id")]
    keep = set(
        filter_repo_objects([f.path for f in files], allow_patterns=include or None, ignore_patterns=exclude or None)
    )
    return [
        {"path": f.path, "size": f.size, "sha256": f.lfs.sha256 if f.lfs else "", "oid": "" if f.lfs else f.blob_id}
        for f in files
        if f.path in keep
    ]


def entries_from_local(base: str, include: list[str], exclude: list[str]) -> list[dict]:
    """A local snapshot's files, checked against its own record when it carries one."""
    recorded = ms.read_json(os.path.join(base, ms.MARKER), None)
    if recorded is not None:
        return recorded["files"]
    paths = []
    for dirpath, _dirs, files in os.walk(base):
        for name in files:
            rel = os.path.relpath(os.path.join(dirpath, name), base)
            if not rel.startswith(".cache" + os.sep):
                paths.append(rel)
    keep = filter_repo_objects(sorted(paths), allow_patterns=include or None, ignore_patterns=exclude or None)
    out = []
    for rel in keep:
        oid, sha256, size = ms.git_blob_oid_and_sha256(os.path.join(base, rel))
        out.append({"path": rel, "size": size, "sha256": sha256, "oid": oid})
    return out


def copy_local(src: str, dest: str, entries: list[dict]) -> None:
    for entry in entries:
        target = os.path.join(dest, entry["path"])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.isfile(target) and os.path.getsize(target) == entry["size"]:
            continue
        shutil.copyfile(os.path.join(src, entry["path"]), target + ".incomplete")
        os.replace(target + ".incomplete", target)


def resolve(module: AnsibleModule, api: Any, p: dict, refs_path: str) -> tuple[str, bool]:
    """The commit for the revision, and whether a new resolution was recorded."""
    if ms.is_commit(p["revision"]):
        return p["revision"], False
    refs = ms.read_json(refs_path, {})
    key = f"{p['endpoint'] or 'hub'} {p['repo']}@{p['revision']}"
    if key in refs and not p["refresh"]:
        return refs[key], False
    try:
        commit = api.repo_info(repo_id=p["repo"], revision=p["revision"]).sha
    except Exception as exc:
        module.fail_json(msg=hub_error(p["name"], p["repo"], p["revision"], exc))
    if not module.check_mode:
        refs[key] = commit
        ms.write_json(refs_path, refs)
    return commit, refs.get(key) != commit or key not in refs


def fetch_and_verify(module: AnsibleModule, p: dict, commit: str, partial: str, entries: list[dict]) -> dict:
    """Download into the .partial directory, verify, fetch failures again once."""
    total = sum(e["size"] for e in entries)
    stat = os.statvfs(p["store"])
    needed = ms.space_needed(partial, entries)
    try:
        ms.check_space(p["name"], needed, stat.f_bavail * stat.f_frsize, p["reserve_bytes"])
    except ms.ModelStoreError as exc:
        module.fail_json(msg=str(exc), needed_bytes=needed, free_bytes=stat.f_bavail * stat.f_frsize)
    os.makedirs(partial, exist_ok=True)
    progress_path = os.path.join(p["store"], ".gpufleet", f"progress-{p['name']}.json")
    start = ms.bytes_on_disk(partial)
    began = time.monotonic()
    with Progress(progress_path, p["name"], partial, total, start) as progress:
        try:
            if p["source"] == "local":
                copy_local(p["local_path"], partial, entries)
            else:
                snapshot_download(
                    p["repo"],
                    revision=commit,
                    local_dir=partial,
                    allow_patterns=[e["path"] for e in entries],
                    endpoint=p["endpoint"] or None,
                    max_workers=p["max_workers"],
                    token=p["token"] or None,
                )
        except Exception as exc:
            module.fail_json(
                msg=hub_error(p["name"], p["repo"], commit, exc) + f" (partial download kept in {partial})"
            )
        downloaded = max(ms.bytes_on_disk(partial) - start, 0)
        seconds = time.monotonic() - began
        progress.write("verifying")
        failures, checked, verify_s = ms.verify_all(partial, entries, full=True)
        refetched = sorted(failures)
        for path in refetched:
            os.unlink(os.path.join(partial, path))
            if p["source"] == "local":
                module.fail_json(
                    msg=f"model {p['name']}: {path} in {p['local_path']} does not match its record: {failures[path]}"
                )
            hf_hub_download(
                p["repo"],
                path,
                revision=commit,
                local_dir=partial,
                endpoint=p["endpoint"] or None,
                force_download=True,
                token=p["token"] or None,
            )
        if refetched:
            again, _checked, _seconds = ms.verify_all(partial, [e for e in entries if e["path"] in failures], full=True)
            if again:
                module.fail_json(
                    msg=f"model {p['name']}: files still fail verification after a second fetch: "
                    + ", ".join(f"{k} ({v})" for k, v in sorted(again.items()))
                )
        progress.write("verified")
    return {
        "downloaded_bytes": downloaded,
        "download_mb_per_s": round(downloaded / max(seconds, 1e-6) / 1048576, 1) if downloaded else 0.0,
        "verify_mb_per_s": round(checked / max(verify_s, 1e-6) / 1048576, 1),
        "refetched": refetched,
    }


ARGUMENT_SPEC = {
    "store": {"type": "path", "required": True},
    "name": {"type": "str", "required": True},
    "repo": {"type": "str", "required": True},
    "revision": {"type": "str", "default": "main"},
    "source": {"type": "str", "choices": ["hub", "local"], "default": "hub"},
    "endpoint": {"type": "str", "default": ""},
    "local_path": {"type": "path"},
    "include": {"type": "list", "elements": "str", "default": []},
    "exclude": {"type": "list", "elements": "str", "default": []},
    "verify": {"type": "str", "choices": ["quick", "full"], "default": "quick"},
    "refresh": {"type": "bool", "default": False},
    "reserve_bytes": {"type": "int", "default": 1073741824},
    "max_workers": {"type": "int", "default": 8},
    "token": {"type": "str", "no_log": True},
}


def no_stats() -> dict[str, Any]:
    return {"downloaded_bytes": 0, "download_mb_per_s": 0.0, "verify_mb_per_s": 0.0, "refetched": []}


def check_snapshot(
    module: AnsibleModule, p: dict, commit: str, final: str, entries: list[dict], *, result: dict
) -> tuple[dict[str, Any], bool]:
    """Verify a snapshot already in the store; repair the files that fail (fetched again into
    .partial, verified, moved over). Returns (stats, whether anything changed or would)."""
    stats = no_stats()
    partial = final + ".partial"
    failures, checked, verify_s = ms.verify_all(final, entries, full=p["verify"] == "full")
    if p["verify"] == "full":
        stats["verify_mb_per_s"] = round(checked / max(verify_s, 1e-6) / 1048576, 1)
    if not failures:
        return stats, False
    if module.check_mode:
        result["would_refetch"] = sorted(failures)
        return stats, True
    stats = fetch_and_verify(module, p, commit, partial, [e for e in entries if e["path"] in failures])
    for entry in entries:
        if entry["path"] in failures:
            os.replace(os.path.join(partial, entry["path"]), os.path.join(final, entry["path"]))
    shutil.rmtree(partial)
    stats["refetched"] = sorted(failures)
    return stats, True


def list_entries(module: AnsibleModule, api: Any, p: dict, commit: str) -> list[dict]:
    """The files of the snapshot (from the local directory or the Hub), after include/exclude."""
    try:
        if p["source"] == "local":
            entries = entries_from_local(p["local_path"], p["include"], p["exclude"])
        else:
            entries = entries_from_hub(api, p["repo"], commit, p["include"], p["exclude"])
    except ms.ModelStoreError as exc:
        module.fail_json(msg=f"model {p['name']}: {exc}")
    except Exception as exc:
        module.fail_json(msg=hub_error(p["name"], p["repo"], commit, exc))
    if not entries:
        module.fail_json(msg=f"model {p['name']}: no file of {p['repo']}@{commit} matches include/exclude")
    return entries


def fetch_snapshot(module: AnsibleModule, p: dict, commit: str, final: str, entries: list[dict]) -> dict[str, Any]:
    """Download a new snapshot into .partial, verify it, write its marker and move it into place."""
    partial = final + ".partial"
    stats = fetch_and_verify(module, p, commit, partial, entries)
    shutil.rmtree(os.path.join(partial, ".cache"), ignore_errors=True)
    ms.write_json(
        os.path.join(partial, ms.MARKER),
        {
            "repo": p["repo"],
            "commit": commit,
            "verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "files": entries,
        },
    )
    os.replace(partial, final)
    return stats


def update_link(module: AnsibleModule, link: str, link_target: str) -> bool:
    """Point the model's name at the snapshot; True when it changed (or would, in check mode)."""
    if not module.check_mode:
        return ms.point_link(link, link_target)
    return os.path.islink(link) and os.readlink(link) != link_target


def run_module() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    if HF_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("huggingface_hub"), exception=HF_IMPORT_ERROR)
    p = dict(module.params)
    errors = ms.check_model(p)
    if errors:
        module.fail_json(msg="; ".join(errors))
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    api = HfApi(endpoint=p["endpoint"] or None, token=p["token"] or None)
    refs_path = os.path.join(p["store"], ".gpufleet", "refs.json")
    commit, new_ref = resolve(module, api, p, refs_path)
    final = ms.snapshot_dir(p["store"], p["repo"], commit)
    link = ms.current_link(p["store"], p["name"])
    link_target = os.path.relpath(final, os.path.dirname(link))
    result: dict[str, Any] = {"commit": commit, "model_path": final, "huggingface_hub": huggingface_hub.__version__}
    marker = ms.read_json(os.path.join(final, ms.MARKER), None)
    if marker is not None:
        entries = marker["files"]
        stats, changed = check_snapshot(module, p, commit, final, entries, result=result)
    else:
        entries = list_entries(module, api, p, commit)
        changed = True
        if module.check_mode:
            stats = no_stats()
            result["would_download_bytes"] = ms.space_needed(final + ".partial", entries)
        else:
            stats = fetch_snapshot(module, p, commit, final, entries)
    changed = update_link(module, link, link_target) or changed or new_ref
    result.update(stats)
    result.update(
        changed=changed,
        total_bytes=sum(e["size"] for e in entries),
        file_count=len(entries),
        verified=not module.check_mode or marker is not None,
        link=link,
    )
    module.exit_json(**result)


def main() -> None:
    run_module()


if __name__ == "__main__":
    main()
