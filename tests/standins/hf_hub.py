# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Stand-in for the Hugging Face Hub: the part of its HTTP API a snapshot download uses.

It stands in for https://huggingface.co (or a Hub mirror set with HF_ENDPOINT), which this
machine cannot reach. It speaks what `huggingface_hub` (2.x) calls for `snapshot_download`,
`HfApi.repo_info` and `HfApi.list_repo_tree`, in the Hub's formats:

  GET  /api/models/<org>/<repo>/revision/<rev>        repo info: sha (the commit), siblings
  GET  /api/models/<org>/<repo>/tree/<rev>[/<path>]    file list: type, oid, size, path, lfs{oid,size,pointerSize}
  HEAD /<org>/<repo>/resolve/<rev>/<file>              X-Repo-Commit, ETag (git blob oid, or the
                                                       LFS sha256 as X-Linked-Etag), Content-Length
  GET  /<org>/<repo>/resolve/<rev>/<file>              the bytes; Range requests answer 206 (resume)

Errors carry the Hub's X-Error-Code header: 404 RevisionNotFound for an unknown branch, tag or
commit; 404 RepoNotFound; 401 GatedRepo when a gated repository is asked without the right
`Authorization: Bearer <token>`. A branch (`main`) and a tag (`v1.0`) resolve to the same commit;
`v2` is a second commit with a changed config.

It serves a small synthetic model built from a seed (config files, a tokenizer file and a real
safetensors file of --size-mb megabytes, stored as an LFS file), so digests are stable across runs.
Each request is appended to --log as a JSON line (method, path, status, range; never the token).
Faults for tests: --corrupt-once FILE serves wrong bytes the first time FILE is fetched;
--cut-once FILE:BYTES closes the connection after BYTES bytes the first time; --rate-mbps limits speed.
A hostile mirror: --endless FILE streams FILE's bytes and then more, chunked, without end (up to
--endless-max-mb, so that a client without a cap still finishes); --tree-extra PATH adds a file named
PATH to every tree listing; --commit-sha VALUE answers VALUE as the commit of every branch and tag;
--trickle-api SECONDS answers every API call (repo info, file list) with its headers at once and then its
body one byte every SECONDS: a client whose timeout is per read waits, byte after byte, for as long as the
mirror wants (only a deadline over the whole call stops it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".bin")


