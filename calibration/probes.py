"""Microbenchmarks on the real devices: each one warms up, synchronizes, then times.

Every probe returns plain JSON-able dicts (they go into the profile's `measurements` as is):

    gemm           the matmuls of one decoder layer's forward + backward at the model's shapes
                   (per hidden size): FLOP/s achieved, and the spread of the repeats
    attention      scaled_dot_product_attention forward + backward (causal), FLOP/s
    memory         device-memory copy bandwidth (read + write bytes / s)
    collectives    all-reduce / all-gather / reduce-scatter bus bandwidth over message sizes,
                   within a node and (one rank per node) across nodes
    host_device    pinned host -> device and device -> host copies (CPU mode: a host memcpy)
    cpu_adam       optimizer steps per second on the CPU, all ranks of a node at once
    nvme           write (fsync) and read of a file under a given path

Bus bandwidth follows nccl-tests (doc/PERFORMANCE.md): busbw = bytes / t * 2(n-1)/n for
all-reduce and * (n-1)/n for all-gather / reduce-scatter, `bytes` the full buffer.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F

MiB = 1024**2


@dataclass(frozen=True, slots=True)
class Budget:
    """How long each probe may run: repeats, sizes. `quick` keeps the whole set near 10 s."""

    warmup: int
    repeats: int
    hidden_sizes: tuple[int, ...]
    tokens: int
    message_bytes: tuple[int, ...]
    copy_bytes: int
    adam_params: int
    nvme_bytes: int


def budget(device: torch.device, quick: bool) -> Budget:
    if device.type == "cpu":  # gloo on host cores: tiny sizes, a few seconds in all
        return Budget(warmup=1, repeats=3 if quick else 5, hidden_sizes=(64, 128, 256),
                      tokens=256, message_bytes=tuple(2**k for k in range(12, 23, 2)),
                      copy_bytes=32 * MiB, adam_params=2**20, nvme_bytes=32 * MiB)
    sizes = (1, 16, 256) if quick else (1, 4, 16, 64, 256, 1024)
    return Budget(warmup=3, repeats=5 if quick else 10,
                  hidden_sizes=(1024, 2048, 4096) if quick else (768, 1024, 2048, 4096, 8192),
                  tokens=4096, message_bytes=tuple(s * MiB for s in sizes),
                  copy_bytes=1024 * MiB, adam_params=2**24 if quick else 2**26,
                  nvme_bytes=256 * MiB if quick else 1024 * MiB)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: torch.device, b: Budget,
          repeats: int | None = None) -> list[float]:
    """Seconds of each timed call of `fn`, after `b.warmup` untimed ones; synchronized."""
    for _ in range(b.warmup):
        fn()
    sync(device)
    out = []
    for _ in range(repeats or b.repeats):
        start = time.perf_counter()
        fn()
        sync(device)
        out.append(time.perf_counter() - start)
    return out


def spread(samples: list[float]) -> float:
    """Relative spread of repeated timings: median absolute deviation / median (robust to the
    one slow repeat a shared host produces; 0 for one sample)."""
    mid = statistics.median(samples)
    return statistics.median(abs(x - mid) for x in samples) / mid if len(samples) > 1 else 0.0


def layer_shapes(hidden: int, kv_dim: int, ffn: int, tokens: int) -> list[tuple[int, int, int]]:
    """(m, k, n) of every matmul in one Llama layer's forward and backward: per weight (k x n)
    the forward x @ W, the input gradient dy @ W^T and the weight gradient x^T @ dy."""
    weights = [(hidden, hidden + 2 * kv_dim), (hidden, hidden), (hidden, 2 * ffn), (ffn, hidden)]
    out = []
    for k, n in weights:
        out += [(tokens, k, n), (tokens, n, k), (k, tokens, n)]
    return out


def default_layer(hidden: int) -> tuple[int, int, int]:
    """(hidden, kv_dim, ffn) of a Llama-style layer: GQA with kv = hidden / 4, ffn = 8/3 hidden
    rounded up to 64."""
    return hidden, hidden // 4, -(-8 * hidden // 3 // 64) * 64


def gemm(layers: list[tuple[int, int, int]], device: torch.device, dtype: torch.dtype,
         b: Budget) -> list[dict]:
    """Achieved FLOP/s of one layer's matmuls for each (hidden, kv_dim, ffn): the model's own
    shape and `default_layer` shapes around it."""
    results = []
    for h, kv_dim, ffn in sorted(set(layers)):
        shapes = layer_shapes(h, kv_dim, ffn, b.tokens)
        mats = [(torch.randn(m, k, device=device, dtype=dtype), torch.randn(k, n, device=device, dtype=dtype))
                for m, k, n in shapes]
        samples = timed(lambda mats=mats: [x @ w for x, w in mats], device, b)
        flops = sum(2.0 * m * k * n for m, k, n in shapes)
        results.append({"hidden": h, "kv_dim": kv_dim, "ffn": ffn, "tokens": b.tokens,
                        "flops": flops, "seconds": samples, "flops_per_s": flops / min(samples),
                        "spread": spread(samples)})
        del mats
    return results


def attention(hidden: int, device: torch.device, dtype: torch.dtype, b: Budget, seq_len: int) -> dict:
    """Causal SDPA forward + backward. FLOPs as the advisor counts them: 12 * h * s per token
    over the full square, times the causal half (compute.py, flash_causal_skip)."""
    head_dim = 64 if hidden < 1024 else 128
    heads, batch = hidden // head_dim, max(1, b.tokens // seq_len)
    q, k, v = (torch.randn(batch, heads, seq_len, head_dim, device=device, dtype=dtype, requires_grad=True)
               for _ in range(3))

    def step() -> None:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(torch.ones_like(out))

    samples = timed(step, device, b)
    flops = 12.0 * hidden * seq_len * batch * seq_len * 0.5
    return {"hidden": hidden, "seq_len": seq_len, "flops": flops, "seconds": samples,
            "flops_per_s": flops / min(samples), "spread": spread(samples)}


def memory_bandwidth(device: torch.device, b: Budget) -> dict:
    """Device-memory copy: reads and writes `copy_bytes` each, so 2 x bytes move."""
    src = torch.empty(b.copy_bytes // 4, device=device, dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    samples = timed(lambda: dst.copy_(src), device, b)
    return {"bytes": b.copy_bytes, "seconds": samples,
            "bytes_per_s": 2 * b.copy_bytes / min(samples), "spread": spread(samples)}


_BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
               "reduce_scatter": lambda n: (n - 1) / n}


def collectives(device: torch.device, b: Budget, group: dist.ProcessGroup | None,
                tier: str, progress: Callable[[str], None]) -> list[dict]:
    """Bus bandwidth of each collective over `b.message_bytes`; `group` None means the world."""
    n = dist.get_world_size(group)
    if n < 2:
        return []
    out = []
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        progress(f"{tier} {op}, {b.message_bytes[0] / MiB:g} to {b.message_bytes[-1] / MiB:g} MiB")
        for size in b.message_bytes:
            elems = max(n, size // 2 // n * n)  # bf16, divisible by the group size
            full = torch.ones(elems, device=device, dtype=torch.bfloat16)
            shard = torch.ones(elems // n, device=device, dtype=torch.bfloat16)
            call = {"all_reduce": lambda f=full: dist.all_reduce(f, group=group),
                    "all_gather": lambda f=full, s=shard: dist.all_gather_into_tensor(f, s, group=group),
                    "reduce_scatter": lambda f=full, s=shard: dist.reduce_scatter_tensor(s, f, group=group),
                    }[op]
            samples = timed(call, device, b)
            worst = torch.tensor(samples, dtype=torch.float64, device=device)  # NCCL: on the GPU
            dist.all_reduce(worst, op=dist.ReduceOp.MAX, group=group)  # the slowest rank sets the time
            samples = worst.tolist()
            nbytes = elems * 2
            out.append({"tier": tier, "op": op, "ranks": n, "bytes": nbytes, "seconds": samples,
                        "bus_bytes_per_s": nbytes * _BUS_FACTOR[op](n) / min(samples),
                        "spread": spread(samples)})
    return out


def host_device(device: torch.device, b: Budget) -> dict:
    """Pinned host <-> device copy bandwidth per direction. CPU mode has no PCIe: a host memcpy
    stands in (labelled), so offload terms have something measured to work with."""
    elems = b.copy_bytes // 4
    if device.type == "cpu":
        src, dst = torch.ones(elems), torch.empty(elems)
        samples = timed(lambda: dst.copy_(src), device, b)
        rate = b.copy_bytes / min(samples)
        return {"kind": "host memcpy (CPU mode, no PCIe)", "bytes": b.copy_bytes,
                "h2d_bytes_per_s": rate, "d2h_bytes_per_s": rate, "spread": spread(samples)}
    host = torch.ones(elems, pin_memory=True)
    dev = torch.empty(elems, device=device)
    up = timed(lambda: dev.copy_(host, non_blocking=True), device, b)
    down = timed(lambda: host.copy_(dev, non_blocking=True), device, b)
    return {"kind": "pinned", "bytes": b.copy_bytes, "h2d_bytes_per_s": b.copy_bytes / min(up),
            "d2h_bytes_per_s": b.copy_bytes / min(down), "spread": max(spread(up), spread(down))}


def cpu_adam(b: Budget, try_deepspeed: bool) -> dict:
    """Adam steps over `adam_params` fp32 parameters on the host, this rank's share of the cores.

    DeepSpeed's CPU Adam when asked and it loads (it may JIT-build once, minutes); torch AdamW
    (foreach) otherwise. The caller sums the ranks of a node: the priors are per node.
    """
    params = [torch.nn.Parameter(torch.randn(b.adam_params // 8)) for _ in range(8)]
    for p in params:
        p.grad = torch.randn_like(p)
    kind = "torch"
    opt: torch.optim.Optimizer = torch.optim.AdamW(params, lr=1e-4)
    if try_deepspeed:
        try:
            from deepspeed.ops.adam import DeepSpeedCPUAdam

            opt, kind = DeepSpeedCPUAdam(params, lr=1e-4), "deepspeed"
        except Exception as exc:  # noqa: BLE001 - any build failure means: use torch
            kind = f"torch (DeepSpeed CPU Adam unavailable: {type(exc).__name__})"
    samples = timed(opt.step, torch.device("cpu"), b)
    return {"kind": kind, "params": b.adam_params, "seconds": samples,
            "params_per_s": b.adam_params / min(samples), "spread": spread(samples)}


def nvme(path: str, b: Budget) -> dict:
    """Sequential write (with fsync) and read of one file in `path`; the read follows
    posix_fadvise(DONTNEED), so the page cache does not serve it where the kernel honours that."""
    block = os.urandom(4 * MiB)
    fd, name = tempfile.mkstemp(dir=path, prefix="advisor-calibration-")
    try:
        start = time.perf_counter()
        for _ in range(max(1, b.nvme_bytes // len(block))):
            os.write(fd, block)
        os.fsync(fd)
        write_s = time.perf_counter() - start
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.lseek(fd, 0, os.SEEK_SET)
        start = time.perf_counter()
        while os.read(fd, len(block)):
            pass
        read_s = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(name)
    nbytes = max(1, b.nvme_bytes // len(block)) * len(block)
    return {"path": path, "bytes": nbytes, "write_bytes_per_s": nbytes / write_s,
            "read_bytes_per_s": nbytes / read_s}
