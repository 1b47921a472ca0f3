"""DeepSpeed ZeRO stages 1-3, ZeRO-Offload (CPU) and ZeRO-Infinity (NVMe).

Model states follow DeepSpeed's own accounting (deepspeed/runtime/zero/stage_1_and_2.py and
stage3.py, `estimate_zero{2,3}_model_states_mem_needs`): 16-bit params, a 16-bit gradient
partition (stages 1-2), an fp32 gradient partition for the step (4 B), and the optimizer's fp32
master + moments (12 B for AdamW). Stage 3 accumulates gradients straight into an fp32 partition
(`grad_partitions_flat_buffer`, gradient_accumulation_dtype fp32), so it has no 16-bit partition.

Buckets are the sizes `advisor emit` writes (advisor/core/engines.py `DeepSpeedBuckets`), in
elements, as DeepSpeed counts them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import defaultdict
from functools import lru_cache
from typing import ClassVar, Literal

from advisor.core.communication import Collective
from advisor.core.context import Context
from advisor.core.engines import (
    NVME_OPTIMIZER_SUBGROUP_ELEMENTS,
    NVME_PARAM_BUFFER_COUNT,
    DeepSpeedBuckets,
    Engine,
    Offload,
    ZeroConfig,
    nvme_param_buffer_elements,
)
from advisor.core.errors import Infeasible
from advisor.core.hardware import Cluster
from advisor.core.layout import ParallelLayout
from advisor.core.model import ModelSpec
from advisor.core.protocol import Buffers, Family, HookKind, HostWork, ModelStates

FP32 = 4


@lru_cache(maxsize=256)
def straddle_surplus(model: ModelSpec, world: int) -> int:
    """Elements a ZeRO-1/2 rank's 16-bit gradient partition holds beyond P/N.

    stage_1_and_2.py `get_partition_info` puts in a rank's partition every tensor that starts
    inside it and the one that straddles its start, and `copy_grads_in_partition` allocates
    their whole gradients: a tensor cut by a partition edge is held whole by both ranks. The
    flat buffer is padded to a multiple of 2 x world (nccl_start_alignment_factor). Returns the
    largest surplus over ranks (measured on real runs, tests/test_real_runs.py)."""
    sizes = model.parameter_tensors()
    total = sum(sizes)
    partition = -(-total // (2 * world)) * 2
    # Each tensor adds its size to every rank from `first` to `last`. What a rank holds only
    # changes where a tensor's range begins or ends, so the largest is found at those points:
    # O(tensors), however many ranks a tensor spans.
    changes: dict[int, int] = defaultdict(int)
    start = 0
    for size in sizes:
        first, last = start // partition, min((start + size - 1) // partition, world - 1)
        changes[first] += size
        changes[last + 1] -= size
        start += size
    held = largest = 0
    for rank in sorted(changes):
        held += changes[rank]
        if rank < world:
            largest = max(largest, held)
    return max(0, largest - total // world)


def persistent_params(model: ModelSpec, threshold: int) -> int:
    """Parameters ZeRO-3 keeps whole on every GPU: tensors below the persistence threshold
    (norm weights and biases, for LLMs)."""
    norms = model.layers * model.norms_per_layer + 1
    small = norms * model.norm_params if model.hidden < threshold else 0
    biases = model.layers * ((model.hidden + 2 * model.kv_dim) * model.qkv_bias
                             + model.hidden * model.out_bias)
    return small + biases


class _Zero(ABC):
    """Shared pieces of the ZeRO family; each subclass states its own stage and offload, and
    what each GPU holds (model_states)."""

    name: ClassVar[str]
    family: ClassVar[Family] = "deepspeed"
    description: ClassVar[str]
    stage: ClassVar[Literal[1, 2, 3]]
    offload_optimizer: ClassVar[Literal["cpu", "nvme"] | None] = None
    offload_params: ClassVar[Literal["cpu", "nvme"] | None] = None

    @property
    def engine(self) -> Engine:
        return "deepspeed"

    @property
    def offload(self) -> Offload:
        return self.offload_optimizer or "none"

    def layout(self, cluster: Cluster) -> ParallelLayout:
        """ZeRO partitions over its data-parallel group: every GPU."""
        return ParallelLayout.shard(cluster.num_gpus)

    def engine_config(self, ctx: Context) -> ZeroConfig:
        nvme = (nvme_param_buffer_elements(ctx.model, ctx.dp) if self.offload_params == "nvme"
                else None)
        return ZeroConfig(stage=self.stage, buckets=DeepSpeedBuckets.for_model(ctx.model),
                          offload_optimizer=self.offload_optimizer, offload_params=self.offload_params,
                          nvme_buffer_elements=nvme)

    def check(self, ctx: Context) -> None:
        if not ctx.workload.master_weights and ctx.workload.precision != "fp32":
            raise Infeasible("DeepSpeed ZeRO always keeps fp32 master weights and optimizer state "
                             "with bf16/fp16", "keep master weights (drop --no-master-weights), "
                             "or use ddp / fsdp for pure 16-bit training")
        if self.offload_optimizer and ctx.workload.optimizer == "adam8bit":
            raise Infeasible("8-bit Adam cannot run in DeepSpeed's CPU optimizer",
                             "use --optimizer adamw with offload, or a GPU-resident strategy")
        if self.offload_optimizer == "nvme" and ctx.cluster.nvme_capacity_bytes_per_node <= 0:
            raise Infeasible("no NVMe on these nodes", "pick a GPU preset with NVMe or zero3-offload")

    @abstractmethod
    def model_states(self, ctx: Context) -> ModelStates: ...

    def buckets(self, ctx: Context) -> DeepSpeedBuckets:
        return DeepSpeedBuckets.for_model(ctx.model)

    def _shard(self, ctx: Context) -> float:
        """Parameters in this rank's partition: P / N over the data-parallel group."""
        return ctx.P / ctx.dp

    def gpu_optimizer_params(self, ctx: Context) -> float:
        return 0.0 if self.offload_optimizer else self._shard(ctx)

    def residual_bytes(self, ctx: Context) -> int:
        return ctx.bytes.compute

    def framework_hooks(self, ctx: Context) -> tuple[HookKind, int]:
        """Stage 3 hooks every submodule (fetch/release); stages 1-2 every parameter's grad."""
        modules = ctx.model.layers * ctx.model.modules_per_layer + 3
        return ("zero3" if self.stage == 3 else "zero12"), modules

    def collectives(self, ctx: Context) -> list[Collective]:
        b = self.buckets(ctx)
        dp = ctx.group("dp_shard")
        param = ctx.bytes.compute * ctx.P
        grad = ctx.bytes.grad * ctx.P
        reduce_bucket = b.reduce_bucket_size * ctx.bytes.grad
        if self.stage == 3:
            fetch_bucket = b.stage3_prefetch_bucket_size * ctx.bytes.compute
            return [
                Collective("all_gather", "forward", dp, param, fetch_bucket, True,
                           "parameter all-gather (forward)"),
                Collective("all_gather", "backward", dp, param, fetch_bucket, True,
                           "parameter all-gather (backward)"),
                Collective("reduce_scatter", "backward", dp, grad, reduce_bucket, True,
                           "gradient reduce-scatter"),
            ]
        return [
            # Stage 1 reduces at the accumulation boundary only; stage 2 every micro-batch.
            Collective("reduce_scatter", "backward", dp, grad, reduce_bucket,
                       self.stage == 2, "gradient reduce-scatter"),
            Collective("all_gather", "step", dp, param,
                       b.allgather_bucket_size * ctx.bytes.compute, False,
                       "updated-parameter all-gather"),
        ]

    def buffers(self, ctx: Context) -> Buffers:
        b = self.buckets(ctx)
        c = ctx.bytes.compute
        if self.stage < 3:
            items = {"reduce buckets (2, overlap_comm)": float(2 * b.reduce_bucket_size * ctx.bytes.grad),
                     "all-gather bucket": float(b.allgather_bucket_size * c)}
            return Buffers(items, at_step=frozenset(items))
        persistent = {"reduce bucket": float(b.reduce_bucket_size * ctx.bytes.grad),
                      "persistent small params": float(c * persistent_params(
                          ctx.model, b.stage3_param_persistence_threshold))}
        return Buffers({
            "gathered largest module, params + grads": float(2 * c * ctx.model.largest_layer_params),
            "prefetch bucket": float(b.stage3_prefetch_bucket_size * c),
            **persistent,
        }, at_step=frozenset(persistent))

    def host_work(self, ctx: Context) -> HostWork:
        if not self.offload_optimizer:
            return HostWork()
        shard, ga, c = self._shard(ctx), ctx.workload.grad_accum, ctx.bytes.compute
        grads_down = ga * ctx.bytes.grad * shard  # 16-bit gradient partition to CPU each micro-batch
        if self.offload_params is None:  # ZeRO-2 Offload: updated 16-bit params come back
            return HostWork(pcie_overlappable_bytes=grads_down, pcie_exposed_bytes=c * shard,
                            cpu_optimizer_params=shard)
        params_up = 2 * ga * c * shard  # each forward and backward fetch brings the partition up
        nvme = 0.0
        if self.offload_params == "nvme":
            # Read and write master + moments once per step; read 16-bit params per fetch and
            # write them after the step.
            nvme = 2 * ctx.fp32_state * shard + (2 * ga + 1) * c * shard
        return HostWork(pcie_overlappable_bytes=grads_down + params_up, nvme_bytes=nvme,
                        cpu_optimizer_params=shard)


