# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The warm cache's test inputs, shared by the tests of its core (test_warm_cache.py,
test_warm_cache_hostile.py), its module (test_warm_cache_module.py), the role's entry points
(test_warm_cache_role.py) and the SGLang stand-in's jit phase (test_standin_jit.py): a key, a JIT cache
tree of every kind the core carries, a node with such a tree, a tree read back, and a hostile artifact
(one that passes the outer digest check)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang import warm_cache as wc


def key_for(cache_dir: Path, **changes: str) -> dict:
    """The warm-cache key fields of one release, GPU and model with ``cache_dir``; ``changes`` over them."""
    fields = {
        "sglang_version": "0.5.23",
        "flashinfer_version": "0.7.2",
        "gpu_model": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "compute_capability": "12.0",
        "driver_version": "580.95.05",
        "cuda_version": "13.0",
        "model_revision": "0123456789abcdef0123456789abcdef01234567",
        "profile": "glm5_nvfp4_tp8",
        "cache_dir": str(cache_dir),
        "release_dir": "/opt/sglang/releases/sglang-0.5.23-abc",
    }
    fields.update(changes)
    return fields


def make_cache(root: Path) -> dict[str, bytes]:
    """A JIT cache under ``root`` (Triton, Inductor, FlashInfer's autotune and JIT, an empty file); its files."""
    files = {
        "triton/AB12/__grp__scaled_add.json": b'{"child_paths": {}}',
        "triton/AB12/scaled_add.cubin": bytes(range(256)) * 10,
        "inductor/fxgraph/xy/entry": b"graph",
        "flashinfer/autotune/0.7.2/sm120/abc/rank_tp0_pp0_dp0.json": b"{}",
        ".cache/flashinfer/jit/fused_moe_120/fused_moe_120.so": b"\x7fELF" + b"\0" * 100,
        "empty": b"",
    }
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (root / ".cache/flashinfer/jit/fused_moe_120/fused_moe_120.so").chmod(0o755)
    return files


def node_with_cache(tmp_path: Path) -> dict:
    """A node's cache directory under ``tmp_path`` filled by make_cache, its store (not made yet), the
    files and the key: the ``node`` fixture of the core's tests."""
    cache = tmp_path / "var" / "cache" / "sglang"
    cache.mkdir(parents=True)
    files = make_cache(cache)
    return {"cache": cache, "store": tmp_path / "store", "files": files, "key": key_for(cache)}


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root``: its path relative to ``root`` and its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def hostile(store: Path, key: dict, members: list[tuple[str, str, bytes]], listed: list[dict] | None = None) -> str:
    """An artifact named by its own digest (so it passes the outer check) with ``members``
    (name, tar type, data) and a manifest listing ``listed`` (default: every member, correct sha256)."""
    if listed is None:
        listed = [
            {
                "path": name.removeprefix(wc.MEMBER_PREFIX),
                "size": len(data),
                "mode": 0o644,
                "sha256": hashlib.sha256(data).hexdigest(),
            }
            for name, _kind, data in members
        ]
    manifest = json.dumps({"format": wc.FORMAT, "key": key, "files": listed}).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo(wc.MANIFEST)
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            info.type = kind.encode()
            if kind in ("0",):
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                info.linkname = data.decode() or "/etc/passwd"
                tar.addfile(info)
    raw = buf.getvalue()
    digest = hashlib.sha256(raw).hexdigest()
    path = store / wc.cache_key(key)["digest"] / f"{digest}.tar"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    return str(path)
