"""Per-GPU memory: the strategy's model states and buffers with activations, logits and the
framework overhead priors, at the peak of a step; and the check against device, host and NVMe.

Two moments compete for the peak (PyTorch frees what autograd no longer needs, and zero_grad()
sets gradients to None):
    backward start = params + optimizer + grads held then + all buffers + activations + logits
    optimizer step = params + optimizer + grads at the step + persistent buffers
    peak = max of the two; overhead = CUDA context + NCCL buffers per tier
                                      + fragmentation(engine) * peak
The breakdown reported is the one of the peak moment.
"""

from __future__ import annotations

from advisor.core import activations
from advisor.core.context import Context
from advisor.core.protocol import Strategy
from advisor.core.results import Memory, MemoryPerGPU
from advisor.core.units import gib_text

_LABELS = {"params": "params", "grads": "gradients", "optimizer": "optimizer states",
           "activations": "activations", "logits": "logits/loss", "buffers": "buffers",
           "overhead": "overhead"}


def memory_breakdown(ctx: Context, strategy: Strategy) -> Memory:
    states = strategy.model_states(ctx)
    buffers = strategy.buffers(ctx)
    residual = strategy.residual_bytes(ctx)
    acts = activations.stack_bytes(ctx.model, ctx.workload, residual)
    logits = activations.logits_bytes(ctx.model, ctx.workload, residual)
    backward = (states.params + states.optimizer + states.grads_at_backward_start
                + buffers.total + acts + logits)
    step = states.params + states.optimizer + states.grads + buffers.step_total
    at_step = step > backward
    oh = ctx.priors.overhead
    tiers = 2 if ctx.cluster.nodes > 1 else 1
    overhead = (oh.cuda_context_bytes + oh.nccl_bytes_per_tier * tiers
                + oh.fragmentation[strategy.engine] * max(step, backward))
    per_gpu = MemoryPerGPU(
        params=states.params,
        grads=states.grads if at_step else states.grads_at_backward_start,
        optimizer=states.optimizer,
        activations=0.0 if at_step else acts,
        logits=0.0 if at_step else logits,
        buffers=buffers.step_total if at_step else buffers.total,
        overhead=overhead, total=max(step, backward) + overhead,
    )
    capacity = ctx.cluster.gpu_memory_bytes
    g = ctx.cluster.gpus_per_node
    return Memory(
        per_gpu_bytes=per_gpu,
        peak_phase="optimizer_step" if at_step else "backward_start",
        backward_start_bytes=backward + overhead,
        optimizer_step_bytes=step + overhead,
        capacity_bytes=capacity,
        usable_bytes=capacity * (1 - oh.memory_safety_fraction),
        buffers_detail=dict(buffers.items),
        cpu_per_node_bytes=g * states.cpu * ctx.priors.offload.host_buffer_factor,
        cpu_capacity_per_node_bytes=ctx.cluster.cpu_ram_bytes_per_node,
        nvme_bytes=g * states.nvme,
        nvme_capacity_per_node_bytes=ctx.cluster.nvme_capacity_bytes_per_node,
        paper_model_states_bytes=states.paper_total,
    )


def does_not_fit(memory: Memory, host_usable_fraction: float) -> str | None:
    """Why the plan does not fit, in numbers, largest components first; None when it fits."""
    m = memory.per_gpu_bytes
    if m.total > memory.usable_bytes:
        parts = sorted(((getattr(m, k), label) for k, label in _LABELS.items()), reverse=True)
        listed = ", ".join(f"{label} {gib_text(v)}" for v, label in parts[:3] if v > 0)
        return (f"needs {gib_text(m.total)} of {gib_text(memory.capacity_bytes)} per GPU "
                f"({gib_text(memory.usable_bytes)} usable): {listed}")
    host_usable = memory.cpu_capacity_per_node_bytes * host_usable_fraction
    if memory.cpu_per_node_bytes > host_usable:
        return (f"needs {gib_text(memory.cpu_per_node_bytes)} of host RAM per node, "
                f"{gib_text(host_usable)} usable of {gib_text(memory.cpu_capacity_per_node_bytes)}")
    if memory.nvme_bytes > memory.nvme_capacity_per_node_bytes:
        return (f"needs {gib_text(memory.nvme_bytes)} of NVMe per node, "
                f"{gib_text(memory.nvme_capacity_per_node_bytes)} available")
    return None
