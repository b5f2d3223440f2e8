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
  - Trusts nothing the Hub, a mirror, a local source or a record on disk says. The commit must be 40
    lowercase hex digits and every file name a plain relative path before either becomes a path;
    records of the wrong shape, and a FIFO, directory, device or symlink where a record should be,
    are named errors; a file that grows past its declared size is cut at the first byte past it and
    removed; a symlink in a local source is refused, never followed.
  - Every file comes over HTTP through C(huggingface_hub), whose answers are asked uncompressed and
    read through a size cap; Xet transfers (C(hf_xet)) are turned off, since their bytes would not pass
    that cap.
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
    description:
      - A Hub mirror's URL (what C(HF_ENDPOINT) sets); empty for the Hub itself.
      - Only C(http://host[:port][/path]) or C(https://host[:port][/path]) is accepted. A URL that
        carries credentials (user information such as C(user:token@), a query string such as
        C(?token=), a fragment) is refused before anything is asked or written, and its message shows
        the scheme and host at most; give the mirror's token as O(token) instead.
      - Never logged (a mirror URL is the one option a credential could have been pasted into).
    type: str
    default: ""
  local_path:
    description:
      - With O(source=local), the directory holding the snapshot (for example on NFS).
      - The directory itself may be reached through a symlink; nothing in it may be one (a link to a
        file or directory, inside the source or out of it, is refused, never followed).
      - When it holds a C(.gpufleet-model.json) (a copy of another host's store), that record must be
        for O(repo) at O(revision).
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
  download:
    description:
      - With C(false), a look that downloads nothing. A snapshot already in the store, verified and
        found whole by O(verify=quick), is checked and linked as with C(true) and the result is the
        same; anything that needs the Hub's files (no snapshot of the commit yet, a file to fetch
        again) or a revision to record anew returns RV(pending) instead, with nothing written. The
        model_store role looks this way first, synchronously, and starts the followed (async)
        download only for a pending model, so an unchanged store costs one module call.
      - No effect in check mode, which never downloads.
    type: bool
    default: true
  deadline_s:
    description:
      - Seconds the whole call may take; C(0) for no limit. At the deadline the module stops itself (the
        call in progress is interrupted) and fails naming the deadline, so a Hub that answers a byte at a
        time, each byte in time for any per-read timeout, cannot hold it, and no process of it is left
        talking to the Hub after a failed task (Ansible's task C(timeout) ends the task but leaves the
        module's process running).
      - The model_store role sets it on its look (O(download=false), which writes nothing) to
        C(model_store_download_timeout_s); the followed download is bounded by its C(async) time limit.
    type: int
    default: 0
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
pending:
  description:
    - With O(download=false) outside check mode, C(true) when the model needs what only a download does
      (no verified snapshot of the commit, a file to fetch again, a revision to record anew); only
      RV(commit) and C(changed) (C(false)) come with it then. C(false) otherwise.
  returned: success
  type: bool
"""

import os
import shutil
import signal
import sys
import threading
import time
import traceback
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpufleet.sglang.plugins.module_utils.common import confined_path as cp
from ansible_collections.gpufleet.sglang.plugins.module_utils.common.secret_mask import secret_forms
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang import model_store as ms

# read by huggingface_hub when it is imported: no telemetry, no progress bars, and no Xet transfers
# (hf_xet writes files from its own code, where the size cap below cannot reach)
os.environ.update(HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HUB_DISABLE_XET="1")

try:
    import httpx2
    import huggingface_hub
    from huggingface_hub import HfApi, hf_hub_download, set_client_factory
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from huggingface_hub.utils import filter_repo_objects

    try:  # the library's own client (request ids, offline mode); a plain one where it moved
        from huggingface_hub.utils._http import default_client_factory
    except ImportError:

        def default_client_factory() -> httpx2.Client:
            return httpx2.Client(follow_redirects=True, timeout=None)

    SyncByteStream = httpx2.SyncByteStream
    HF_IMPORT_ERROR = None
except ImportError:
    HF_IMPORT_ERROR = traceback.format_exc()
    SyncByteStream = object


# the file a worker thread is downloading: its entry, whose size caps the answer
CURRENT = threading.local()
# answers other than a file's content so far (file list pages, errors, redirects)
ANSWERS = [0]
ANSWERS_LOCK = threading.Lock()


class CappedStream(SyncByteStream):  # type: ignore[misc,valid-type]
    """A response body read through :func:`model_store.capped`."""

    def __init__(self, inner: Any, limit: int, what: str, error: type[ms.ModelStoreError]) -> None:
        self.inner, self.limit, self.what, self.error = inner, limit, what, error

    def __iter__(self) -> Any:
        yield from ms.capped(self.inner, self.limit, self.what, error=self.error)

    def close(self) -> None:
        self.inner.close()


def ask_plain(request: Any) -> None:
    """Every answer uncompressed, so that the bytes counted are the bytes written."""
    request.headers["Accept-Encoding"] = "identity"


def cap_answer(response: Any) -> None:
    """Cap the body of every answer: a file's content at its declared size (less the part a range
    request already has), anything else (a file list page, an error, a redirect) at MAX_ANSWER_BYTES."""
    request = response.request
    if request.method == "HEAD":
        return
    where = f"{request.url.host}{request.url.path}"  # never the query: a CDN's signed URL carries one
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise ms.AnswerError(f"the answer from {where} is {encoding}-compressed although it was asked uncompressed")
    entry = getattr(CURRENT, "entry", None)
    if entry is not None and response.status_code in (200, 206):
        start = ms.range_start(request.headers.get("Range", "")) if response.status_code == 206 else 0
        limit, what, error = max(entry["size"] - start, 0), entry["path"], ms.DownloadTooLarge
    else:
        limit, what, error = ms.MAX_ANSWER_BYTES, f"the answer from {where}", ms.AnswerError
        with ANSWERS_LOCK:
            ANSWERS[0] += 1
            if ANSWERS[0] > ms.MAX_ANSWERS:  # a mirror paging a file list without end
                raise ms.AnswerError(f"more than {ms.MAX_ANSWERS} answers other than file contents in one run")
    length = response.headers.get("Content-Length", "")
    if length.isdigit() and int(length) > limit:
        raise error(f"{what} is announced as {length} bytes, more than the {limit} expected of it; nothing was read")
    response.stream = CappedStream(response.stream, limit, what, error)


def capped_client() -> Any:
    client = default_client_factory()
    hooks = client.event_hooks
    client.event_hooks = {
        "request": [*hooks.get("request", []), ask_plain],
        "response": [*hooks.get("response", []), cap_answer],
    }
    return client


def hub_error(name: str, repo: str, revision: str, exc: Exception) -> str:
    """A message that says which model, what the Hub said and what to do (never the token)."""
    if isinstance(exc, ms.ModelStoreError):
        return f"model {name}: {exc}"
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


def source_label(p: dict) -> str:
    """Where the files come from, in words (the endpoint itself is no_log: Ansible would mask it)."""
    return "the mirror at endpoint" if p["endpoint"] else "the Hub"


def tree_items(api: Any, p: dict, commit: str) -> list[dict]:
    """The files of the Hub's tree listing as plain dicts (checked by the caller)."""
    items = []
    for item in api.list_repo_tree(repo_id=p["repo"], revision=commit, recursive=True):
        if not hasattr(item, "blob_id"):
            continue  # a folder: only files become paths
        if len(items) >= ms.MAX_FILES:
            raise ms.ListingError(f"the file list of {p['repo']}@{commit} has more than {ms.MAX_FILES} files")
        lfs = item.lfs
        items.append(
            {
                "path": item.path,
                "size": item.size,
                "sha256": getattr(lfs, "sha256", None) if lfs else "",
                "oid": "" if lfs else item.blob_id,
            }
        )
    return items


def entries_from_hub(api: Any, p: dict, commit: str) -> list[dict]:
    where = f"the file list of {p['repo']}@{commit} from {source_label(p)}"
    try:
        items = tree_items(api, p, commit)
    except (HfHubHTTPError, ms.ModelStoreError):
        raise
    except (KeyError, TypeError, AttributeError, ValueError) as exc:  # what the library makes of a wrong shape
        raise ms.ListingError(f"{where} is not in the Hub's format ({type(exc).__name__})") from exc
    entries = ms.check_entries(items, where)
    keep = set(
        filter_repo_objects(
            [e["path"] for e in entries], allow_patterns=p["include"] or None, ignore_patterns=p["exclude"] or None
        )
    )
    return [e for e in entries if e["path"] in keep]


def entries_from_local(p: dict) -> list[dict]:
    """A local snapshot's files: its own record when it carries one (for this repo and commit),
    else every regular file, hashed. No link in the source is followed (see model_store.list_local)."""
    base = p["local_path"]
    recorded = ms.read_record(base, ms.MARKER, "the local source's record", None)
    if recorded is not None:
        where = f"the local source's record {os.path.join(base, ms.MARKER)}"
        return ms.check_marker(recorded, where, p["repo"], p["revision"])
    keep = filter_repo_objects(
        ms.list_local(base), allow_patterns=p["include"] or None, ignore_patterns=p["exclude"] or None
    )
    return ms.check_entries(ms.entries_of_local(base, list(keep)), f"the local source {base}")


def download_one(p: dict, commit: str, partial: str, entry: dict, force: bool = False) -> None:
    """One file from the Hub into the download directory, its answer capped at its declared size
    (see cap_answer); a file cut off leaves nothing under its name."""
    target = cp.confine(partial, entry["path"], "file in the download directory")
    CURRENT.entry = entry
    try:
        hf_hub_download(
            p["repo"],
            entry["path"],
            revision=commit,
            local_dir=partial,
            endpoint=p["endpoint"] or None,
            force_download=force,
            token=p["token"] or None,
        )
    except ms.DownloadTooLarge:
        if os.path.lexists(target) and not os.path.isdir(target):
            os.unlink(target)
        raise
    finally:
        CURRENT.entry = None


def download_all(p: dict, commit: str, partial: str, entries: list[dict]) -> None:
    """Every entry, ``max_workers`` at a time; the first failure stops what has not started and is raised."""
    with ThreadPoolExecutor(max_workers=max(p["max_workers"], 1)) as pool:
        futures = [pool.submit(download_one, p, commit, partial, entry) for entry in entries]
        for future in wait(futures, return_when=FIRST_EXCEPTION).not_done:
            future.cancel()
        for future in futures:
            if future.done() and not future.cancelled() and future.exception() is not None:
                raise future.exception()  # type: ignore[misc]


def copy_local(src: str, dest: str, entries: list[dict]) -> None:
    for entry in entries:
        target = cp.confine(dest, entry["path"], "file in the download directory")
        if os.path.isfile(target) and not os.path.islink(target) and os.path.getsize(target) == entry["size"]:
            continue
        ms.copy_regular(src, entry, dest)


def resolve(module: AnsibleModule, api: Any, p: dict, *, write: bool = True) -> tuple[str, bool]:
    """The commit for the revision, and whether refs.json changed (or would; written only with ``write``)."""
    if ms.is_commit(p["revision"]):
        return p["revision"], False
    refs_path = ms.record_path(p["store"], "refs.json")
    refs, dropped = ms.check_refs(
        ms.read_record(p["store"], ".gpufleet/refs.json", "the record of resolved revisions", {}), refs_path
    )
    if dropped:
        module.warn(
            f"{refs_path} held {len(dropped)} revision(s) recorded with credentials in their endpoint; "
            "they were removed (rotate those credentials: the file is readable by every container)"
        )
    key = ms.ref_key(p["endpoint"], p["repo"], p["revision"])
    if key in refs and not p["refresh"]:
        commit, changed = refs[key], False
    else:
        try:
            info = api.repo_info(repo_id=p["repo"], revision=p["revision"])
        except Exception as exc:
            module.fail_json(msg=hub_error(p["name"], p["repo"], p["revision"], exc))
        commit = ms.check_commit(
            getattr(info, "sha", None), f"{source_label(p)} answered for {p['repo']}@{p['revision']} the commit"
        )
        changed = refs.get(key) != commit
        refs[key] = commit
    if (changed or dropped) and write and not module.check_mode:
        ms.write_json(refs_path, refs)
    return commit, changed or bool(dropped)


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
    progress_path = ms.record_path(p["store"], f"progress-{p['name']}.json")
    start = ms.bytes_on_disk(partial)
    began = time.monotonic()
    with Progress(progress_path, p["name"], partial, total, start) as progress:
        try:
            if p["source"] == "local":
                copy_local(p["local_path"], partial, entries)
            else:
                download_all(p, commit, partial, entries)
        except (ms.DownloadTooLarge, ms.AnswerError, ms.LocalSourceError) as exc:
            module.fail_json(
                msg=f"model {p['name']}: {exc}; the partial file was removed, the files already complete are kept "
                f"in {partial} (check the source: {source_label(p) if p['source'] == 'hub' else p['local_path']})"
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
        for entry in entries:
            if entry["path"] not in failures:
                continue
            target = cp.confine(partial, entry["path"], "file in the download directory")
            if os.path.lexists(target):
                os.unlink(target)
            if p["source"] == "local":
                module.fail_json(
                    msg=f"model {p['name']}: {entry['path']} in {p['local_path']} does not match its record: "
                    f"{failures[entry['path']]}"
                )
            try:
                download_one(p, commit, partial, entry, force=True)
            except Exception as exc:
                module.fail_json(msg=hub_error(p["name"], p["repo"], commit, exc) + f" (refetching {entry['path']})")
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
    "endpoint": {"type": "str", "default": "", "no_log": True},
    "local_path": {"type": "path"},
    "include": {"type": "list", "elements": "str", "default": []},
    "exclude": {"type": "list", "elements": "str", "default": []},
    "verify": {"type": "str", "choices": ["quick", "full"], "default": "quick"},
    "refresh": {"type": "bool", "default": False},
    "reserve_bytes": {"type": "int", "default": 1073741824},
    "max_workers": {"type": "int", "default": 8},
    "token": {"type": "str", "no_log": True},
    "download": {"type": "bool", "default": True},
    "deadline_s": {"type": "int", "default": 0},
}


class Deadline(BaseException):
    """Raised in the main thread by SIGALRM at ``deadline_s``: a BaseException, so that no ``except Exception``
    of a library between here and the blocked read (a retry, a fallback) can take it for an ordinary error."""


def _deadline_reached(signum: int, frame: Any) -> None:
    raise Deadline()


def no_stats() -> dict[str, Any]:
    return {"downloaded_bytes": 0, "download_mb_per_s": 0.0, "verify_mb_per_s": 0.0, "refetched": []}


def check_snapshot(
    module: AnsibleModule, p: dict, commit: str, final: str, entries: list[dict], *, result: dict, looking: bool = False
) -> tuple[dict[str, Any], bool] | None:
    """Verify a snapshot already in the store; repair the files that fail (fetched again into
    .partial, verified, moved over). Returns (stats, whether anything changed or would), or None when
    ``looking`` and a file fails (the repair is a download)."""
    stats = no_stats()
    partial = ms.partial_dir(p["store"], p["repo"], commit)
    failures, checked, verify_s = ms.verify_all(final, entries, full=p["verify"] == "full")
    if p["verify"] == "full":
        stats["verify_mb_per_s"] = round(checked / max(verify_s, 1e-6) / 1048576, 1)
    if not failures:
        return stats, False
    if looking:
        return None
    if module.check_mode:
        result["would_refetch"] = sorted(failures)
        return stats, True
    stats = fetch_and_verify(module, p, commit, partial, [e for e in entries if e["path"] in failures])
    for entry in entries:
        if entry["path"] in failures:
            os.replace(
                cp.confine(partial, entry["path"], "file in the download directory"),
                cp.confine(final, entry["path"], "file in the snapshot"),
            )
    shutil.rmtree(partial)
    stats["refetched"] = sorted(failures)
    return stats, True


def list_entries(module: AnsibleModule, api: Any, p: dict, commit: str) -> list[dict]:
    """The files of the snapshot (from the local directory or the Hub), after include/exclude."""
    try:
        entries = entries_from_local(p) if p["source"] == "local" else entries_from_hub(api, p, commit)
    except Exception as exc:
        module.fail_json(msg=hub_error(p["name"], p["repo"], commit, exc))
    if not entries:
        module.fail_json(msg=f"model {p['name']}: no file of {p['repo']}@{commit} matches include/exclude")
    return entries


def fetch_snapshot(module: AnsibleModule, p: dict, commit: str, final: str, entries: list[dict]) -> dict[str, Any]:
    """Download a new snapshot into .partial, verify it, write its marker and move it into place."""
    if os.path.lexists(final):
        raise ms.RecordError(
            f"{final} exists without its record ({ms.MARKER}); remove it and run again (it will be fetched anew)"
        )
    partial = ms.partial_dir(p["store"], p["repo"], commit)
    stats = fetch_and_verify(module, p, commit, partial, entries)
    shutil.rmtree(os.path.join(partial, ".cache"), ignore_errors=True)
    ms.write_json(
        cp.confine(partial, ms.MARKER, "snapshot record"),
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


def fetch(module: AnsibleModule, p: dict) -> dict[str, Any]:
    """Resolve, check or fetch, link: the module's work once its options are checked."""
    if p["source"] == "hub":
        set_client_factory(capped_client)
    api = HfApi(endpoint=p["endpoint"] or None, token=p["token"] or None)
    # a look (download: false) writes nothing and downloads nothing: what needs either is left pending
    looking = not p["download"] and not module.check_mode
    commit, new_ref = resolve(module, api, p, write=not looking)
    pending = {"commit": commit, "changed": False, "pending": True}
    if looking and new_ref:
        return pending
    final = ms.snapshot_dir(p["store"], p["repo"], commit)
    link = ms.current_link(p["store"], p["name"])
    link_target = os.path.relpath(final, os.path.dirname(link))
    result: dict[str, Any] = {"commit": commit, "model_path": final, "huggingface_hub": huggingface_hub.__version__}
    marker_name = f"{p['repo']}/{commit}/{ms.MARKER}"
    marker = ms.read_record(p["store"], marker_name, "the snapshot's record", None)
    if marker is None and looking:
        return pending
    if marker is not None:
        entries = ms.check_marker(marker, os.path.join(p["store"], marker_name), p["repo"], commit)
        checked = check_snapshot(module, p, commit, final, entries, result=result, looking=looking)
        if checked is None:
            return pending
        stats, changed = checked
    else:
        entries = list_entries(module, api, p, commit)
        changed = True
        if module.check_mode:
            stats = no_stats()
            result["would_download_bytes"] = ms.space_needed(ms.partial_dir(p["store"], p["repo"], commit), entries)
        else:
            stats = fetch_snapshot(module, p, commit, final, entries)
    changed = update_link(module, link, link_target) or changed or new_ref
    result.update(stats)
    result.update(
        pending=False,
        changed=changed,
        total_bytes=sum(e["size"] for e in entries),
        file_count=len(entries),
        verified=not module.check_mode or marker is not None,
        link=link,
    )
    return result


def run_module() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    if HF_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("huggingface_hub"), exception=HF_IMPORT_ERROR)
    p = dict(module.params)
    if ms.endpoint_problem(p["endpoint"]):
        # kept out of every output of the module in every form (the option itself is no_log)
        module.no_log_values.update(secret_forms(ms.endpoint_secrets(p["endpoint"])))
    errors = ms.check_model(p)
    if p["deadline_s"] < 0:
        errors.append(f"deadline_s must be 0 (no limit) or a number of seconds, not {p['deadline_s']}")
    if errors:
        module.fail_json(msg="; ".join(errors))
    if p["deadline_s"] > 0:
        signal.signal(signal.SIGALRM, _deadline_reached)
        signal.alarm(p["deadline_s"])
    try:
        result = fetch(module, p)
    except Deadline:
        what = "the look" if not p["download"] else "the fetch"
        try:
            module.fail_json(
                msg=f"model {p['name']}: {what} did not finish within its deadline ({p['deadline_s']} s, deadline_s): "
                + (
                    "the Hub answered too slowly or not at all; nothing was written to the store"
                    if not p["download"]
                    else "the Hub or the store's disk was too slow; what was fetched is kept for the next run"
                )
            )
        finally:
            # download threads still blocked on the Hub would hold an ordinary exit until they finish
            sys.stdout.flush()
            os._exit(1)
    except (ms.ModelStoreError, cp.PathError) as exc:
        module.fail_json(msg=f"model {p['name']}: {exc}")
    except OSError as exc:
        module.fail_json(msg=f"model {p['name']}: {exc.strerror or exc} ({exc.filename or p['store']})")
    signal.alarm(0)
    module.exit_json(**result)


def main() -> None:
    run_module()


if __name__ == "__main__":
    main()
