"""A few real training steps of the tiny Llama under each strategy, with memory and step time.

Strategies (advisor names): ddp (DDP + bf16 autocast), fsdp (FSDP2 fully_shard per layer and
the root, bf16 MixedPrecisionPolicy), zero1 / zero2 / zero3 (DeepSpeed, bf16) and
zero2-offload (ZeRO-2 with the optimizer on the CPU). DeepSpeed gets a torch AdamW: no C++
op build (DeepSpeedCPUAdam would be faster for offload; the profile's CPU-Adam rate is the torch
one these runs use), and in CPU mode its shared-memory op is stubbed out (gloo does the work).
Bucket sizes are the ones `advisor emit` writes (advisor/core/engines.py).

Per rank and strategy it records (memory over building the engine, a warm-up step and one
more step; the timed steps come after):
    step_s                 timed steps, wall clock, synchronized, the slowest rank's
    peak_allocated_bytes   GPU: torch.cuda.max_memory_allocated, less what was allocated before
    peak_reserved_bytes    GPU: torch.cuda.max_memory_reserved, likewise
    non_torch_bytes        GPU: device memory in use that torch did not reserve (CUDA context,
                           NCCL, cuBLAS workspaces)
    peak_tracked_bytes     CPU mode: the peak of live tensor bytes torch's MemTracker sees
                           (torch/distributed/_tools/mem_tracker.py: every tensor the run creates,
                           parameters, gradients, optimizer state, buffers, activations,
                           temporaries); `tracked` is its breakdown by kind at that peak.
                           The host has no caching allocator, so this is allocated, not reserved.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist

from advisor.core.engines import DdpConfig, FsdpConfig, ZeroConfig
from advisor.profiles.validation import engine_config_of
from calibration.tiny_llama import TinyLlama, TinyLlamaConfig, model_spec, sample_batch


@dataclass(frozen=True, slots=True)
class RunConfig:
    """The model and step every strategy runs."""

    model: TinyLlamaConfig
    micro_batch: int
    seq_len: int
    steps: int
    """Timed steps, after one warm-up step and one measured (instrumented) step."""


class _Engine:
    """One wrapped model: `step` runs forward, backward and the optimizer; `states` counts the
    model states and buffers this rank holds at the step's peak (after backward)."""

    def __init__(self, name: str, cfg: RunConfig, device: torch.device):
        torch.manual_seed(0)
        self.name, self.cfg, self.device = name, cfg, device
        self.module = TinyLlama(cfg.model)
        # What the advisor's strategy asks its engine to do (advisor/core/engines.py).
        self.config = engine_config_of(name, model_spec(cfg.model), dist.get_world_size())
        if isinstance(self.config, DdpConfig):
            self._ddp(self.config)
        elif isinstance(self.config, FsdpConfig):
            self._fsdp()
        elif isinstance(self.config, ZeroConfig):
            self._deepspeed(self.config)

    def _ddp(self, config: DdpConfig) -> None:
        from torch.nn.parallel import DistributedDataParallel

        self.module.to(self.device)
        ids = [self.device.index] if self.device.type == "cuda" else None
        self.wrapped = DistributedDataParallel(self.module, device_ids=ids,
                                               bucket_cap_mb=config.bucket_cap_bytes / 2**20)
        self.optimizer = torch.optim.AdamW(self.module.parameters(), lr=1e-4)

    def _fsdp(self) -> None:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        self.module.to(self.device)
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
        for layer in self.module.layers:
            fully_shard(layer, mp_policy=mp)
        self.wrapped = fully_shard(self.module, mp_policy=mp)
        self.optimizer = torch.optim.AdamW(self.module.parameters(), lr=1e-4)

    def _deepspeed(self, config: ZeroConfig) -> None:
        if self.device.type == "cpu":  # CPU mode: no shared-memory C++ op build (minutes)
            import deepspeed.comm.torch  # noqa: F401 - load the module to patch it

            sys.modules["deepspeed.comm.torch"].build_shm_op = lambda *a, **k: None
        import deepspeed

        b = config.buckets
        zero = {"stage": config.stage, "reduce_bucket_size": b.reduce_bucket_size,
                "allgather_bucket_size": b.allgather_bucket_size, "overlap_comm": True}
        if config.stage == 3:
            zero |= {"stage3_prefetch_bucket_size": b.stage3_prefetch_bucket_size,
                     "stage3_param_persistence_threshold": b.stage3_param_persistence_threshold}
        if config.offload_optimizer == "cpu":
            zero["offload_optimizer"] = {"device": "cpu", "pin_memory": self.device.type == "cuda"}
        config = {"train_micro_batch_size_per_gpu": self.cfg.micro_batch,
                  "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
                  "zero_optimization": zero, "zero_force_ds_cpu_optimizer": False,
                  "steps_per_print": 2**31 - 1}
        optimizer = torch.optim.AdamW(self.module.parameters(), lr=1e-4)
        self.wrapped, self.optimizer, _, _ = deepspeed.initialize(
            model=self.module, optimizer=optimizer, config=config)

    def step(self, ids: torch.Tensor, labels: torch.Tensor) -> None:
        """One optimizer step, as HF Trainer runs it: outputs dropped before backward,
        zero_grad(set_to_none=True) after the step."""
        if isinstance(self.config, ZeroConfig):
            loss, _ = self.wrapped(ids, labels)
            self.wrapped.backward(loss)
            self.wrapped.step()
            return
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.name == "ddp"):
            loss, _ = self.wrapped(ids, labels)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _slowest(values: list[float], device: torch.device) -> list[float]:
    """Each timed step's slowest rank (the tensor lives on the device: NCCL needs it there)."""
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def run_strategy(name: str, cfg: RunConfig, device: torch.device) -> dict:
    """Build the engine, a warm-up step and a measured step (memory peak over all three), then
    `cfg.steps` timed steps."""
    gc.collect()
    cuda = device.type == "cuda"
    tracker = nullcontext()
    if cuda:
        torch.cuda.empty_cache()
        base_alloc, base_reserved = torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device)
        torch.cuda.reset_peak_memory_stats(device)
    else:  # the host has no allocator counters: track every tensor the run creates
        from torch.distributed._tools.mem_tracker import MemTracker

        tracker = MemTracker()
    with tracker:
        engine = _Engine(name, cfg, device)
        ids, labels = sample_batch(cfg.model, cfg.micro_batch, cfg.seq_len, seed=dist.get_rank(),
                                   device=device)
        engine.step(ids, labels)  # warm-up: optimizer state, DDP's rebuilt buckets
        if not cuda:
            tracker.reset_mod_stats()  # per-module stats only (it requires this between steps)
        engine.step(ids, labels)  # measured: the peak with every state in place
    times = []
    for _ in range(cfg.steps):
        dist.barrier()
        _sync(device)
        start = time.perf_counter()
        engine.step(ids, labels)
        _sync(device)
        times.append(time.perf_counter() - start)
    result = {"strategy": name, "rank": dist.get_rank(), "step_s": _slowest(times, device),
              "peak_allocated_bytes": None, "peak_reserved_bytes": None, "non_torch_bytes": None,
              "peak_tracked_bytes": None, "tracked": None}
    if cuda:
        free, total = torch.cuda.mem_get_info(device)
        result |= {"peak_allocated_bytes": torch.cuda.max_memory_allocated(device) - base_alloc,
                   "peak_reserved_bytes": torch.cuda.max_memory_reserved(device) - base_reserved,
                   "non_torch_bytes": total - free - torch.cuda.memory_reserved(device)}
    else:
        peak = tracker.get_tracker_snapshot("peak")[device]
        result |= {"peak_tracked_bytes": peak["Total"],
                   "tracked": {str(getattr(k, "value", k)): v for k, v in peak.items()}}
    del engine, tracker
    gc.collect()
    return result


