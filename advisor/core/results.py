"""Typed results: what `advisor estimate --json` prints and the API serves.

Plain frozen dataclasses (cheap to build thousands of times in a search); pydantic serialises
them and derives the JSON Schema through `TypeAdapter` (`advisor/core/schemas.py`). Bytes, seconds
and fractions inside; no sentinels: a value that does not exist is None.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from advisor.core.engines import EngineConfig, Offload
from advisor.core.layout import ParallelLayout
from advisor.core.model import ModelSpec
from advisor.core.workload import Workload


@dataclass(frozen=True, slots=True)
class MemoryPerGPU:
    """Bytes on one GPU by component at the peak moment of a step (see `Memory.peak_phase`)."""

    params: float
    grads: float
    """Gradients, including DeepSpeed's fp32 gradient partition."""
    optimizer: float
    """fp32 master weights and optimizer moments."""
    activations: float
    """Saved activations of all layers (after checkpointing) plus recompute working set."""
    logits: float
    """Output logits and loss buffers (bf16 logits, fp32 upcast, log-softmax) and final norm."""
    buffers: float
    """Communication buckets, gathered parameters and prefetch buffers."""
    overhead: float
    """CUDA context, NCCL buffers and allocator fragmentation (priors)."""
    total: float


@dataclass(frozen=True, slots=True)
class Memory:
    per_gpu_bytes: MemoryPerGPU
    peak_phase: str
    """backward_start (activations, logits and gathered buffers) or optimizer_step (all
    gradients and the optimizer's step copies): the moment the breakdown describes."""
    backward_start_bytes: float
    """Total (with overhead) when backward starts."""
    optimizer_step_bytes: float
    """Total (with overhead) during the optimizer step."""
    capacity_bytes: float
    """Device memory of one GPU."""
    usable_bytes: float
    """Capacity less the safety margin: a plan fits when total <= usable."""
    buffers_detail: dict[str, float]
    """The buffers component by name."""
    cpu_per_node_bytes: float
    """Host memory the offloaded states need on one node (0 without offload)."""
    cpu_capacity_per_node_bytes: float
    nvme_bytes: float
    """NVMe bytes per node (ZeRO-Infinity; 0 otherwise)."""
    nvme_capacity_per_node_bytes: float
    paper_model_states_bytes: float
    """params + 16-bit grads + optimizer on the GPU: the ZeRO paper's "model states"."""


@dataclass(frozen=True, slots=True)
class CollectiveReport:
    what: str
    op: str
    phase: str
    group_size: int
    ranks_per_node: int
    """Members of the collective's process group inside one node."""
    nodes: int
    """Nodes the group spans."""
    count_per_step: int
    buffer_bytes: float
    """Size of the buffer per occurrence (full, unsharded)."""
    intra_node_bytes: float
    """Bytes this GPU sends inside its node per optimizer step."""
    inter_node_bytes: float
    """Bytes this GPU sends across nodes per optimizer step."""
    time_s: float
    """Seconds per optimizer step, before overlap."""


@dataclass(frozen=True, slots=True)
class CommBytes:
    total: float
    intra_node: float
    inter_node: float


@dataclass(frozen=True, slots=True)
class Communication:
    per_gpu_bytes_per_step: CommBytes
    collectives: list[CollectiveReport]
    pcie_bytes_per_step: float
    """Host <-> device bytes per GPU per step (offload)."""
    nvme_bytes_per_step: float
    """NVMe bytes read + written per GPU per step (ZeRO-Infinity)."""
    time_s: float
    """All collectives, before overlap."""


@dataclass(frozen=True, slots=True)
class StepTime:
    step_s: float
    compute_s: float
    """Forward + backward (+ recompute) of all micro-batches."""
    framework_s: float
    """Host-side hook time of the engine that does not overlap the GPU."""
    exposed_comm_s: float
    """Collective time not hidden behind compute."""
    optimizer_s: float
    """Optimizer step on the GPU (memory-bound)."""
    offload_s: float
    """Exposed PCIe / NVMe transfers and the CPU optimizer step."""
    low_s: float
    """Step time with the priors at their optimistic end (1 sigma)."""
    high_s: float
    """Step time with the priors at their pessimistic end (1 sigma)."""


