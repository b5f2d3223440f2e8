# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""GPU workloads an SGLang server runs, one per name, each a short check that raises on failure.

    python3 workloads.py NAME        # exit 0 and a last line "PASS ..."; "SKIP ..." exit 3; else a traceback

Single GPU: cuda_init, matmul_bf16, cuda_graph, nvml, nvidia_smi, triton_jit, torch_compile,
nccl_single, cuda_ipc_legacy, cuda_ipc_expandable. Several GPUs (SKIP with "needs N GPUs" on fewer):
nccl_allreduce, nccl_allgather (both under the NCCL_* variant in the environment, see run_matrix.py),
dist_per_gpu, cuda_ipc_ranks, tp_matmul.
"""

# ruff: noqa: PLC0415 - each workload imports torch/triton itself: run_matrix.py imports this file for the names only
from __future__ import annotations

import os
import socket
import subprocess
import sys

SKIP = 3


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cuda_init() -> str:
    import torch

    torch.cuda.init()
    props = torch.cuda.get_device_properties(0)
    x = torch.ones(1 << 20, device="cuda")
    assert float(x.sum()) == float(1 << 20)
    return f"{props.name}, {torch.cuda.device_count()} GPU(s), torch {torch.__version__}, CUDA {torch.version.cuda}"


def matmul_bf16() -> str:
    import torch

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    ref = a.float() @ b.float()
    err = float((a @ b).float().sub(ref).abs().max() / ref.abs().max())
    assert err < 2e-2, err
    return f"max rel err {err:.2e}"


def cuda_graph() -> str:
    import torch

    x = torch.randn(1024, 1024, device="cuda")
    w = torch.randn(1024, 1024, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _round in range(3):
            y = torch.relu(x @ w)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = torch.relu(x @ w)
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.allclose(y, torch.relu(x @ w), atol=1e-2)
    return "captured and replayed"


def nvml() -> str:
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    name = pynvml.nvmlDeviceGetName(handle)
    power = pynvml.nvmlDeviceGetPowerUsage(handle)
    driver = pynvml.nvmlSystemGetDriverVersion()
    pynvml.nvmlShutdown()
    return f"{name}, {power / 1000:.0f} W, driver {driver}"


def nvidia_smi() -> str:
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[0]


def triton_jit() -> str:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    n = 98432
    x, y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    out = torch.empty_like(x)
    add[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    assert torch.allclose(out, x + y)
    return f"triton {triton.__version__}"


def torch_compile() -> str:
    import torch

    def f(x):
        return torch.sin(x) * 2 + torch.cos(x).square()

    compiled = torch.compile(f)
    x = torch.randn(10000, device="cuda")
    assert torch.allclose(compiled(x), f(x), atol=1e-5)
    return "inductor"


def nccl_single() -> str:
    import torch
    import torch.distributed as dist

    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    t = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    assert float(t[0]) == 1.0
    dist.destroy_process_group()
    return f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}"


def _ipc_consumer(queue, done) -> None:
    import torch  # noqa: F401 - torch's CUDA tensor reductions, before the tensor is unpickled

    tensor = queue.get()
    done.put(float(tensor.sum()))


def _cuda_ipc(expandable: bool) -> str:
    if expandable:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import torch
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue, done = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=_ipc_consumer, args=(queue, done))
    proc.start()
    tensor = torch.full((1 << 20,), 2.0, device="cuda")
    queue.put(tensor)
    got = done.get(timeout=120)
    proc.join(60)
    assert proc.exitcode == 0, f"consumer exit {proc.exitcode}"
    assert got == 2.0 * (1 << 20), got
    return f"tensor shared ({os.environ.get('PYTORCH_CUDA_ALLOC_CONF', 'default allocator')})"


def cuda_ipc_legacy() -> str:
    return _cuda_ipc(False)


def cuda_ipc_expandable() -> str:
    return _cuda_ipc(True)


# ----------------------------------------------------------------------------- several GPUs


def _gpus() -> int:
    import torch

    return torch.cuda.device_count()


def _need(n: int) -> None:
    have = _gpus()
    if have < n:
        print(f"SKIP needs {n} GPUs (have {have})")
        sys.exit(SKIP)


def _rank_main(rank: int, world: int, port: int, what: str, queue) -> None:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    if what == "allreduce":
        t = torch.full((64 << 20,), float(rank + 1), device="cuda")
        dist.all_reduce(t)
        assert float(t[0]) == world * (world + 1) / 2
    elif what == "allgather":
        t = torch.full((8 << 20,), float(rank), device="cuda")
        out = [torch.empty_like(t) for _rank in range(world)]
        dist.all_gather(out, t)
        assert [float(o[0]) for o in out] == [float(r) for r in range(world)]
    elif what == "per_gpu":
        t = torch.ones(1024, device="cuda") * rank
        dist.broadcast(t, src=0)
        dist.barrier()
        assert float(t.sum()) == 0.0
    elif what == "tp_matmul":
        # column-parallel then row-parallel linear, as a TP MLP step; all_reduce of the partial sums
        torch.manual_seed(0)
        x = torch.randn(256, 4096, device="cuda", dtype=torch.bfloat16)
        w1 = torch.randn(4096, 8192, device="cuda", dtype=torch.bfloat16) / 64
        w2 = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16) / 64
        shard = 8192 // world
        part = torch.relu(x @ w1[:, rank * shard : (rank + 1) * shard]) @ w2[rank * shard : (rank + 1) * shard]
        dist.all_reduce(part)
        ref = torch.relu(x.float() @ w1.float()) @ w2.float()
        err = float((part.float() - ref).abs().max() / ref.abs().max())
        assert err < 5e-2, err
    elif what == "ipc_ranks":
        # rank 0 hands a CUDA tensor to rank 1 through torch.multiprocessing (CUDA IPC between rank processes)
        if rank == 0:
            queue.put(torch.full((1 << 20,), 3.0, device="cuda"))
        dist.barrier()
        if rank == 1:
            got = queue.get(timeout=120)
            assert float(got.sum()) == 3.0 * (1 << 20)
        dist.barrier()
    torch.cuda.synchronize()
    dist.destroy_process_group()


def _spawn_ranks(what: str) -> str:
    import torch.multiprocessing as mp

    world = _gpus()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, world, port, what, queue)) for r in range(world)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(300)
    codes = [proc.exitcode for proc in procs]
    assert codes == [0] * world, f"rank exit codes {codes}"
    variant = " ".join(
        f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("NCCL_") and k != "NCCL_NVLS_ENABLE"
    )
    return f"{world} ranks {variant or '(default transports)'}"


SINGLE = (
    "cuda_init",
    "matmul_bf16",
    "cuda_graph",
    "nvml",
    "nvidia_smi",
    "triton_jit",
    "torch_compile",
    "nccl_single",
    "cuda_ipc_legacy",
    "cuda_ipc_expandable",
)
# the workloads of two GPUs or more: each runs one rank per GPU (_spawn_ranks) doing what _rank_main names
RANKS = {
    "nccl_allreduce": "allreduce",
    "nccl_allgather": "allgather",
    "dist_per_gpu": "per_gpu",
    "cuda_ipc_ranks": "ipc_ranks",
    "tp_matmul": "tp_matmul",
}
MULTI = tuple(RANKS)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in SINGLE + MULTI:
        print(f"usage: workloads.py {{{','.join(SINGLE + MULTI)}}}", file=sys.stderr)
        return 2
    if argv[0] in RANKS:
        _need(2)
        detail = _spawn_ranks(RANKS[argv[0]])
    else:
        detail = globals()[argv[0]]()
    print(f"PASS {argv[0]}: {detail}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
