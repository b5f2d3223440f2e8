# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Measure a warm start carried between nodes, on a machine with torch, Triton and a GPU.

Four cases, each in a fresh Python process with TRITON_CACHE_DIR and TORCHINDUCTOR_CACHE_DIR under
one cache directory (as SGLANG_CACHE_DIR lays them out):

- cold: an empty cache directory A;
- warm: A again, as the cold run left it;
- moved: A packed into an artifact with the collection's own warm-cache core
  (plugins/module_utils/sglang/warm_cache.py), A REMOVED, the artifact restored at another path B
  (expected to miss: Triton's group files and inductor's tuned configs name absolute paths);
- carried: B removed, the artifact restored at A's absolute path (expected to hit).

The source directory is gone before each restored case runs, so no case can read the files of
another (a copy elsewhere "hits" while the source still exists). Each case compiles N distinct
Triton kernels (a constexpr per kernel) and a torch.compile(mode="max-autotune-no-cudagraphs")
transformer block, and reports seconds (process, import, Triton compile, torch.compile) and hits:
Triton misses are the kernels whose __grp__ file the run (re)wrote, inductor's from its counters.

    python3 benchmarks/warm_cache_gpu.py --kernels 8 --work /tmp/wc --out result.json

The core is imported by file path (--core, default plugins/module_utils beside this file): no
Ansible is needed on the GPU machine.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CORE_FILES = ("sglang/warm_cache.py", "common/atomic_file.py", "common/confined_path.py")


def load_core(core_dir: str, work: str):
    """The warm_cache module, from ``core_dir``, under the package name the collection uses."""
    pkg = os.path.join(work, "pkgroot", "ansible_collections", "gpufleet", "sglang", "plugins", "module_utils")
    os.makedirs(pkg, exist_ok=True)
    for depth in range(5):
        init = os.path.join(pkg, *([".."] * depth), "__init__.py")
        open(init, "a").close()
    for name in CORE_FILES:
        room = os.path.join(pkg, os.path.dirname(name))
        os.makedirs(room, exist_ok=True)
        open(os.path.join(room, "__init__.py"), "a").close()
        shutil.copyfile(os.path.join(core_dir, name), os.path.join(pkg, name))
    sys.path.insert(0, os.path.join(work, "pkgroot"))
    return importlib.import_module("ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.warm_cache")


def child(cache: str, kernels: int) -> dict:
    """One case: compile in this process, with the caches under ``cache`` (set by the parent)."""
    started = time.time()
    t0 = time.perf_counter()
    import torch  # noqa: PLC0415 (timed: the import is part of a start)
    import triton  # noqa: PLC0415
    import triton.language as tl  # noqa: PLC0415
    from torch._dynamo.utils import counters  # noqa: PLC0415

    imported = time.perf_counter() - t0

    @triton.jit
    def scaled_add(x_ptr, y_ptr, out_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):  # noqa: PLR0917 (Triton's calling convention)
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x * (K + 1) + y, mask=mask)

    n = 1 << 20
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    t0 = time.perf_counter()
    for k in range(kernels):
        scaled_add[(triton.cdiv(n, 1024),)](x, y, out, n, K=k, BLOCK=1024)
        torch.cuda.synchronize()
        if not torch.allclose(out, x * (k + 1) + y, rtol=1e-4, atol=1e-4):  # Triton fuses into an FMA
            raise SystemExit(f"kernel {k} gave a wrong result")
    triton_s = time.perf_counter() - t0

    class Block(torch.nn.Module):
        def __init__(self, d: int = 1024) -> None:
            super().__init__()
            self.norm1, self.norm2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
            self.up, self.down = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
            self.heads = 16

        def forward(self, h):
            b, s, d = h.shape
            q, k, v = self.qkv(self.norm1(h)).view(b, s, 3, self.heads, d // self.heads).unbind(2)
            att = torch.nn.functional.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            )
            h = h + self.proj(att.transpose(1, 2).reshape(b, s, d))
            return h + self.down(torch.nn.functional.gelu(self.up(self.norm2(h))))

    torch.manual_seed(0)
    block = Block().cuda().half()
    compiled = torch.compile(block, mode="max-autotune-no-cudagraphs")
    inp = torch.randn(4, 256, 1024, device="cuda", dtype=torch.half)
    t0 = time.perf_counter()
    with torch.no_grad():
        compiled(inp)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    triton_dir = os.environ["TRITON_CACHE_DIR"]
    rewritten = 0
    for here, _dirs, names in os.walk(triton_dir):
        for name in names:
            if name.startswith("__grp__scaled_add") and os.stat(os.path.join(here, name)).st_mtime >= started:
                rewritten += 1
    inductor = counters["inductor"]
    return {
        "import_s": round(imported, 2),
        "triton_compile_s": round(triton_s, 2),
        "triton_misses": rewritten,
        "triton_hits": kernels - rewritten,
        "torch_compile_s": round(compile_s, 2),
        "fxgraph_cache_hit": int(inductor.get("fxgraph_cache_hit", 0)),
        "fxgraph_cache_miss": int(inductor.get("fxgraph_cache_miss", 0)),
        "gpu_model": torch.cuda.get_device_name(0),
        "compute_capability": "{}.{}".format(*torch.cuda.get_device_capability(0)),
        "cuda_version": torch.version.cuda or "none",
        "torch_version": torch.__version__.split("+")[0],
        "triton_version": triton.__version__,
    }