class Zero1(_Zero):
    name = "zero1"
    stage = 1
    description = "DeepSpeed ZeRO-1: optimizer state sharded"

    def model_states(self, ctx: Context) -> ModelStates:
        s, full = self._shard(ctx), ctx.bytes.grad * ctx.P
        return ModelStates(params=ctx.bytes.compute * ctx.P, grads=full + FP32 * s,
                           optimizer=ctx.fp32_state * s, paper_grads=full,
                           grads_at_backward_start=full if ctx.workload.grad_accum > 1 else 0.0)


class Zero2(_Zero):
    name = "zero2"
    stage = 2
    description = "DeepSpeed ZeRO-2: optimizer state and gradients sharded"

    def model_states(self, ctx: Context) -> ModelStates:
        s = self._shard(ctx)
        partition = ctx.bytes.grad * (s + straddle_surplus(ctx.model, ctx.dp))
        return ModelStates(params=ctx.bytes.compute * ctx.P, grads=partition + FP32 * s,
                           optimizer=ctx.fp32_state * s, paper_grads=ctx.bytes.grad * s,
                           grads_at_backward_start=partition if ctx.workload.grad_accum > 1 else 0.0)


class Zero3(_Zero):
    name = "zero3"
    stage = 3
    description = "DeepSpeed ZeRO-3: parameters, gradients and optimizer state sharded"

    def model_states(self, ctx: Context) -> ModelStates:
        s = self._shard(ctx)
        partition = ctx.bytes.grad * s  # persistent, in the grad-accumulation dtype
        step_copy = FP32 * min(s, self.buckets(ctx).sub_group_size)
        return ModelStates(params=ctx.bytes.compute * s, grads=partition + step_copy,
                           optimizer=ctx.fp32_state * s, paper_grads=partition,
                           grads_at_backward_start=partition)


