# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The model store's rules, as small pure functions (stdlib only; runs on the Proxmox host).

Layout of a store:

    <store>/<org>/<repo>/<commit>/            one verified snapshot of a repository
    <store>/<org>/<repo>/<commit>/.gpufleet-model.json   what was verified: every file's size and digest
    <store>/<org>/<repo>/<commit>.partial/    a download in progress (resumed by the next run)
    <store>/current/<name> -> ../<org>/<repo>/<commit>   the snapshot each declared model name serves
    <store>/.gpufleet/refs.json               branch/tag -> commit, resolved once and recorded
    <store>/.gpufleet/progress-<name>.json    bytes done / total / rate while a download runs

A file is verified against the Hub's metadata: the sha256 of files stored in LFS, the git blob id
(sha1 of "blob <size>\\0" + content) of the others, and always the size.

Nothing a Hub, a mirror, a local source or a record on disk says is used unchecked; each check
raises its own ``ModelStoreError`` subclass whose message names the thing and the fix:

- ``CommitError``: a commit id that is not 40 lowercase hex digits (before it names a directory);
- ``ListingError``: a file list (the Hub's tree, or a record's ``files``) with a name that is not a
  plain relative path (``confined_path.relative_name``), a size or digest of the wrong type or form,
  a file without a digest, a name given twice, a name that is both a file and a directory, a
  reserved name (``.cache/`` at the top, the record's own name), or more than ``MAX_FILES`` files;
- ``RecordError``: a record of the store (``refs.json``, a snapshot's record, a local source's
  record) that is missing keys, has keys of the wrong type, is not UTF-8, not JSON, nested too
  deeply, larger than ``MAX_RECORD_BYTES``, or not a regular file (a FIFO, a directory, a device or
  a symlink is refused without being opened for reading: ``confined_path.open_regular``);
- ``endpoint_problem`` (a message, as ``check_model`` gives them): a mirror URL that is not
  ``http(s)://host[:port][/path]``, in particular one carrying credentials (user information, a
  query string such as ``?token=``, a fragment); the message shows the scheme and host only when
  the URL has no ``@`` at all, never the rest;
- ``LocalSourceError``: a symlink anywhere in a local source (inside it or out of it: refused,
  never followed) or a file that is not a regular file;
- ``DownloadTooLarge``: a file that grows past its declared size while it is fetched or copied:
  reading stops at the first byte past it (declared size + 1) and the partial file is removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ansible_collections.gpufleet.sglang.plugins.module_utils.common import confined_path as cp
from ansible_collections.gpufleet.sglang.plugins.module_utils.common.atomic_file import replace_file, swap_symlink
from ansible_collections.gpufleet.sglang.plugins.module_utils.common.secret_mask import secrets_of

REPO_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
COMMIT_RE = re.compile(r"[0-9a-f]{40}")
SHA256_RE = re.compile(r"[0-9a-f]{64}")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# a mirror URL: http(s), a DNS name or a bracketed IPv6 address, a port, a plain path; nothing
# that could carry a credential (no '@', no query, no fragment)
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
HOST_RE = re.compile(rf"{_LABEL}(?:\.{_LABEL})*|\[[0-9A-Fa-f:.]+\]")
ENDPOINT_RE = re.compile(rf"(https?)://({HOST_RE.pattern})(?::([0-9]{{1,5}}))?((?:/[A-Za-z0-9._~%+-]*)*)")
MARKER = ".gpufleet-model.json"
RESERVED_TOP = (".cache", MARKER)  # huggingface_hub's local_dir metadata, the snapshot's record
CHUNK = 8 * 1024 * 1024
MAX_RECORD_BYTES = 64 * 1024 * 1024  # a record of 100,000 files is about 20 MB
MAX_FILES = 200_000
MAX_ANSWER_BYTES = 64 * 1024 * 1024  # any answer that is not a file's content
MAX_ANSWERS = 10_000  # answers that are not a file's content, per run (a file list pages 1,000 files at a time)
MAX_SHOWN = 60  # characters of an outside value quoted in a message


class ModelStoreError(Exception):
    """A named failure of the model store."""


