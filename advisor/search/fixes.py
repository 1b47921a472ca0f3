"""What would make a plan fit: the cheapest change, found by re-checking the plan under it."""

from __future__ import annotations

from advisor.core.hardware import MAX_GPUS, Cluster, gpu_catalog
from advisor.core.memory import does_not_fit, memory_breakdown
from advisor.core.model import ModelSpec
from advisor.core.priors import Priors
from advisor.core.protocol import Strategy, make_context
from advisor.core.results import Estimate
from advisor.core.units import GiB, gib_text
from advisor.core.workload import Workload
from advisor.search.space import SearchSpace
from advisor.strategies import get_strategy

TIE_FRACTION = 0.03
"""Plans within this fraction of each other's tokens/s are a tie within the model's error."""


def cheapest_fix(est: Estimate, space: SearchSpace, cluster: Cluster, model: ModelSpec,
                 priors: Priors) -> str | None:
    """The smallest change that makes this (smallest-memory) plan fit, in words."""
    mem = est.memory
    if mem.per_gpu_bytes.total <= mem.usable_bytes:
        if mem.cpu_per_node_bytes > mem.cpu_capacity_per_node_bytes * priors.offload.host_ram_usable_fraction:
            need = mem.cpu_per_node_bytes / priors.offload.host_ram_usable_fraction
            return f"nodes with at least {need / GiB:.0f} GiB of host RAM (--cpu-ram-gib), or more nodes"
        return f"nodes with at least {gib_text(mem.nvme_bytes)} of NVMe"
    strategy = get_strategy(est.strategy, space.fsdp_version)
    scaled = scale_out(cluster, model, est.workload, strategy, priors)
    if scaled is not None and scaled.num_gpus <= 4 * cluster.num_gpus:
        return (f"{scaled.num_gpus} GPUs ({scaled.nodes} x {scaled.gpus_per_node}) "
                f"instead of {cluster.num_gpus}")
    needed = mem.per_gpu_bytes.total / (1 - priors.overhead.memory_safety_fraction)
    bigger = sorted((g for g in gpu_catalog().values() if g.memory_in_GiB * GiB >= needed),
                    key=lambda g: g.memory_in_GiB)
    options = []
    if strategy.family == "ddp":  # a replica per GPU: sharding is the fix, not a bigger GPU
        options.append("a sharded strategy (fsdp, zero3)")
    if bigger:
        options.append(f"a GPU with at least {gib_text(needed)} ({bigger[0].name})")
    if scaled is not None:
        options.append(f"{scaled.num_gpus} GPUs ({scaled.nodes} x {scaled.gpus_per_node})")
    if options:
        return ", or ".join(options)
    return "a sharded or offloaded strategy (zero3, fsdp, zero3-offload)"


def scale_out(cluster: Cluster, model: ModelSpec, workload: Workload, strategy: Strategy,
              priors: Priors) -> Cluster | None:
    """The smallest multiple of the current node count on which the plan fits; None when more
    GPUs stop lowering its memory (nothing sharded is left to shrink) or after 64x."""
    candidates = []
    if cluster.nodes == 1 and cluster.gpus_per_node < cluster.gpu.node.gpus_per_node:
        cluster = cluster.model_copy(update={"gpus_per_node": cluster.gpu.node.gpus_per_node})
        candidates.append(cluster)
    candidates += [cluster.with_nodes(cluster.nodes * 2**k) for k in range(1, 7)
                   if cluster.num_gpus * 2**k <= MAX_GPUS]
    previous = float("inf")
    for bigger in candidates:
        memory = memory_breakdown(make_context(bigger, model, workload, priors, strategy), strategy)
        if does_not_fit(memory, priors.offload.host_ram_usable_fraction) is None:
            return bigger
        if memory.per_gpu_bytes.total >= previous:
            return None
        previous = memory.per_gpu_bytes.total
    return None

