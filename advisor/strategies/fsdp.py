"""PyTorch FSDP: FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD and CPU offload; FSDP2 or FSDP1.

Units are the decoder layers (TRANSFORMER_BASED_WRAP) plus the root (embedding, final norm,
head). Sharded parameters stay in fp32 with mixed precision (MixedPrecisionPolicy casts the
gathered copy to bf16; Accelerate sets param_dtype = reduce_dtype = bf16,
accelerate/utils/dataclasses.py), so the sharded state is 4 (params) + 4 (grads) + optimizer
moments per parameter: 16P/N for AdamW, the ZeRO-3 figure. Without master weights (a bf16
model, no mixed precision) shards, gradients and moments are all bf16: 8P/N.

At the peak, the start of backward (checked against FSDPMemTracker, tests/test_fsdp2_oracle.py):
the root's gathered parameters (it is not resharded after forward) and one unit's all-gather
buffer are held; zero_grad() has set the sharded gradients to None, so they exist only at the
optimizer step. SHARD_GRAD_OP (reshard_after_forward=False) keeps every unit gathered from
forward until its backward. With gradient accumulation Accelerate skips gradient sync
(FSDP2 `set_requires_gradient_sync(False)`, FSDP1 `no_sync`): unsharded 16-bit gradients of the
whole model accumulate on the GPU and one reduce-scatter runs per step. With
`sync_each_micro_batch` (Accelerate's sync_each_batch; Composer never skips the sync under FSDP)
every micro-batch reduce-scatters and the fp32 sharded gradients accumulate instead: they are
alive at the start of every backward after the first.
FSDP1 differs in its allocator behaviour (recordStream, flat parameters), which the overhead
priors carry (overhead.fragmentation.fsdp1), and in its overlap prior.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import ClassVar, Literal

from advisor.core.communication import Collective
from advisor.core.context import Context
from advisor.core.engines import Engine, FsdpConfig, Offload
from advisor.core.errors import Infeasible
from advisor.core.hardware import Cluster
from advisor.core.layout import ParallelLayout
from advisor.core.model import ModelSpec
from advisor.core.protocol import Buffers, Family, HookKind, HostWork, ModelStates


@lru_cache(maxsize=256)
def fsdp2_shard_elements(model: ModelSpec, shards: int) -> int:
    """Elements one rank holds under FSDP2: every parameter is chunked on dim 0 and padded to a
    multiple of the shard group (torch/distributed/fsdp/_fully_shard/_fsdp_param.py: torch.chunk
    on dim 0, the last chunks padded), so a rank holds ceil(dim0 / N) rows of each tensor. About
    shape_params / N for a dense model; far more when a tensor's dim 0 is small, as for the
    routed experts transformers fuses into [experts, ...] tensors (Mixtral's 8 on 64 ranks: a
    rank holds 1/8 of every expert tensor, 7.8x its even share: tests/data/oracle/families.json)."""
    return _padded(model.parameter_shapes(), shards)


def _padded(shapes: list[tuple[int, int]], shards: int) -> int:
    return sum(math.ceil(d0 / shards) * (numel // d0) for numel, d0 in shapes)


@lru_cache(maxsize=256)
def fsdp2_unit_elements(model: ModelSpec, shards: int) -> int:
    """Elements of the largest decoder layer's all-gather output under FSDP2: N x each rank's
    padded shard of its tensors (the padding is gathered too)."""
    kinds = [model.moe is not None] + ([False] if model.moe is not None and model.dense_layers else [])
    return max(shards * _padded(model.layer_shapes(moe=moe), shards) for moe in kinds)


class _FSDP:
    name: ClassVar[str]
    family: ClassVar[Family] = "fsdp"
    description: ClassVar[str]
    sharding: ClassVar[Literal["FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD"]] = "FULL_SHARD"
    cpu_offload: ClassVar[bool] = False

    def __init__(self, fsdp_version: Literal[1, 2] = 2):
        self.fsdp_version: Literal[1, 2] = fsdp_version

    @property
    def reshard_after_forward(self) -> bool:
        return self.sharding != "SHARD_GRAD_OP"

    @property
    def engine(self) -> Engine:
        return "fsdp2" if self.fsdp_version == 2 else "fsdp1"

    @property
    def offload(self) -> Offload:
        return "cpu" if self.cpu_offload else "none"

    def layout(self, cluster: Cluster) -> ParallelLayout:
        """One shard group of every GPU (HYBRID_SHARD: one per node, replicated across nodes)."""
        if self.sharding == "HYBRID_SHARD":
            return ParallelLayout.hybrid(cluster.nodes, cluster.gpus_per_node)
        return ParallelLayout.shard(cluster.num_gpus)

    def engine_config(self, ctx: Context) -> FsdpConfig:
        return FsdpConfig(version=self.fsdp_version, sharding=self.sharding,
                          reshard_after_forward=self.reshard_after_forward,
                          cpu_offload=self.cpu_offload, replicas=ctx.layout.dp_replicate,
                          shard_size=ctx.layout.dp_shard)

    def check(self, ctx: Context) -> None:
        return None

    def _shard(self, ctx: Context) -> float:
        """Parameters in this rank's shard: P / dp_shard, or for FSDP2 what its dim-0 sharding
        gives (fsdp2_shard_elements: fused expert weights shard on the expert dimension)."""
        n = ctx.layout.dp_shard
        if self.fsdp_version == 1:
            return ctx.P / n
        return ctx.P * fsdp2_shard_elements(ctx.model, n) / ctx.model.shape_params

    def _unit(self, ctx: Context) -> float:
        """Elements one FSDP unit gathers: the largest layer (FSDP2: with its dim-0 padding)."""
        if self.fsdp_version == 1 or ctx.model.inferred:
            return ctx.model.layer_params
        return fsdp2_unit_elements(ctx.model, ctx.layout.dp_shard)

    @staticmethod
    def _shard_element(ctx: Context) -> int:
        """Bytes of one sharded parameter and of its gradient: fp32 (mixed precision keeps the
        module in fp32), or the 16-bit dtype without master weights."""
        return ctx.bytes.optimizer_element

    def _sharded_bytes_per_param(self, ctx: Context) -> int:
        """Sharded params + sharded grads + optimizer moments."""
        return 2 * self._shard_element(ctx) + ctx.optimizer_state

    def _unsharded_accumulation(self, ctx: Context) -> bool:
        """Gradient accumulation with the sync skipped: unsharded gradients build up."""
        return ctx.workload.grad_accum > 1 and not ctx.workload.sync_each_micro_batch

    def model_states(self, ctx: Context) -> ModelStates:
        s, e = self._shard(ctx), self._shard_element(ctx)
        if self.cpu_offload:
            return ModelStates(params=0.0, grads=0.0, optimizer=0.0,
                               cpu=self._sharded_bytes_per_param(ctx) * s)
        accumulating = ctx.workload.grad_accum > 1 and ctx.workload.sync_each_micro_batch
        return ModelStates(params=e * s, grads=e * s, optimizer=ctx.optimizer_state * s,
                           grads_at_backward_start=e * s if accumulating else 0.0)

    def buffers(self, ctx: Context) -> Buffers:
        m, c, g = ctx.model, ctx.bytes.compute, ctx.bytes.grad
        root = m.embedding_params + m.head_params
        items = {"gathered root (embedding, head)": float(c * root)}
        if self.reshard_after_forward:
            items["all-gather buffer (one unit)"] = float(c * self._unit(ctx))
        else:
            items[f"gathered layer units ({m.layers})"] = float(c * m.layers * m.layer_params)
        if self._unsharded_accumulation(ctx):
            items["unsharded gradients (no_sync accumulation)"] = float(g * ctx.P)
        return Buffers(items)

    def residual_bytes(self, ctx: Context) -> int:
        """MixedPrecisionPolicy casts the gathered params, so the module computes in bf16."""
        return ctx.bytes.compute

    def collectives(self, ctx: Context) -> list[Collective]:
        m = ctx.model
        shard = ctx.group("dp_shard")
        unit = ctx.bytes.compute * m.layer_params
        param = ctx.bytes.compute * ctx.P
        grad = ctx.bytes.grad * ctx.P
        every = ctx.workload.sync_each_micro_batch
        out = [Collective("all_gather", "forward", shard, param, unit, True,
                          "parameter all-gather (forward)")]
        if self.reshard_after_forward:
            out.append(Collective("all_gather", "backward", shard, param, unit, True,
                                  "parameter all-gather (backward)"))
        out.append(Collective("reduce_scatter", "backward", shard, grad, ctx.bytes.grad * m.layer_params,
                              every, "gradient reduce-scatter"))
        if ctx.layout.dp_replicate > 1:
            m_shard = ctx.layout.dp_shard
            out.append(Collective("all_reduce", "backward", ctx.group("dp_replicate"), grad / m_shard,
                                  ctx.bytes.grad * m.layer_params / m_shard, every,
                                  "gradient all-reduce across replicas"))
        return out

    def host_work(self, ctx: Context) -> HostWork:
        if not self.cpu_offload:
            return HostWork()
        s, ga, e = self._shard(ctx), ctx.workload.grad_accum, self._shard_element(ctx)
        gathers = 2 if self.reshard_after_forward else 1
        downloads = ga if ctx.workload.sync_each_micro_batch else 1
        # shards go up before every all-gather; gradient shards come down per sync.
        return HostWork(pcie_overlappable_bytes=gathers * ga * e * s + downloads * e * s,
                        cpu_optimizer_params=s, cpu_optimizer="torch")

    def gpu_optimizer_params(self, ctx: Context) -> float:
        return 0.0 if self.cpu_offload else self._shard(ctx)

    def framework_hooks(self, ctx: Context) -> tuple[HookKind, int]:
        """One pre/post hook pair per FSDP unit: the layers and the root."""
        kind: HookKind = "fsdp2" if self.fsdp_version == 2 else "fsdp1"
        return kind, ctx.model.layers + 1


class FSDPFullShard(_FSDP):
    name = "fsdp"
    description = "FSDP FULL_SHARD: parameters, gradients and optimizer state sharded"


class FSDPGradOp(_FSDP):
    name = "fsdp-grad-op"
    sharding = "SHARD_GRAD_OP"
    description = "FSDP SHARD_GRAD_OP: gradients and optimizer sharded, params kept after forward"


class HSDP(_FSDP):
    name = "hsdp"
    sharding = "HYBRID_SHARD"
    description = "FSDP HYBRID_SHARD: shard within a node, replicate across nodes"

    def check(self, ctx: Context) -> None:
        if ctx.cluster.nodes < 2:
            raise Infeasible("HYBRID_SHARD needs at least 2 nodes (on one node it is FULL_SHARD)",
                             "use fsdp on a single node")


class FSDPOffload(_FSDP):
    name = "fsdp-offload"
    cpu_offload = True
    description = "FSDP FULL_SHARD with parameters, gradients and the optimizer step on the CPU"
