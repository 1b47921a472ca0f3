"""Engine configurations: what a strategy asks its engine (DDP, FSDP, DeepSpeed ZeRO) to do.

A strategy exposes one (`Strategy.engine_config`); the estimate carries it, the emitters turn
it into Accelerate YAML / DeepSpeed JSON (advisor/emitters/), calibration runs it
(calibration/strategy_runs.py) and the priors are keyed by its `engine`. Sizes are the ones the
memory model counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from advisor.core.model import ModelSpec
from advisor.core.units import MiB

Engine = Literal["ddp", "fsdp1", "fsdp2", "deepspeed"]
Offload = Literal["none", "cpu", "nvme"]

DDP_BUCKET_BYTES = 25 * MiB
"""DDP's bucket_cap_mb default (torch/nn/parallel/distributed.py)."""
# ZeRO-Infinity parameter swapping (runtime/swap_tensor/constants.py, zero/offload_config.py):
# DeepSpeed's default is 5 buffers of 1e8 elements; see nvme_param_buffer_elements.
NVME_PARAM_BUFFER_COUNT = 5
NVME_PARAM_BUFFER_ELEMENTS = 100_000_000
# Optimizer swapping works on sub-groups of sub_group_size (1e9 elements) fp32 tensors; two are
# in flight (pipeline read/write).
NVME_OPTIMIZER_SUBGROUP_ELEMENTS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class DeepSpeedBuckets:
    """Bucket sizes in elements, the values `advisor emit` writes into ds_config.json: Hugging
    Face's "auto" rule (transformers.integrations.deepspeed): reduce_bucket_size = h^2,
    stage3_prefetch_bucket_size = 0.9 h^2, stage3_param_persistence_threshold = 10 h."""

    reduce_bucket_size: int
    allgather_bucket_size: int
    stage3_prefetch_bucket_size: int
    stage3_param_persistence_threshold: int
    stage3_max_live_parameters: int = 1_000_000_000
    sub_group_size: int = NVME_OPTIMIZER_SUBGROUP_ELEMENTS

    @classmethod
    def for_model(cls, model: ModelSpec) -> DeepSpeedBuckets:
        h2 = model.hidden * model.hidden
        return cls(reduce_bucket_size=h2, allgather_bucket_size=h2,
                   stage3_prefetch_bucket_size=max(1, int(0.9 * h2)),
                   stage3_param_persistence_threshold=10 * model.hidden)


def nvme_param_buffer_elements(model: ModelSpec, dp: int) -> int:
    """Elements per ZeRO-Infinity parameter swap buffer, the value `advisor emit` writes:
    DeepSpeed's 1e8 default, raised to the largest per-rank parameter partition in whole
    millions (partitioned_param_swapper.py asserts numel <= buffer size)."""
    largest = max(model.embedding_params, model.head_params, model.hidden * model.ffn)
    need = math.ceil(largest / dp / 1e6) * 1_000_000
    return max(NVME_PARAM_BUFFER_ELEMENTS, need)


@dataclass(frozen=True, slots=True)
class DdpConfig:
    """torch DistributedDataParallel (Accelerate MULTI_GPU), autocast mixed precision."""

    bucket_cap_bytes: int = DDP_BUCKET_BYTES
    engine: Engine = "ddp"
    offload: Offload = "none"


@dataclass(frozen=True, slots=True)
class FsdpConfig:
    """PyTorch FSDP (Accelerate FSDP plugin)."""

    version: Literal[1, 2]
    sharding: Literal["FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD"]
    reshard_after_forward: bool
    """FSDP2's flag: True for FULL_SHARD and HYBRID_SHARD, False for SHARD_GRAD_OP."""
    cpu_offload: bool
    """Parameters, gradients and the optimizer step on the CPU (CPUOffloadPolicy)."""
    replicas: int
    """HYBRID_SHARD's replica count (dp_replicate); 1 otherwise."""
    shard_size: int
    """Ranks a parameter is sharded over (dp_shard)."""

    @property
    def engine(self) -> Engine:
        return "fsdp2" if self.version == 2 else "fsdp1"

    @property
    def offload(self) -> Offload:
        return "cpu" if self.cpu_offload else "none"


@dataclass(frozen=True, slots=True)
class ZeroConfig:
    """DeepSpeed ZeRO (Accelerate's DeepSpeed plugin with a ds_config.json)."""

    stage: Literal[1, 2, 3]
    buckets: DeepSpeedBuckets
    offload_optimizer: Literal["cpu", "nvme"] | None = None
    offload_params: Literal["cpu", "nvme"] | None = None
    nvme_buffer_elements: int | None = None
    """Per parameter swap buffer (ZeRO-Infinity), see nvme_param_buffer_elements."""
    engine: Engine = "deepspeed"

    @property
    def offload(self) -> Offload:
        return self.offload_optimizer or "none"


EngineConfig = DdpConfig | FsdpConfig | ZeroConfig