def local_compute(cfg: RunConfig, device: torch.device) -> list[float]:
    """Forward + backward of the bare model (bf16 autocast, no wrapper, no communication, no
    optimizer): the compute the strategies share, timed like them. Fits the layer-level
    efficiency (advisor/profiles/fit.py)."""
    torch.manual_seed(0)
    module = TinyLlama(cfg.model).to(device)
    ids, labels = sample_batch(cfg.model, cfg.micro_batch, cfg.seq_len, seed=dist.get_rank(), device=device)

    def step() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss, _ = module(ids, labels)
        loss.backward()
        module.zero_grad(set_to_none=True)

    step()
    times = []
    for _ in range(max(3, cfg.steps)):
        dist.barrier()
        _sync(device)
        start = time.perf_counter()
        step()
        _sync(device)
        times.append(time.perf_counter() - start)
    return _slowest(times, device)


def run_all(strategies: list[str], cfg: RunConfig, device: torch.device, progress) -> dict:
    """Every strategy in turn; returns (on every rank) the per-rank results gathered."""
    progress("local compute", 0, len(strategies) + 1)
    local = local_compute(cfg, device)
    runs = []
    for i, name in enumerate(strategies):
        progress(name, i + 1, len(strategies) + 1)
        mine = run_strategy(name, cfg, device)
        ranks: list[dict] = [{}] * dist.get_world_size()
        dist.all_gather_object(ranks, mine)
        runs.append({"strategy": name, "median_step_s": statistics.median(mine["step_s"]),
                     "ranks": ranks})
    return {"model": asdict(cfg.model), "micro_batch": cfg.micro_batch, "seq_len": cfg.seq_len,
            "steps": cfg.steps, "world": dist.get_world_size(), "local_step_s": local,
            "local_median_s": statistics.median(local), "runs": runs}
