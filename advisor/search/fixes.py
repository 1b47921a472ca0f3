"""What would make a plan fit: changes tried one at a time, each re-checked by estimating the plan
again under it (GPU memory, host RAM and NVMe), cheapest first.

The changes, in the order they are preferred (a fix never costs more than it must):
 1. the same hardware, config only: full activation checkpointing (when it was fixed lower);
 2. the same hardware, a code change (not under --no-code-changes): the fused loss, then both;
 3. more of what the nodes already have: host RAM (--cpu-ram-gib) or NVMe (--nvme-tib) per node
    when that is what is short, or more GPUs of the same kind (up to MAX_SCALE_OUT x);
 4. a GPU with more memory, the same count;
 5. a shorter sequence (it changes the job, so it comes last).
Each change, or one of 3-5 with the checkpointing and loss changes of 1-2 applied too, is kept
only if the plan then fits; the fix names up to MAX_OPTIONS of them with the memory they reach.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from advisor.core.estimate import feasible_context
from advisor.core.hardware import MAX_GPUS, Cluster, gpu_catalog
from advisor.core.memory import does_not_fit, memory_breakdown
from advisor.core.model import ModelSpec
from advisor.core.priors import Priors
from advisor.core.protocol import Strategy
from advisor.core.results import Estimate, InfeasiblePlan, Memory
from advisor.core.units import GiB, TiB, gib_text
from advisor.core.workload import Workload
from advisor.search.space import SearchSpace
from advisor.strategies import get_strategy

TIE_FRACTION = 0.03
"""Plans within this fraction of each other's tokens/s are a tie within the model's error."""
MAX_SCALE_OUT = 64
"""More GPUs are suggested up to this multiple of the cluster."""
MAX_OPTIONS = 3
MIN_SEQ_LEN = 1024
MAX_HOST_RAM_GIB = 8192
"""Host RAM a fix may ask of one node: 8 TiB, about the most a 2-socket server takes (AMD EPYC
9005: 12 channels x 2 DIMMs x 256 GiB per socket is 6 TiB; a few 4-socket boards reach more)."""
MAX_NVME_TIB = 256
"""NVMe a fix may ask of one node: 256 TiB (e.g. 16 x 15.36 TB U.2 drives is 224 TiB)."""


@dataclass(frozen=True, slots=True)
class Change:
    """One way to make the plan fit, in words, and what it changes."""

    words: str
    cluster: Cluster
    workload: Workload


def _memory_under(change: Change, model: ModelSpec, priors: Priors, strategy: Strategy) -> Memory | None:
    """The plan's memory under `change`; None when the strategy cannot run there at all."""
    ctx = feasible_context(change.cluster, model, change.workload, strategy, priors)
    if isinstance(ctx, InfeasiblePlan):  # the change breaks the layout or the engine
        return None
    return memory_breakdown(ctx, strategy)


def _storage(memory: Memory, cluster: Cluster, priors: Priors) -> tuple[str, Cluster] | None:
    """Host RAM and NVMe per node raised to what `memory` needs, in words; None when nothing is
    short or the need is beyond a real server (MAX_HOST_RAM_GIB, MAX_NVME_TIB)."""
    words: list[str] = []
    update: dict[str, float] = {}
    need = math.ceil(memory.cpu_per_node_bytes / priors.offload.host_ram_usable_fraction / GiB / 64) * 64
    if need * GiB > memory.cpu_capacity_per_node_bytes:
        if need > MAX_HOST_RAM_GIB:
            return None
        words.append(f"{need:,} GiB of host RAM per node (--cpu-ram-gib {need})")
        update["cpu_ram_bytes_per_node"] = need * GiB
    need_tib = math.ceil(memory.nvme_bytes / TiB * 10) / 10
    if memory.nvme_bytes > memory.nvme_capacity_per_node_bytes:
        if need_tib > MAX_NVME_TIB:
            return None
        words.append(f"{need_tib:g} TiB of NVMe per node (--nvme-tib {need_tib:g})")
        update["nvme_capacity_bytes_per_node"] = need_tib * TiB
    return (" and ".join(words), cluster.model_copy(update=update)) if words else None


def _job_changes(w: Workload, space: SearchSpace) -> list[tuple[str, Workload]]:
    """Same hardware: stronger checkpointing (config), the fused loss (code), both."""
    out: list[tuple[str, Workload]] = []
    full = None
    if w.act_ckpt != "full" and "full" not in space.act_ckpts:
        full = w.model_copy(update={"act_ckpt": "full"})
        out.append(("full activation checkpointing (--act-ckpt full)", full))
    if not w.fused_loss and space.code_changes:
        out.append(("the fused loss (--fused-loss; advisor_ac.py in the plan)",
                    w.model_copy(update={"fused_loss": True})))
        if full is not None:
            out.append(("full checkpointing and the fused loss (--act-ckpt full --fused-loss)",
                        full.model_copy(update={"fused_loss": True})))
    return out


