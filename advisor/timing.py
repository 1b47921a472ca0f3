"""Step time: compute + exposed communication + optimizer step + offload.

Overlap: a collective of the forward (backward) phase runs while that phase computes; the engine
hides a prior fraction `overlap[engine]` of the compute window. Collectives issued every
micro-batch compete for every micro-batch's window; once-per-step ones (DDP / FSDP no_sync
reductions, ZeRO-1) land in the last micro-batch's window. `step`-phase collectives (ZeRO-1/2
parameter all-gather after the optimizer) are fully exposed.

Framework: host-side hook time per hooked module (priors), not overlapped.

Offload: host<->device copies during backward overlap the same way; updated-parameter uploads,
the CPU optimizer (DeepSpeed CPU-Adam or torch Adam, params/s per node shared by the node's GPUs)
and NVMe traffic (node bandwidth shared by its GPUs) are exposed.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor import compute
from advisor.communication import collective_time_s
from advisor.strategies.base import Context, HostWork, Strategy


@dataclass(frozen=True, slots=True)
class StepParts:
    compute_s: float
    framework_s: float
    exposed_comm_s: float
    optimizer_s: float
    offload_s: float
    comm_total_s: float

    @property
    def step_s(self) -> float:
        return (self.compute_s + self.framework_s + self.exposed_comm_s + self.optimizer_s
                + self.offload_s)


def _exposed(every_s: float, once_s: float, window_s: float, ga: int, overlap: float) -> float:
    hidden = overlap * window_s
    return (ga - 1) * max(0.0, every_s - hidden) + max(0.0, every_s + once_s - hidden)


def offload_time_s(ctx: Context, host: HostWork, window_s: float, overlap: float) -> float:
    """Exposed seconds of offload transfers and the CPU optimizer step for one step."""
    off = ctx.priors.offload
    pcie_bw = ctx.cluster.pcie_bytes_per_s * off.pcie_efficiency
    pcie = max(0.0, host.pcie_overlappable_bytes / pcie_bw - overlap * window_s)
    pcie += host.pcie_exposed_bytes / pcie_bw
    g = ctx.cluster.gpus_per_node
    rate = (off.deepspeed_cpu_adam_params_per_s_per_node if host.cpu_optimizer == "deepspeed"
            else off.torch_cpu_adam_params_per_s_per_node)
    cpu = host.cpu_optimizer_params * g / rate
    nvme = host.nvme_bytes * g / (ctx.cluster.nvme_bytes_per_s_per_node * off.nvme_efficiency)
    return pcie + cpu + nvme


def step_parts(ctx: Context, strategy: Strategy, compute_scale: float = 1.0,
               comm_scale: float = 1.0) -> StepParts:
    """Seconds per optimizer step. `*_scale` multiply achieved efficiency / bandwidth (ranges)."""
    collectives = strategy.collectives(ctx)
    host = strategy.host_work(ctx)
    engine = strategy.engine
    ga = ctx.workload.grad_accum
    mb = compute.micro_batch_time(ctx, compute_scale)
    overlap = ctx.priors.overlap[engine]
    windows = {"forward": mb.forward_s, "backward": mb.backward_s}
    every = {"forward": 0.0, "backward": 0.0, "step": 0.0}
    once = dict(every)
    total = 0.0
    for c in collectives:
        t = collective_time_s(c, ctx.cluster, ctx.priors) / comm_scale
        (every if c.per_micro_batch else once)[c.phase] += t
        total += t * (ga if c.per_micro_batch else 1)
    exposed = every["step"] * ga + once["step"]
    for phase, window in windows.items():
        exposed += _exposed(every[phase], once[phase], window, ga, overlap)
    compute_s = ga * (mb.forward_s + mb.backward_s)
    offload = offload_time_s(ctx, host, ga * mb.backward_s, overlap) / comm_scale
    kind, modules = strategy.framework_hooks(ctx)
    framework = ga * modules * ctx.priors.framework_overhead_s_per_module[kind]
    return StepParts(compute_s=compute_s, framework_s=framework, exposed_comm_s=exposed,
                     optimizer_s=compute.optimizer_step_s(ctx, strategy.gpu_optimizer_params(ctx)),
                     offload_s=offload, comm_total_s=total)