def git_blob_oid(data: bytes) -> str:
    """The git object id of a file, as the Hub reports it for files not stored in LFS."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def safetensors_file(size: int, seed: bytes) -> bytes:
    """A valid safetensors file holding one uint8 tensor, about `size` bytes in all."""
    body_len = max(size - 128, 1)
    header = json.dumps(
        {"__metadata__": {"format": "pt"}, "w": {"dtype": "U8", "shape": [body_len], "data_offsets": [0, body_len]}}
    ).encode()
    header += b" " * (-len(header) % 8)
    block = hashlib.sha256(seed).digest() * 2048
    body = (block * (body_len // len(block) + 1))[:body_len]
    return struct.pack("<Q", len(header)) + header + body


def build_repo(name: str, size_mb: float, version: int) -> dict[str, bytes]:
    """The files of one synthetic model revision."""
    config = {
        "architectures": ["GlmMoeForCausalLM"],
        "model_type": "glm_moe_standin",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "vocab_size": 256,
        "torch_dtype": "bfloat16",
        "_standin_revision": version,
    }
    return {
        "config.json": (json.dumps(config, indent=2) + "\n").encode(),
        "generation_config.json": b'{"max_new_tokens": 256}\n',
        "tokenizer_config.json": b'{"model_max_length": 131072}\n',
        "README.md": f"# {name}\n\nSynthetic stand-in model for gpufleet.sglang tests.\n".encode(),
        "model.safetensors": safetensors_file(int(size_mb * 1024 * 1024), f"{name}:{version}".encode()),
    }


def file_headers(commit: str, entry: dict, size: int) -> dict[str, str]:
    """The headers the Hub sends with a file (the LFS ones for a large file)."""
    headers = {"X-Repo-Commit": commit, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
    if "lfs" in entry:
        headers["X-Linked-Etag"] = f'"{entry["lfs"]["oid"]}"'
        headers["X-Linked-Size"] = str(size)
        headers["ETag"] = f'"{entry["lfs"]["oid"]}"'
    else:
        headers["ETag"] = f'"{entry["oid"]}"'
    return headers


class Hub:
    """Repositories, revisions and the request log."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.repos: dict[str, dict] = {}
        self.token = args.token
        self.log_path = args.log
        self.lock = threading.Lock()
        self.corrupt_once = set(args.corrupt_once)
        self.cut_once = dict(spec.rsplit(":", 1) for spec in args.cut_once)
        self.rate = args.rate_mbps * 1024 * 1024 if args.rate_mbps else 0
        self.endless = set(args.endless)
        self.endless_max = int(args.endless_max_mb * 1024 * 1024)
        self.tree_extra = list(args.tree_extra)
        self.commit_sha = args.commit_sha
        self.trickle_api = args.trickle_api
        for repo_id, gated in ((args.repo, False), (args.gated_repo, True)):
            revisions = {}
            for version, refs in ((1, ("main", "v1.0")), (2, ("v2",))):
                files = build_repo(repo_id, args.size_mb, version)
                commit = hashlib.sha1(
                    json.dumps({k: hashlib.sha256(v).hexdigest() for k, v in sorted(files.items())}).encode()
                ).hexdigest()
                revisions[commit] = files
                for ref in refs:
                    revisions[ref] = commit
            self.repos[repo_id] = {"gated": gated, "revisions": revisions}

    def resolve(self, repo_id: str, rev: str) -> tuple[str, dict[str, bytes]] | None:
        revisions = self.repos[repo_id]["revisions"]
        commit = revisions.get(rev)
        if isinstance(commit, str):
            return commit, revisions[commit]
        if isinstance(commit, dict):
            return rev, commit
        return None

    def log(self, entry: dict) -> None:
        if not self.log_path:
            return
        with self.lock, open(self.log_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")


def tree_entry(path: str, data: bytes) -> dict:
    entry = {"type": "file", "oid": git_blob_oid(data), "size": len(data), "path": path}
    if path.endswith(LFS_SUFFIXES):
        entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
    return entry


class Handler(BaseHTTPRequestHandler):
    server_version = "hf-hub-standin/1.0"
    protocol_version = "HTTP/1.1"
    hub: Hub

    def log_message(self, format: str, *args: object) -> None:
        return

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None, head: bool = False) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)
        self._status = status

    def _error(self, status: int, code: str, message: str, head: bool = False) -> None:
        body = json.dumps({"error": message}).encode()
        self._send(
            status, body, {"X-Error-Code": code, "X-Error-Message": message, "Content-Type": "application/json"}, head
        )

    def _authorized(self, repo_id: str) -> bool:
        if not self.hub.repos[repo_id]["gated"]:
            return True
        return self.headers.get("Authorization", "") == f"Bearer {self.hub.token}"

    def _route(self, head: bool) -> None:
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.split("/") if p]
        self._status = 0
        self._range = self.headers.get("Range", "")
        try:
            if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] in ("revision", "tree"):
                self._api(
                    parts[2] + "/" + parts[3],
                    parts[4],
                    parts[5],
                    "/".join(parts[6:]),
                    query=parse_qs(url.query),
                    head=head,
                )
            elif len(parts) >= 5 and parts[2] == "resolve":
                self._resolve(parts[0] + "/" + parts[1], parts[3], "/".join(parts[4:]), head)
            else:
                self._error(404, "EntryNotFound", f"no route for {url.path}", head)
        finally:
            self.hub.log(
                {
                    "method": self.command,
                    "path": url.path,
                    "status": self._status,
                    "range": self._range,
                    "auth": "present" if self.headers.get("Authorization") else "absent",
                }
            )

    def _repo_or_error(self, repo_id: str, rev: str, head: bool) -> tuple[str, dict[str, bytes]] | None:
        if repo_id not in self.hub.repos:
            self._error(404, "RepoNotFound", f"Repository Not Found for url: {repo_id}", head)
            return None
        if not self._authorized(repo_id):
            self._error(401, "GatedRepo", f"Access to model {repo_id} is restricted. You must have access to it.", head)
            return None
        resolved = self.hub.resolve(repo_id, rev)
        if resolved is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
        return resolved

    def _api(self, repo_id: str, kind: str, rev: str, sub: str, *, query: dict, head: bool) -> None:
        resolved = self._repo_or_error(repo_id, rev, head)
        if resolved is None:
            return
        commit, files = resolved
        if kind == "revision":
            info = {
                "id": repo_id,
                "modelId": repo_id,
                "sha": commit if self.hub.commit_sha is None else self.hub.commit_sha,
                "private": False,
                "gated": "manual" if self.hub.repos[repo_id]["gated"] else False,
                "siblings": [
                    {"rfilename": path, **({"size": len(data)} if query.get("blobs") else {})}
                    for path, data in sorted(files.items())
                ],
            }
            if query.get("blobs"):
                for sibling in info["siblings"]:
                    entry = tree_entry(sibling["rfilename"], files[sibling["rfilename"]])
                    sibling["blobId"] = entry["oid"]
                    if "lfs" in entry:
                        sibling["lfs"] = {
                            "sha256": entry["lfs"]["oid"],
                            "size": entry["lfs"]["size"],
                            "pointerSize": 134,
                        }
            self._send_api(json.dumps(info).encode(), head)
            return
        entries = [tree_entry(path, data) for path, data in sorted(files.items()) if path.startswith(sub)]
        entries += [tree_entry(path, b"planted\n") for path in self.hub.tree_extra]
        self._send_api(json.dumps(entries).encode(), head)

    def _send_api(self, body: bytes, head: bool) -> None:
        """An API answer: at once, or (--trickle-api) its headers at once and then its body byte by byte."""
        if not self.hub.trickle_api or head:
            self._send(200, body, {"Content-Type": "application/json"}, head)
            return
        self._send_head(200, {"Content-Type": "application/json"}, len(body))
        try:
            for i in range(len(body)):
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
                time.sleep(self.hub.trickle_api)
        except (BrokenPipeError, ConnectionResetError):
            self._status = -1

    def _resolve(self, repo_id: str, rev: str, path: str, head: bool) -> None:
        resolved = self._repo_or_error(repo_id, rev, head)
        if resolved is None:
            return
        commit, files = resolved
        if path not in files:
            self._error(404, "EntryNotFound", f"{path} does not exist at {commit}", head)
            return
        data = files[path]
        headers = file_headers(commit, tree_entry(path, data), len(data))
        if head:
            self._send_head(200, headers, len(data))
            return
        start = 0
        status = 200
        if self._range.startswith("bytes="):
            start = int(self._range[6:].split("-", 1)[0] or 0)
            if start >= len(data):
                self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"})
                return
            status = 206
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        body = data[start:]
        if path in self.hub.endless:
            self._stream_endless(status, headers, body)
            return
        with self.hub.lock:
            corrupt = path in self.hub.corrupt_once
            self.hub.corrupt_once.discard(path)
            cut = self.hub.cut_once.pop(path, None)
        if corrupt:
            body = bytes(b ^ 0xFF for b in body[:64]) + body[64:]
        self._send_head(status, headers, len(body))
        self._stream(body, cut)

    def _send_head(self, status: int, headers: dict[str, str], length: int) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        self._status = status

    def _stream(self, body: bytes, cut: str | None) -> None:
        """Send ``body`` at the hub's rate; with ``cut``, drop the connection after that many bytes."""
        limit = int(cut) if cut is not None else len(body)
        chunk = 256 * 1024
        sent = 0
        began = time.monotonic()
        while sent < min(limit, len(body)):
            piece = body[sent : min(sent + chunk, limit)]
            self.wfile.write(piece)
            sent += len(piece)
            if self.hub.rate:
                ahead = sent / self.hub.rate - (time.monotonic() - began)
                if ahead > 0:
                    time.sleep(ahead)
        if cut is not None:
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)

    def _stream_endless(self, status: int, headers: dict[str, str], body: bytes) -> None:
        """The file's bytes, then zeros, chunked, until the client stops reading (or endless_max)."""
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._status = status
        self.close_connection = True
        sent = 0
        piece = body or b"\0"
        try:
            while sent < self.hub.endless_max:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                sent += len(piece)
                piece = b"\0" * 65536
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            return

    def do_GET(self) -> None:
        self._route(head=False)

    def do_HEAD(self) -> None:
        self._route(head=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", help="write the bound port here once listening")
    parser.add_argument("--repo", default="gpufleet-test/tiny-moe")
    parser.add_argument("--gated-repo", default="gpufleet-test/gated-moe")
    parser.add_argument("--token", default="hf_standin_token", help="the token the gated repository accepts")
    parser.add_argument("--size-mb", type=float, default=32.0, help="size of model.safetensors")
    parser.add_argument("--log", help="append one JSON line per request here")
    parser.add_argument("--corrupt-once", action="append", default=[], metavar="FILE")
    parser.add_argument("--cut-once", action="append", default=[], metavar="FILE:BYTES")
    parser.add_argument("--rate-mbps", type=float, default=0.0, help="limit each download to this many MiB/s")
    parser.add_argument("--endless", action="append", default=[], metavar="FILE")
    parser.add_argument("--endless-max-mb", type=float, default=256.0)
    parser.add_argument("--tree-extra", action="append", default=[], metavar="PATH")
    parser.add_argument("--commit-sha", help="the commit every branch and tag resolves to (hostile)")
    parser.add_argument(
        "--trickle-api", type=float, default=0.0, metavar="SECONDS", help="API answers' bodies one byte per SECONDS"
    )
    args = parser.parse_args()
    Handler.hub = Hub(args)
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    if args.port_file:
        with open(args.port_file + ".tmp", "w", encoding="utf-8") as handle:
            handle.write(str(server.server_address[1]))
        os.replace(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