class Zero2Offload(_Zero):
    name = "zero2-offload"
    stage = 2
    offload_optimizer = "cpu"
    description = "ZeRO-Offload: ZeRO-2, optimizer state, fp32 gradients and step on the CPU"

    def model_states(self, ctx: Context) -> ModelStates:
        s = self._shard(ctx)
        return ModelStates(params=ctx.bytes.compute * ctx.P, grads=0.0,
                           optimizer=0.0, cpu=(ctx.fp32_state + FP32) * s)


class Zero3Offload(_Zero):
    name = "zero3-offload"
    stage = 3
    offload_optimizer = "cpu"
    offload_params = "cpu"
    description = "ZeRO-3 with parameters and optimizer state offloaded to CPU memory"

    def model_states(self, ctx: Context) -> ModelStates:
        s = self._shard(ctx)
        return ModelStates(params=0.0, grads=0.0, optimizer=0.0,
                           cpu=(ctx.bytes.compute + FP32 + ctx.fp32_state) * s)


class Zero3NVMe(_Zero):
    name = "zero3-nvme"
    stage = 3
    offload_optimizer = "nvme"
    offload_params = "nvme"
    description = "ZeRO-Infinity: ZeRO-3 with parameters and optimizer state on NVMe"

    def model_states(self, ctx: Context) -> ModelStates:
        s = self._shard(ctx)
        param_buffers = (NVME_PARAM_BUFFER_COUNT * ctx.bytes.compute
                         * nvme_param_buffer_elements(ctx.model, ctx.dp))
        swap = param_buffers + 2 * FP32 * min(s, NVME_OPTIMIZER_SUBGROUP_ELEMENTS)
        return ModelStates(params=0.0, grads=0.0, optimizer=0.0,
                           cpu=FP32 * s + swap, nvme=(ctx.bytes.compute + ctx.fp32_state) * s)