@dataclass(frozen=True, slots=True)
class Throughput:
    tokens_per_step: int
    tokens_per_s_per_gpu: float
    mfu: float
    """Model FLOPs utilisation: (6P + 12*L*h*s) * tokens/s/GPU / dense peak (PaLM, MosaicML)."""
    hfu: float
    """Hardware FLOPs utilisation: MFU's FLOPs plus recomputation."""
    time_to_train_s: float | None
    """Seconds to train --tokens tokens, when given."""


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    spec: str
    gpu: str
    num_gpus: int
    nodes: int
    gpus_per_node: int
    gpu_memory_bytes: float
    intra_node_link: str
    inter_node_bytes_per_s: float
    nvme_bytes_per_s_per_node: float
    notes: list[str]


@dataclass(frozen=True, slots=True)
class ModelInfo:
    name: str
    family: str
    """The model family (transformers model_type) whose layers the estimate describes."""
    params: int
    """Exact parameter count (the user's --params if given)."""
    active_params: int
    """Parameters one token uses: params for a dense model, fewer for MoE (top-k experts)."""
    experts: int | None
    """Routed experts per MoE layer (None: dense)."""
    top_k: int | None
    """Routed experts per token (None: dense)."""
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    gated_mlp: bool
    tied_embeddings: bool
    inferred: bool
    """Shape inferred from --params (drives activations and FLOPs; params stays exact)."""
    decoder_layer_class: str
    source: str
    architecture: ModelSpec
    """Every architectural field the estimate used (emitted bundles write the model's
    config.json from it)."""


@dataclass(frozen=True, slots=True)
class Estimate:
    """One plan: a strategy at one workload on one layout, with every figure. A plan that does
    not fit is still an Estimate (`fits` false, with the reason in numbers and the cheapest fix);
    a strategy that cannot run here at all is an `InfeasiblePlan`."""

    strategy: str
    engine: str
    fits: bool
    reason: str | None
    """Why it does not fit, in numbers (None when it fits)."""
    fix: str | None
    """The cheapest change that would make it fit."""
    workload: Workload
    """The workload it was made for: every setting decided."""
    layout: ParallelLayout
    """How the strategy arranges the ranks."""
    engine_config: EngineConfig
    """What the engine is asked to do (the config files are written from it)."""
    offload: Offload
    """none, cpu or nvme: where optimizer state (and for ZeRO-3 / FSDP, params) live."""
    cluster: ClusterInfo
    model: ModelInfo
    memory: Memory
    communication: Communication
    time: StepTime
    throughput: Throughput
    notes: list[str] = field(default_factory=list)
    kind: Literal["estimate"] = "estimate"


@dataclass(frozen=True, slots=True)
class InfeasiblePlan:
    """A strategy that cannot run on this cluster or with this workload at all (HSDP on one
    node, DeepSpeed without master weights...): the reason and the fix, no figures."""

    strategy: str
    engine: str
    reason: str
    fix: str | None
    workload: Workload
    cluster: ClusterInfo
    model: ModelInfo
    notes: list[str] = field(default_factory=list)
    fits: Literal[False] = False
    kind: Literal["infeasible"] = "infeasible"


Plan = Estimate | InfeasiblePlan
"""What an estimate of one strategy answers."""


@dataclass(frozen=True, slots=True)
class Recommendation:
    chosen: str | None
    """Best fitting strategy, or None when nothing fits."""
    summary: list[str]
    """One or two plain sentences: the choice, what dominates, what would change it."""
    rule_of_thumb: str
    """How the choice compares with the FSDP/ZeRO-3/offload rule of thumb."""
    estimates: list[Estimate | InfeasiblePlan]
    """Every strategy at its best settings, fitting ones ranked by throughput, chosen first."""
    cluster: ClusterInfo
    model: ModelInfo
    candidates_evaluated: int
    infeasible_candidates: int
    notes: list[str] = field(default_factory=list)