def run_case(name: str, cache: str, kernels: int) -> dict:
    env = dict(os.environ)
    env.update(
        TRITON_CACHE_DIR=os.path.join(cache, "triton"),
        TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"),
        PYTHONUNBUFFERED="1",
    )
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", cache, "--kernels", str(kernels)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"case {name} failed:\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result.update(case=name, cache=cache, process_s=round(wall, 2))
    print(json.dumps(result), flush=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=8)
    parser.add_argument("--work", default="/tmp/warm-cache-gpu")
    parser.add_argument("--core", default=os.path.join(HERE, "..", "plugins", "module_utils"))
    parser.add_argument("--out", default="")
    parser.add_argument("--child", default="")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.kernels)))
        return 0
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    core = load_core(os.path.abspath(args.core), args.work)
    source, other, store = (os.path.join(args.work, n) for n in ("node-a/cache", "node-b/cache", "store"))
    results = [run_case("cold", source, args.kernels), run_case("warm", source, args.kernels)]
    first = results[0]
    key = {
        "sglang_version": "none",
        "flashinfer_version": "none",
        "gpu_model": first["gpu_model"],
        "compute_capability": first["compute_capability"],
        "driver_version": "unknown",
        "cuda_version": first["cuda_version"],
        "model_revision": "bench",
        "profile": "warm_cache_gpu",
        "cache_dir": source,
        "release_dir": os.path.dirname(sys.executable),
    }
    t0 = time.perf_counter()
    packed = core.pack(source, store, key)
    pack_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    checked = core.verify(packed["path"])
    verify_s = time.perf_counter() - t0
    shutil.rmtree(source)  # the source must be gone, or a copy elsewhere reads its files
    t0 = time.perf_counter()
    core.restore(packed["path"], other, key, relocate=True)
    restore_s = time.perf_counter() - t0
    results.append(run_case("moved", other, args.kernels))
    shutil.rmtree(other)
    core.restore(packed["path"], source, key)
    results.append(run_case("carried", source, args.kernels))
    summary = {
        "artifact": {
            "files": packed["files"],
            "bytes": packed["bytes"],
            "skipped": len(packed["skipped"]),
            "digest": packed["digest"],
            "verified_files": checked["files"],
            "pack_s": round(pack_s, 2),
            "verify_s": round(verify_s, 2),
            "restore_s": round(restore_s, 2),
        },
        "kernels": args.kernels,
        "cases": results,
    }
    print(
        f"{'case':8} {'process_s':>9} {'import_s':>8} {'triton_s':>8} {'hits':>6} {'compile_s':>9} {'fx hit/miss':>11}"
    )
    for r in results:
        print(
            f"{r['case']:8} {r['process_s']:9.2f} {r['import_s']:8.2f} {r['triton_compile_s']:8.2f} "
            f"{r['triton_hits']:>3}/{args.kernels:<2} {r['torch_compile_s']:9.2f} "
            f"{r['fxgraph_cache_hit']:>5}/{r['fxgraph_cache_miss']:<5}"
        )
    print(json.dumps(summary["artifact"]))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(summary, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