class CommitError(ModelStoreError):
    """A commit id that is not 40 lowercase hex digits."""


class ListingError(ModelStoreError):
    """A file list (from the Hub, a mirror or a record) of the wrong shape."""


class RecordError(ModelStoreError):
    """A record of the store, or of a local source, that cannot be used."""


class LocalSourceError(ModelStoreError):
    """A local source holding a symlink or a file that is not a regular file."""


class DownloadTooLarge(ModelStoreError):
    """A file that grew past its declared size while it was fetched or copied."""


class AnswerError(ModelStoreError):
    """An answer of the Hub or a mirror that is refused: compressed although it was asked plain,
    or larger than MAX_ANSWER_BYTES (a file list page, an error, a redirect)."""


def shown(value: object) -> str:
    """``repr`` of an outside value, cut to MAX_SHOWN characters (it may be huge or hostile)."""
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


# -- declarations and endpoints ------------------------------------------------------------------


def endpoint_label(url: str) -> str:
    """What a message may show of ``url``: its scheme and host when it holds no '@' at all."""
    if "@" not in url and "\\" not in url:
        head = re.match(rf"(https?)://({HOST_RE.pattern})(?::[0-9]{{1,5}})?(?=[/?#]|$)", url)
        if head:
            return head.group(0)
    return "(not shown)"


def endpoint_problem(url: object) -> str | None:
    """Why ``url`` may not be a mirror endpoint (never quoting it); None when it may ('' is the Hub)."""
    if url is None or url == "":
        return None
    if not isinstance(url, str):
        return f"endpoint is a {type(url).__name__}, not a URL"
    label = endpoint_label(url)
    rest = url.partition("://")[2]
    authority = re.split(r"[/?#\\]", rest, maxsplit=1)[0]
    if "@" in authority:
        why = "carries user information (user:password@)"
    elif "?" in url:
        why = "has a query string (where ?token= and the like would be)"
    elif "#" in url:
        why = "has a fragment"
    elif "@" in url:
        why = "contains '@'"
    else:
        match = ENDPOINT_RE.fullmatch(url)
        if not match:
            why = "is not http(s)://host[:port][/path] (letters, digits and ._~%+- in the path)"
        elif match.group(3) and not 0 < int(match.group(3)) < 65536:
            why = "has a port outside 1-65535"
        else:
            return None
    return (
        f"endpoint {label} {why}: credentials in an endpoint URL are refused (they would be recorded "
        "in the store and shown); give the mirror's token as model_store_hf_token instead (sent as "
        "'Authorization: Bearer', as HF_TOKEN is)"
    )


def endpoint_secrets(url: object) -> list[str]:
    """The parts of a refused endpoint that may be credentials (to keep out of every output)."""
    if not isinstance(url, str) or not url:
        return []
    found = [url, *secrets_of(url, None)]
    try:
        parts = urlsplit(url)
    except ValueError:
        return list(dict.fromkeys(found))
    if parts.username:
        found.append(parts.username)
    for piece in (parts.query, parts.fragment):
        if piece:
            found.append(piece)
            found += [v for pair in parse_qsl(piece, keep_blank_values=True) for v in pair if v]
    return list(dict.fromkeys(f for f in found if f))


def check_model(model: dict[str, Any], default_endpoint: str = "") -> list[str]:
    """What is wrong with one declared model (empty when it is fine)."""
    errors = []
    name = str(model.get("name", ""))
    label = name if NAME_RE.fullmatch(name) else shown(name)
    if not NAME_RE.fullmatch(name):
        errors.append(f"model {label}: name must match {NAME_RE.pattern}")
    source = model.get("source", "hub")
    if source not in ("hub", "local"):
        errors.append(f"model {label}: source {shown(source)} is not one of hub, local")
    if not REPO_RE.fullmatch(str(model.get("repo", ""))):
        errors.append(f"model {label}: repo {shown(model.get('repo'))} is not '<org>/<name>'")
    revision = str(model.get("revision", ""))
    if (
        not revision
        or any(ord(c) <= 0x20 or ord(c) == 0x7F for c in revision)
        or revision.startswith("-")
        or ".." in revision
    ):
        errors.append(f"model {label}: revision {shown(revision)} is not a branch, tag or commit")
    endpoint = model.get("endpoint")
    problem = endpoint_problem(default_endpoint if endpoint is None else endpoint)
    if problem:
        errors.append(f"model {label}: {problem}")
    if source == "local":
        if not COMMIT_RE.fullmatch(revision):
            errors.append(f"model {label}: a local source needs revision set to the 40-hex commit it holds")
        if not str(model.get("local_path", "")).startswith("/"):
            errors.append(f"model {label}: a local source needs local_path (an absolute directory)")
    return errors


