"""Collectives: bytes each GPU moves, split by tier, and the time they take.

Ring algorithms (Patarasuk & Yuan 2009; NCCL's bus-bandwidth convention, nccl-tests
doc/PERFORMANCE.md): over n ranks, all-reduce moves 2(n-1)/n * S bytes per rank, all-gather
and reduce-scatter (n-1)/n * S, where S is the full (unsharded) buffer.

Two tiers. A process group (advisor/core/layout.py: its ranks per node and its nodes) inside one
node uses the GPU's intra-node link. A group spanning k nodes is
run hierarchically (NCCL rings over NVLink inside a node, one rail per GPU across nodes): the
bytes that cross nodes per node are what a ring over k nodes moves, 2(k-1)/k * S for all-reduce
and (k-1)/k * S for all-gather / reduce-scatter, spread over the node's G NICs; the rest stays
inside the node. Time (alpha-beta, Hockney 1994): the slower tier at its achieved fraction of
the link, plus a latency per call (per bucket / FSDP unit); groups spanning nodes pay the
hierarchical algorithm's larger latency.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from advisor.core.hardware import Cluster
from advisor.core.layout import Group
from advisor.core.priors import Priors

Op = Literal["all_reduce", "all_gather", "reduce_scatter"]
Phase = Literal["forward", "backward", "step"]


@dataclass(frozen=True, slots=True)
class Collective:
    """One kind of collective a strategy issues, summed over an optimizer step."""

    op: Op
    phase: Phase
    """forward/backward: can overlap with that phase's compute; step: exposed."""
    group: Group
    """The process group it runs over (ranks per node, nodes)."""
    buffer_bytes: float
    """S: full size of the buffer one micro-batch (or step) communicates."""
    bucket_bytes: float
    """Size of one call (bucket / FSDP unit): sets the achieved bandwidth."""
    per_micro_batch: bool
    """True: issued every micro-batch; False: once per optimizer step."""
    what: str
    """Human label, e.g. 'gradient all-reduce'."""


@dataclass(frozen=True, slots=True)
class TierBytes:
    intra_node: float
    inter_node: float


def _ring_factor(op: Op, ranks: int) -> float:
    """Bytes sent per rank per byte of buffer for a ring collective over `ranks`."""
    if ranks <= 1:
        return 0.0
    steps = (ranks - 1) / ranks
    return 2 * steps if op == "all_reduce" else steps


def bytes_per_gpu(op: Op, group: Group, buffer_bytes: float) -> TierBytes:
    """Bytes one GPU sends for one call on a buffer of `buffer_bytes`, split by tier."""
    per_node, nodes = group.ranks_per_node, group.nodes
    total = _ring_factor(op, per_node * nodes) * buffer_bytes
    # Cross-node bytes of a ring over `nodes` nodes, shared by the group's GPUs of each node.
    inter = _ring_factor(op, nodes) * buffer_bytes / per_node
    return TierBytes(intra_node=total - inter, inter_node=inter)


def collective_time_s(c: Collective, cluster: Cluster, priors: Priors) -> float:
    """Seconds for one occurrence of `c` (one micro-batch's worth, or one step's)."""
    tiers = bytes_per_gpu(c.op, c.group, c.buffer_bytes)
    if tiers.intra_node == 0 and tiers.inter_node == 0:
        return 0.0
    p = priors.collective
    intra_bw = cluster.intra_node_bytes_per_s * p.intra_efficiency
    # Each GPU of the node drives its own share of the node's NICs.
    inter_bw = cluster.inter_node_bytes_per_s / cluster.gpus_per_node * p.inter_efficiency
    latency = p.inter_latency_s if tiers.inter_node else p.intra_latency_s
    calls = max(1.0, c.buffer_bytes / max(c.bucket_bytes, 1.0))
    return max(tiers.intra_node / intra_bw, tiers.inter_node / inter_bw) + calls * latency
