"""Step time: compute + exposed communication + optimizer step + offload.

Overlap: a collective of the forward (backward) phase runs while that phase computes; the engine
hides a prior fraction `overlap[engine]` of the compute window. Hidden collectives still cost a
prior fraction `collective.interference` of their time (NCCL kernels take SMs and HBM
bandwidth from the GEMMs they overlap; each phase's first gather and last reduction have no
compute to hide behind): exposed = max(interference * comm, comm - overlap * window).
Collectives issued every micro-batch compete for every micro-batch's window; once-per-step
ones (DDP / FSDP no_sync reductions, ZeRO-1) land in the last micro-batch's window.
`step`-phase collectives (ZeRO-1/2 parameter all-gather after the optimizer) are fully exposed.

Framework: host-side hook time per hooked module (priors), not overlapped.

Offload: host<->device copies during backward overlap the same way; updated-parameter uploads,
the CPU optimizer (DeepSpeed CPU-Adam or torch Adam, params/s per node shared by the node's GPUs)
and NVMe traffic (node bandwidth shared by its GPUs) are exposed.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.core import compute
from advisor.core.communication import Collective, collective_time_s
from advisor.core.context import Context
from advisor.core.protocol import HostWork, Strategy


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


@dataclass(frozen=True, slots=True)
class StepInputs:
    """The step's terms at the priors' expected values, computed once; `combine` applies the
    overlap rules, optionally with scaled compute efficiency and bandwidth (the range)."""

    grad_accum: int
    overlap: float
    interference: float
    collectives: tuple[tuple[Collective, float], ...]
    """Each collective the strategy issues and its seconds per occurrence."""
    host: HostWork
    forward_s: float
    """One micro-batch's forward."""
    backward_s: float
    """One micro-batch's backward, recomputation included."""
    every_s: dict[str, float]
    """Collective seconds issued every micro-batch, by phase."""
    once_s: dict[str, float]
    """Collective seconds issued once per step, by phase."""
    comm_total_s: float
    pcie_overlappable_s: float
    offload_exposed_s: float
    """Parameter uploads, CPU optimizer and NVMe traffic: not overlapped."""
    framework_s: float
    optimizer_s: float


def _exposed(every_s: float, once_s: float, window_s: float, ga: int, overlap: float,
             interference: float) -> float:
    """Exposed seconds of one phase's collectives over the step's micro-batches: what exceeds
    the hidden part of the window, and at least the interference fraction of them."""
    hidden = overlap * window_s
    last = every_s + once_s
    return ((ga - 1) * max(interference * every_s, every_s - hidden)
            + max(interference * last, last - hidden))


def step_inputs(ctx: Context, strategy: Strategy) -> StepInputs:
    ga = ctx.workload.grad_accum
    every = {"forward": 0.0, "backward": 0.0, "step": 0.0}
    once = dict(every)
    total = 0.0
    timed = tuple((c, collective_time_s(c, ctx.cluster, ctx.priors)) for c in strategy.collectives(ctx))
    for c, t in timed:
        (every if c.per_micro_batch else once)[c.phase] += t
        total += t * (ga if c.per_micro_batch else 1)
    host = strategy.host_work(ctx)
    off = ctx.priors.offload
    pcie_bw = ctx.cluster.pcie_bytes_per_s * off.pcie_efficiency
    g = ctx.cluster.gpus_per_node
    adam_rate = (off.deepspeed_cpu_adam_params_per_s_per_node if host.cpu_optimizer == "deepspeed"
                 else off.torch_cpu_adam_params_per_s_per_node)
    nvme_bw = ctx.cluster.nvme_bytes_per_s_per_node * off.nvme_efficiency
    kind, modules = strategy.framework_hooks(ctx)
    mb = compute.micro_batch_time(ctx)
    return StepInputs(
        grad_accum=ga, overlap=ctx.priors.overlap[strategy.engine],
        interference=ctx.priors.collective.interference, collectives=timed, host=host,
        forward_s=mb.forward_s, backward_s=mb.backward_s, every_s=every, once_s=once,
        comm_total_s=total, pcie_overlappable_s=host.pcie_overlappable_bytes / pcie_bw,
        offload_exposed_s=(host.pcie_exposed_bytes / pcie_bw
                           + host.cpu_optimizer_params * g / adam_rate
                           + host.nvme_bytes * g / nvme_bw),
        framework_s=ga * modules * ctx.priors.framework_overhead_s_per_module[kind],
        optimizer_s=compute.optimizer_step_s(ctx, strategy.gpu_optimizer_params(ctx)))


def combine(x: StepInputs, compute_scale: float = 1.0, comm_scale: float = 1.0) -> StepParts:
    """Seconds per optimizer step. `*_scale` multiply achieved efficiency / bandwidth."""
    ga, forward, backward = x.grad_accum, x.forward_s / compute_scale, x.backward_s / compute_scale
    exposed = (x.every_s["step"] * ga + x.once_s["step"]) / comm_scale
    for phase, window in (("forward", forward), ("backward", backward)):
        exposed += _exposed(x.every_s[phase] / comm_scale, x.once_s[phase] / comm_scale,
                            window, ga, x.overlap, x.interference)
    pcie = max(0.0, x.pcie_overlappable_s - x.overlap * ga * backward * comm_scale)
    return StepParts(compute_s=ga * (forward + backward), framework_s=x.framework_s,
                     exposed_comm_s=exposed, optimizer_s=x.optimizer_s,
                     offload_s=(pcie + x.offload_exposed_s) / comm_scale,
                     comm_total_s=x.comm_total_s / comm_scale)


def step_parts(ctx: Context, strategy: Strategy, compute_scale: float = 1.0,
               comm_scale: float = 1.0) -> StepParts:
    """Seconds per optimizer step. `*_scale` multiply achieved efficiency / bandwidth (ranges)."""
    return combine(step_inputs(ctx, strategy), compute_scale, comm_scale)