def is_commit(revision: str) -> bool:
    return isinstance(revision, str) and COMMIT_RE.fullmatch(revision) is not None


def check_commit(value: object, what: str) -> str:
    """``value`` when it is a commit id (40 lowercase hex digits), else ``CommitError``."""
    if is_commit(value):  # type: ignore[arg-type]
        return value  # type: ignore[return-value]
    raise CommitError(f"{what} {shown(value)} is not a commit id (40 lowercase hex digits); nothing was written")


# -- paths in the store --------------------------------------------------------------------------


def snapshot_dir(store: str, repo: str, commit: str) -> str:
    """``<store>/<org>/<repo>/<commit>``, the repo and commit checked first."""
    if not REPO_RE.fullmatch(repo):
        raise ListingError(f"repo {shown(repo)} is not '<org>/<name>'")
    return cp.confine(store, f"{repo}/{check_commit(commit, 'commit')}", "snapshot directory")


def partial_dir(store: str, repo: str, commit: str) -> str:
    return cp.confine(store, f"{repo}/{check_commit(commit, 'commit')}.partial", "download directory")


def current_link(store: str, name: str) -> str:
    """``<store>/current/<name>``: the directory is confined, the link itself is replaced, never followed."""
    return os.path.join(cp.confine(store, "current", "link directory"), cp.segment(name, "model name"))


def record_path(store: str, name: str) -> str:
    """A file of the store's own records (``<store>/.gpufleet/<name>``)."""
    return cp.confine(store, f".gpufleet/{cp.segment(name, 'record name')}", "record")


# -- file lists ----------------------------------------------------------------------------------


def _digest(value: object, pattern: re.Pattern[str], what: str) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, str) and pattern.fullmatch(value):
        return value
    raise ListingError(f"{what} {shown(value)} is not {'a sha256' if pattern is SHA256_RE else 'a git blob id'}")


def check_entry(item: object, where: str) -> dict[str, Any]:
    """One file of a list as ``{path, size, sha256, oid}``, every field checked; else ``ListingError``."""
    if not isinstance(item, dict):
        raise ListingError(f"{where}: a file entry is a {type(item).__name__}, not an object")
    try:
        path = cp.relative_name(item.get("path"), f"{where}: file name")
    except cp.PathError as exc:
        raise ListingError(str(exc)) from exc
    first = path.split("/", 1)[0]
    if first in RESERVED_TOP:
        raise ListingError(f"{where}: file name {path!r} is reserved (the store keeps {first} there)")
    size = item.get("size")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ListingError(f"{where}: {path!r} has size {shown(size)}, not a byte count")
    sha256 = _digest(item.get("sha256"), SHA256_RE, f"{where}: {path!r} sha256")
    oid = _digest(item.get("oid"), COMMIT_RE, f"{where}: {path!r} git blob id")
    if not sha256 and not oid:
        raise ListingError(f"{where}: {path!r} has neither a sha256 nor a git blob id: it could not be verified")
    return {"path": path, "size": size, "sha256": sha256, "oid": oid}


