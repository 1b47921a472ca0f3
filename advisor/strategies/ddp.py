"""PyTorch DistributedDataParallel with autocast mixed precision (Accelerate's MULTI_GPU).

Every rank holds the whole model in fp32, its fp32 gradients and the optimizer state; autocast
makes 16-bit copies of the weights in forward and keeps them for backward. The reducer copies
gradients into flat buckets (bucket_cap_mb=25, gradient_as_bucket_view=False: PyTorch defaults,
torch/nn/parallel/distributed.py) and all-reduces each bucket during backward; with gradient
accumulation Accelerate runs `no_sync`, so gradients are reduced once per step (every
micro-batch with `sync_each_micro_batch`). Without master weights (a bf16 model, no autocast)
the replica, gradients, buckets and moments are bf16 and autocast makes no copies.
"""

from __future__ import annotations

from typing import ClassVar

from advisor.core.communication import Collective
from advisor.core.context import Context
from advisor.core.engines import DdpConfig, Engine, Offload
from advisor.core.hardware import Cluster
from advisor.core.layout import ParallelLayout
from advisor.core.protocol import Buffers, Family, HookKind, HostWork, ModelStates


class DDP:
    name: ClassVar[str] = "ddp"
    family: ClassVar[Family] = "ddp"
    description: ClassVar[str] = "PyTorch DDP: full replica per GPU, gradient all-reduce"

    @property
    def engine(self) -> Engine:
        return "ddp"

    @property
    def offload(self) -> Offload:
        return "none"

    def layout(self, cluster: Cluster) -> ParallelLayout:
        return ParallelLayout.replicate(cluster.num_gpus)

    def engine_config(self, ctx: Context) -> DdpConfig:
        return DdpConfig()

    def check(self, ctx: Context) -> None:
        return None

    def _weight_bytes(self, ctx: Context) -> int:
        """fp32 weights (autocast keeps the module in fp32; pure fp32 is fp32 too)."""
        return ctx.bytes.optimizer_element

    def model_states(self, ctx: Context) -> ModelStates:
        w = self._weight_bytes(ctx)
        accumulated = w * ctx.P if ctx.workload.grad_accum > 1 else 0.0
        return ModelStates(params=w * ctx.P, grads=w * ctx.P, optimizer=ctx.optimizer_state * ctx.P,
                           grads_at_backward_start=accumulated)

    def buffers(self, ctx: Context) -> Buffers:
        """The reducer's flat buckets live as long as the model; autocast's 16-bit copies of the
        matmul weights (not embeddings or norms) are saved for backward."""
        items = {"DDP gradient buckets": float(self._weight_bytes(ctx) * ctx.P)}
        if ctx.bytes.master:
            items["autocast 16-bit weight copies"] = float(ctx.bytes.compute * ctx.model.matmul_params)
        return Buffers(items, at_step=frozenset({"DDP gradient buckets"}))

    def residual_bytes(self, ctx: Context) -> int:
        """The module stays fp32 under autocast."""
        return self._weight_bytes(ctx)

    def collectives(self, ctx: Context) -> list[Collective]:
        return [Collective(op="all_reduce", phase="backward", group=ctx.group("dp_replicate"),
                           buffer_bytes=self._weight_bytes(ctx) * ctx.P,
                           bucket_bytes=self.engine_config(ctx).bucket_cap_bytes,
                           per_micro_batch=ctx.workload.sync_each_micro_batch,
                           what="gradient all-reduce")]

    def host_work(self, ctx: Context) -> HostWork:
        return HostWork()

    def gpu_optimizer_params(self, ctx: Context) -> float:
        return float(ctx.P)

    def framework_hooks(self, ctx: Context) -> tuple[HookKind, int]:
        return "ddp", 0