def _hardware_changes(cluster: Cluster, w: Workload) -> Iterator[tuple[str, str, Cluster]]:
    """(kind, words, cluster): more GPUs of the same kind, then GPUs with more memory that run
    the workload's precision."""
    for bigger in _scaled(cluster):
        yield ("gpus", f"{bigger.num_gpus} GPUs ({bigger.nodes} x {bigger.gpus_per_node}) instead "
               f"of {cluster.num_gpus}", bigger)
    gpu_bytes = cluster.gpu.memory_in_GiB * GiB
    for g in sorted(gpu_catalog().values(), key=lambda g: (g.memory_in_GiB, g.name)):
        if (g.memory_in_GiB * GiB > gpu_bytes and cluster.gpus_per_node <= g.node.gpus_per_node
                and g.supports(w.precision)):
            yield ("gpu", f"{cluster.num_gpus} x {g.name} ({g.memory_in_GiB:.0f} GiB each)",
                   cluster.model_copy(update={"gpu": g}))


def _scaled(cluster: Cluster) -> Iterator[Cluster]:
    """The same GPUs, more of them: a full node first, then doubling the nodes."""
    if cluster.nodes == 1 and cluster.gpus_per_node < cluster.gpu.node.gpus_per_node:
        cluster = cluster.model_copy(update={"gpus_per_node": cluster.gpu.node.gpus_per_node})
        yield cluster
    start = cluster.num_gpus
    nodes = cluster.nodes * 2
    while nodes * cluster.gpus_per_node <= min(MAX_GPUS, MAX_SCALE_OUT * start):
        yield cluster.with_nodes(nodes)
        nodes *= 2


def _seq_changes(w: Workload) -> Iterator[tuple[str, Workload]]:
    seq = w.seq_len // 2
    while seq >= MIN_SEQ_LEN:
        yield f"sequences of {seq:,} tokens (--seq-len {seq})", w.model_copy(update={"seq_len": seq})
        seq //= 2


def fixes(est: Estimate, space: SearchSpace, cluster: Cluster, model: ModelSpec,
          priors: Priors) -> list[tuple[str, Memory]]:
    """The changes that make this (smallest-memory) plan fit, cheapest first, each re-checked:
    the first job change that fits, host RAM / NVMe where only they are short, then the first
    fitting change of each hardware kind (with the job changes, then host RAM / NVMe, added
    where it does not fit alone), then shorter sequences if nothing did."""
    strategy = get_strategy(est.strategy, space.fsdp_version)
    w = est.workload
    jobs = _job_changes(w, space)
    found: list[tuple[str, Memory]] = []
    usable = priors.offload.host_ram_usable_fraction

    def attempt(words: str, c: Cluster, wl: Workload) -> bool:
        memory = _memory_under(Change(words, c, wl), model, priors, strategy)
        if memory is None:
            return False
        if does_not_fit(memory, usable) is None:
            found.append((words, memory))
            return True
        if memory.per_gpu_bytes.total > memory.usable_bytes:
            return False
        storage = _storage(memory, c, priors)  # only host RAM or NVMe is short
        if storage is None:
            return False
        more, c2 = storage
        return attempt(f"{words} with {more}" if words else more, c2, wl)

    attempt("", cluster, w)  # host RAM or NVMe alone
    for words, wl in jobs:
        if attempt(words, cluster, wl):
            break  # the next job changes only add to this one
    kinds: set[str] = set()
    for kind, words, c in _hardware_changes(cluster, w):
        if len(found) >= MAX_OPTIONS:
            break
        if kind not in kinds and (attempt(words, c, w) or any(
                attempt(f"{words} with {jw}", c, jwl) for jw, jwl in jobs)):
            kinds.add(kind)  # the first (least) of a kind that fits is the one to name
    if not found:
        for words, wl in _seq_changes(w):
            if attempt(words, cluster, wl):
                break
    return found[:MAX_OPTIONS]


def cheapest_fix(est: Estimate, space: SearchSpace, cluster: Cluster, model: ModelSpec,
                 priors: Priors) -> str:
    """The fixes in words, each with the memory it reaches; or that none of them fits."""
    found = fixes(est, space, cluster, model, priors)
    if not found:
        return (f"none of the changes tried makes {est.strategy} fit (stronger checkpointing, the "
                f"fused loss, up to {MAX_SCALE_OUT}x the GPUs, GPUs with more memory, host RAM up "
                f"to {MAX_HOST_RAM_GIB // 1024} TiB and NVMe up to {MAX_NVME_TIB} TiB per node, "
                f"sequences down to {MIN_SEQ_LEN} tokens)")
    return "; or ".join(f"{words}: {gib_text(m.per_gpu_bytes.total)} per GPU" for words, m in found)