def check_entries(items: object, where: str) -> list[dict[str, Any]]:
    """A whole file list checked (see ``check_entry``): no name twice, none both a file and a directory."""
    if not isinstance(items, (list, tuple)):
        raise ListingError(f"{where}: the file list is a {type(items).__name__}, not a list")
    if len(items) > MAX_FILES:
        raise ListingError(f"{where}: more than {MAX_FILES} files")
    entries = [check_entry(item, where) for item in items]
    files: set[str] = set()
    dirs: set[str] = set()
    for entry in entries:
        path = entry["path"]
        if path in files:
            raise ListingError(f"{where}: {path!r} is listed twice")
        files.add(path)
        parts = path.split("/")
        dirs.update("/".join(parts[:i]) for i in range(1, len(parts)))
    clash = sorted(files & dirs)
    if clash:
        raise ListingError(f"{where}: {clash[0]!r} is listed both as a file and as a directory")
    return entries


# -- records -------------------------------------------------------------------------------------


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def read_record(root: str, name: str, what: str, default: Any) -> Any:
    """The JSON of the record ``root``/``name``, or ``default`` when it does not exist; ``RecordError``
    for a record that is not a regular file, larger than MAX_RECORD_BYTES, not UTF-8 or not JSON."""
    path = os.path.join(root, name)
    fix = f"remove {path} to start over"
    try:
        fd = cp.open_regular(root, name, what)
    except FileNotFoundError:
        return default
    except cp.PathError as exc:
        raise RecordError(f"{exc}; {fix}") from exc
    except OSError as exc:
        raise RecordError(f"{what} {path} cannot be read ({exc.strerror}); {fix}") from exc
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_RECORD_BYTES + 1)
    if len(data) > MAX_RECORD_BYTES:
        raise RecordError(f"{what} {path} is larger than {MAX_RECORD_BYTES} bytes; {fix}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(f"{what} {path} is not UTF-8 (byte {exc.start}); {fix}") from exc
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError as exc:
        raise RecordError(f"{what} {path} is nested too deeply; {fix}") from exc
    except ValueError as exc:
        raise RecordError(f"{what} {path} is not JSON ({str(exc)[:200]}); {fix}") from exc


def check_marker(data: object, where: str, repo: str, commit: str) -> list[dict[str, Any]]:
    """The files of a snapshot's record after checking it is one, for ``repo`` at ``commit``."""
    if not isinstance(data, dict):
        raise RecordError(f"{where} is a {type(data).__name__}, not an object with repo, commit and files")
    for key in ("repo", "commit", "files"):
        if key not in data:
            raise RecordError(f"{where} has no {key!r}")
    if data["repo"] != repo or data["commit"] != commit:
        raise RecordError(f"{where} records {shown(data['repo'])} at {shown(data['commit'])}, not {repo} at {commit}")
    try:
        return check_entries(data["files"], where)
    except ListingError as exc:
        raise RecordError(str(exc)) from exc


REF_KEY_RE = re.compile(r"(\S+) ([^\s@]+)@(\S+)")


def ref_key(endpoint: str, repo: str, revision: str) -> str:
    """The key of a resolved revision in refs.json (the endpoint has no credentials: refused before)."""
    return f"{endpoint or 'hub'} {repo}@{revision}"


def check_refs(data: object, where: str) -> tuple[dict[str, str], list[str]]:
    """(the recorded revisions, the keys dropped because their endpoint carries credentials).

    refs.json maps ``<endpoint or hub> <org>/<repo>@<revision>`` to a commit. Earlier versions
    recorded the endpoint as given, credentials included: such keys are dropped (the caller
    rewrites the file without them). Any other wrong shape is a ``RecordError``."""
    if not isinstance(data, dict):
        raise RecordError(f"{where} is a {type(data).__name__}, not an object of revision -> commit")
    refs: dict[str, str] = {}
    dropped: list[str] = []
    for key, value in data.items():
        match = REF_KEY_RE.fullmatch(key)
        if not match:
            raise RecordError(f"{where}: key {shown(key)} is not '<endpoint or hub> <org>/<repo>@<revision>'")
        if match.group(1) != "hub" and endpoint_problem(match.group(1)):
            dropped.append(key)
            continue
        try:
            refs[key] = check_commit(value, f"{where}: {match.group(2)}@{match.group(3)} is recorded as")
        except CommitError as exc:
            raise RecordError(f"{exc}; remove the entry, or the file, to resolve it again") from exc
    return refs, dropped


def write_json(path: str, data: Any) -> None:
    """Atomic JSON write (mode 0644), creating the directory: :func:`atomic_file.replace_file`."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    replace_file(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"), mode=0o644)


def point_link(link: str, target: str) -> bool:
    """Point link at target (relative), creating its directory; True when it changed."""
    os.makedirs(os.path.dirname(link), exist_ok=True)
    return swap_symlink(target, link)


# -- local sources -------------------------------------------------------------------------------


def list_local(base: str) -> list[str]:
    """The regular files under ``base`` ('/'-separated, sorted), leaving out ``.cache/`` and the
    record at the top. Every directory is opened without following links; a symlink anywhere (to a
    file or a directory, inside the source or out of it) or a special file is a ``LocalSourceError``."""
    found: list[str] = []

    def walk(fd: int, rel_dir: str) -> None:
        with os.scandir(fd) as listing:
            names = sorted(entry.name for entry in listing)
        for name in names:
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if not rel_dir and name in RESERVED_TOP:
                continue
            try:
                cp.relative_name(rel, "local source file")
            except cp.PathError as exc:
                raise LocalSourceError(str(exc)) from exc
            mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                target = os.readlink(name, dir_fd=fd)
                raise LocalSourceError(
                    f"{os.path.join(base, rel)} is a symlink (to {shown(target)}): a local source may hold "
                    "only regular files and directories; links are refused, never followed (copy the "
                    "file in place of the link, for example with cp -rL into a new directory)"
                )
            if stat.S_ISDIR(mode):
                if len(found) > MAX_FILES:
                    break
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                try:
                    walk(sub, rel)
                finally:
                    os.close(sub)
            elif stat.S_ISREG(mode):
                found.append(rel)
            else:
                raise LocalSourceError(
                    f"{os.path.join(base, rel)} is {cp.kind_of(mode)}: a local source may hold only regular files"
                )

    top = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        walk(top, "")
    finally:
        os.close(top)
    if len(found) > MAX_FILES:
        raise LocalSourceError(f"{base} holds more than {MAX_FILES} files")
    return found


def _open_file(base: str, rel: str, what: str) -> int:
    try:
        return cp.open_regular(base, rel, what)
    except cp.PathError as exc:
        raise LocalSourceError(str(exc)) from exc


def capped(
    chunks: Iterable[bytes], limit: int, what: str, *, error: type[ModelStoreError] = DownloadTooLarge
) -> Iterator[bytes]:
    """``chunks`` passed on until more than ``limit`` bytes have come; then ``error`` (by default
    ``DownloadTooLarge``): the chunk that went past is not passed on and nothing more is read."""
    seen = 0
    for chunk in chunks:
        seen += len(chunk)
        if seen > limit:
            raise error(f"{what} went past the {limit} bytes expected of it; reading stopped at byte {limit + 1}")
        yield chunk


RANGE_RE = re.compile(r"bytes=([0-9]{1,20})-")


def range_start(header: str) -> int:
    """The first byte asked for by a ``Range: bytes=<n>-`` header (0 for none or another form)."""
    match = RANGE_RE.fullmatch(header.strip()) if isinstance(header, str) else None
    return int(match.group(1)) if match else 0


def _reads(fd: int) -> Iterator[bytes]:
    while True:
        chunk = os.read(fd, CHUNK)
        if not chunk:
            return
        yield chunk


def copy_regular(src_base: str, entry: dict[str, Any], dest_base: str) -> None:
    """Copy one file of a local source into the download directory: read without following links,
    stopped past the declared size, written to a temporary file renamed into place (nothing
    partial is left under the file's name)."""
    rel = entry["path"]
    target = cp.confine(dest_base, rel, "file in the download directory")
    directory = os.path.dirname(target)
    os.makedirs(directory, exist_ok=True)
    fd = _open_file(src_base, rel, "local source file")
    tmp = ""
    try:
        out, tmp = tempfile.mkstemp(prefix=".gpufleet.", suffix=".incomplete", dir=directory)
        with os.fdopen(out, "wb") as handle:
            for chunk in capped(_reads(fd), entry["size"], os.path.join(src_base, rel)):
                handle.write(chunk)
        os.replace(tmp, target)
        tmp = ""
    finally:
        os.close(fd)
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def entries_of_local(base: str, paths: list[str]) -> list[dict[str, Any]]:
    """Size and both digests of each file of a local source (read without following links)."""
    out = []
    for rel in paths:
        oid, sha256, size = git_blob_oid_and_sha256(base, rel, "local source file")
        out.append({"path": rel, "size": size, "sha256": sha256, "oid": oid})
    return out


# -- verification --------------------------------------------------------------------------------


def _hash_fd(fd: int) -> tuple[str, str, int]:
    size = os.fstat(fd).st_size
    sha1 = hashlib.sha1(b"blob %d\0" % size)
    sha256 = hashlib.sha256()
    for chunk in _reads(fd):
        sha1.update(chunk)
        sha256.update(chunk)
    return sha1.hexdigest(), sha256.hexdigest(), size


def git_blob_oid_and_sha256(base: str, rel: str, what: str = "file") -> tuple[str, str, int]:
    """The git blob id, the sha256 and the size of ``base``/``rel``, read once in chunks, without
    following links (``LocalSourceError`` for a link or a special file)."""
    fd = _open_file(base, rel, what)
    try:
        return _hash_fd(fd)
    finally:
        os.close(fd)


def _compare(fd: int, entry: dict[str, Any], full: bool) -> str:
    size = os.fstat(fd).st_size
    if size != entry["size"]:
        return f"size {size} != {entry['size']}"
    if not full:
        return ""
    oid, sha256, _size = _hash_fd(fd)
    if entry.get("sha256"):
        return "" if sha256 == entry["sha256"] else f"sha256 {sha256[:12]}... != {entry['sha256'][:12]}..."
    return "" if oid == entry["oid"] else f"git blob id {oid[:12]}... != {entry['oid'][:12]}..."


def verify_file(base: str, entry: dict[str, Any], full: bool = True) -> str:
    """'' when the file matches its entry; else why not. Quick mode checks the size only."""
    try:
        fd = cp.open_regular(base, entry["path"], "snapshot file")
    except FileNotFoundError:
        return "missing"
    except cp.PathError:
        return "not a regular file"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    try:
        return _compare(fd, entry, full)
    finally:
        os.close(fd)


def verify_all(base: str, entries: list[dict[str, Any]], full: bool = True) -> tuple[dict[str, str], int, float]:
    """(failures by path, bytes checked, seconds) for every entry."""
    began = time.monotonic()
    failures = {}
    checked = 0
    for entry in entries:
        why = verify_file(base, entry, full)
        if why:
            failures[entry["path"]] = why
        else:
            checked += entry["size"]
    return failures, checked, time.monotonic() - began


def _size_here(path: str) -> int:
    """The size of a regular file at ``path`` (not followed if a link), 0 otherwise."""
    try:
        st = os.lstat(path)
    except OSError:
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


def space_needed(base: str, entries: list[dict[str, Any]]) -> int:
    """Bytes still to download: every entry not yet present at its full size."""
    needed = 0
    for entry in entries:
        have = _size_here(cp.confine(base, entry["path"], "file in the download directory"))
        needed += entry["size"] if have != entry["size"] else 0
    return needed


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


def check_space(name: str, needed: int, free: int, reserve: int) -> None:
    """Refuse, with the numbers, when the download would not fit (keeping `reserve` bytes free)."""
    if needed + reserve > free:
        raise ModelStoreError(
            f"model {name}: not enough space: the download needs {human(needed)} ({needed} bytes) "
            f"plus a reserve of {human(reserve)}, the store has {human(free)} ({free} bytes) free; "
            "nothing was downloaded"
        )


def bytes_on_disk(base: str) -> int:
    """Bytes written so far under a download directory (finished and .incomplete files)."""
    total = 0
    for dirpath, _dirs, files in os.walk(base):
        for name in files:
            if name.endswith((".lock", ".metadata")):
                continue
            total += _size_here(os.path.join(dirpath, name))
    return total
