"""ParallelLayout: how the world's ranks are arranged, and the process groups it forms.

A layout is a device mesh in torchtitan's order, outermost first: pipeline, data-parallel
replicate, data-parallel shard, context, tensor (torchtitan `ParallelDims`, Accelerate
`ParallelismConfig`: dp_replicate x dp_shard x cp x tp). Rank r's coordinate on a dimension is
(r // stride) % size, the innermost dimension (tensor) varying fastest, so the inner dimensions
fill a node first. Today's strategies are layouts: DDP replicates over N ranks, FSDP and
ZeRO shard over N, HSDP replicates over k x shards over m (m need not be the node size).

A process group over some dimensions holds the ranks that differ only in those coordinates; its
shape on the cluster (ranks per node, nodes) is what the collective model needs
(advisor/core/communication.py). Each dimension's block must either fit in a node or cover
whole nodes, so that every group of a dimension has the same shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from advisor.core.errors import Infeasible

Dim = Literal["pp", "dp_replicate", "dp_shard", "cp", "tp"]
DIMS: tuple[Dim, ...] = ("pp", "dp_replicate", "dp_shard", "cp", "tp")
"""Mesh dimensions, outermost first (torchtitan's order)."""
MAX_DEGREE = 65536


@dataclass(frozen=True, slots=True)
class Group:
    """The shape of one process group on the cluster."""

    ranks_per_node: int
    """Members of the group inside one node."""
    nodes: int
    """Nodes the group spans."""

    @property
    def size(self) -> int:
        return self.ranks_per_node * self.nodes


class ParallelLayout(BaseModel):
    """Degrees of each parallel dimension; their product is the world size."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    dp_replicate: int = Field(default=1, ge=1, le=MAX_DEGREE)
    """Data-parallel replicas: each holds the whole (or its shard group's) model state."""
    dp_shard: int = Field(default=1, ge=1, le=MAX_DEGREE)
    """Data-parallel ranks a parameter is sharded over (FSDP, ZeRO)."""
    cp: int = Field(default=1, ge=1, le=MAX_DEGREE)
    """Context parallel: the sequence split over ranks."""
    tp: int = Field(default=1, ge=1, le=MAX_DEGREE)
    """Tensor parallel."""
    pp: int = Field(default=1, ge=1, le=MAX_DEGREE)
    """Pipeline stages."""

    @model_validator(mode="after")
    def _bounded(self) -> ParallelLayout:
        if self.world > MAX_DEGREE:
            raise ValueError(f"the degrees multiply to {self.world} ranks, over {MAX_DEGREE}")
        return self

    @classmethod
    def replicate(cls, n: int) -> ParallelLayout:
        """DDP: n full replicas."""
        return cls(dp_replicate=n)

    @classmethod
    def shard(cls, n: int) -> ParallelLayout:
        """FSDP FULL_SHARD / ZeRO: one shard group of n ranks."""
        return cls(dp_shard=n)

    @classmethod
    def hybrid(cls, replicas: int, shard: int) -> ParallelLayout:
        """HSDP: `replicas` copies of a shard group of `shard` ranks."""
        return cls(dp_replicate=replicas, dp_shard=shard)

    def size(self, dim: Dim) -> int:
        return int(getattr(self, dim))

    @property
    def world(self) -> int:
        out = 1
        for d in DIMS:
            out *= self.size(d)
        return out

    @property
    def dp(self) -> int:
        """The data-parallel degree: samples processed side by side (replicate x shard)."""
        return self.dp_replicate * self.dp_shard

    def stride(self, dim: Dim) -> int:
        """Rank distance between neighbours along `dim` (inner dimensions vary fastest)."""
        out = 1
        for d in reversed(DIMS):
            if d == dim:
                return out
            out *= self.size(d)
        raise ValueError(dim)

    def check(self, num_gpus: int, gpus_per_node: int) -> None:
        """Infeasible unless the degrees fill the cluster and each dimension's block of ranks
        fits in a node or covers whole nodes."""
        if self.world != num_gpus:
            raise Infeasible(f"the layout's degrees multiply to {self.world} ranks, the cluster has "
                             f"{num_gpus} GPUs", "degrees whose product is the GPU count")
        for d in DIMS:
            s, n = self.stride(d), self.size(d)
            if n == 1:
                continue
            inside = gpus_per_node % (s * n) == 0
            whole = (s * n) % gpus_per_node == 0 and (s % gpus_per_node == 0 or gpus_per_node % s == 0)
            if not (inside or whole):
                raise Infeasible(f"{d} = {n} at stride {s} neither fits in a node of {gpus_per_node} "
                                 "GPUs nor covers whole nodes", "degrees that divide the node size")

    def group(self, dims: tuple[Dim, ...], gpus_per_node: int) -> Group:
        """The shape of a process group over `dims` (e.g. ("dp_shard",) for FSDP's shard group)."""
        per_node, nodes = 1, 1
        for d in dims:
            s, n = self.stride(d), self.size(d)
            if s * n <= gpus_per_node:
                per_node *= n
            elif s >= gpus_per_node:
                nodes *= n
            else:  # the block straddles nodes: gpus_per_node / s members in each of its nodes
                per_node *= gpus_per_node // s
                nodes *= s * n // gpus_per_node
        return Group(ranks_per_node=per_node, nodes=nodes)

    def describe(self) -> str:
        parts = [f"{d} {self.size(d)}" for d in DIMS if self.size(d) > 1]
        return " x ".join(parts) or "1 rank"
