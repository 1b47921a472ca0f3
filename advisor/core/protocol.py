"""The strategy protocol: what each GPU holds, what it sends, what runs on the host.

A strategy answers from a `Context` (cluster + model + workload + priors + layout); it never
sees another strategy's flags. advisor/core/memory.py, communication.py, compute.py and
timing.py turn its answers into bytes and seconds; the implementations live in
advisor/strategies/, one class each, behind the registry there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal, Protocol

from advisor.core.communication import Collective
from advisor.core.context import Context
from advisor.core.engines import Engine, EngineConfig, Offload
from advisor.core.hardware import Cluster
from advisor.core.layout import ParallelLayout
from advisor.core.model import ModelSpec
from advisor.core.priors import Priors
from advisor.core.workload import Workload

Family = Literal["ddp", "deepspeed", "fsdp"]
HookKind = Literal["ddp", "zero12", "zero3", "fsdp1", "fsdp2"]


@dataclass(frozen=True, slots=True)
class ModelStates:
    """Per-GPU bytes of parameters, gradients and optimizer state, plus host/NVMe per rank."""

    params: float
    grads: float
    """Gradient bytes on the GPU at the optimizer step, in whatever dtype the engine keeps them
    (DeepSpeed's fp32 step copies included): what DeepSpeed's estimators count."""
    optimizer: float
    """Master weights and optimizer moments on the GPU."""
    grads_at_backward_start: float = 0.0
    """Gradient bytes already on the GPU when backward starts (the activation peak): persistent
    gradient buffers, and gradients accumulated by earlier micro-batches. zero_grad() sets
    PyTorch gradients to None, so without accumulation most engines hold none then."""
    paper_grads: float | None = None
    """The ZeRO paper's gradient term for this sharding (16-bit), where the engine keeps
    something else (DeepSpeed adds an fp32 partition); None when equal to `grads`."""
    cpu: float = 0.0
    """Bytes this rank keeps in host memory (offload)."""
    nvme: float = 0.0
    """Bytes this rank keeps on NVMe (ZeRO-Infinity)."""

    @property
    def paper_total(self) -> float:
        """params + 16-bit grads + optimizer on the GPU: the ZeRO paper's "model states"."""
        grads = self.grads if self.paper_grads is None else self.paper_grads
        return self.params + grads + self.optimizer

    @property
    def gpu_total(self) -> float:
        return self.params + self.grads + self.optimizer


@dataclass(frozen=True, slots=True)
class HostWork:
    """Per-GPU host-side traffic and compute in one optimizer step."""

    pcie_overlappable_bytes: float = 0.0
    """Host<->device copies that run during backward (gradient offload, param prefetch)."""
    pcie_exposed_bytes: float = 0.0
    """Host<->device copies on the critical path (updated params back to the GPU)."""
    nvme_bytes: float = 0.0
    """NVMe reads + writes by this rank."""
    cpu_optimizer_params: float = 0.0
    """Parameters this rank's optimizer updates on the CPU."""
    cpu_optimizer: Literal["deepspeed", "torch"] = "deepspeed"


@dataclass(frozen=True, slots=True)
class Buffers:
    """Named GPU buffers (communication buckets, gathered parameters), bytes, as held when
    backward starts; `at_step` names those still held at the optimizer step (persistent)."""

    items: dict[str, float] = field(default_factory=dict)
    at_step: frozenset[str] = frozenset()

    @property
    def total(self) -> float:
        return sum(self.items.values())

    @property
    def step_total(self) -> float:
        return sum(v for k, v in self.items.items() if k in self.at_step)


class Strategy(Protocol):
    """One distributed-training strategy. Implementations are registered in
    advisor/strategies/registry.py."""

    name: ClassVar[str]
    family: ClassVar[Family]
    description: ClassVar[str]

    @property
    def engine(self) -> Engine: ...

    @property
    def offload(self) -> Offload:
        """Where the optimizer state (and, for ZeRO-3 / FSDP, the params) live off the GPU."""
        ...

    def layout(self, cluster: Cluster) -> ParallelLayout:
        """How this strategy arranges the cluster's ranks (DDP replicates, FSDP shards...)."""
        ...

    def engine_config(self, ctx: Context) -> EngineConfig:
        """What the engine is asked to do: the emitters and calibration read it."""
        ...

    def check(self, ctx: Context) -> None:
        """Raise `Infeasible` when the strategy cannot run on this cluster at all."""

    def model_states(self, ctx: Context) -> ModelStates: ...

    def buffers(self, ctx: Context) -> Buffers: ...

    def collectives(self, ctx: Context) -> list[Collective]: ...

    def host_work(self, ctx: Context) -> HostWork: ...

    def gpu_optimizer_params(self, ctx: Context) -> float:
        """Parameters the optimizer updates on this GPU (0 when the step runs on the CPU)."""
        ...

    def framework_hooks(self, ctx: Context) -> tuple[HookKind, int]:
        """(hook kind in the priors, modules hooked per micro-batch) for host-side overhead."""
        ...

    def residual_bytes(self, ctx: Context) -> int:
        """Bytes per element of the residual stream: the module's dtype during forward."""
        ...


def make_context(cluster: Cluster, model: ModelSpec, workload: Workload, priors: Priors,
                 strategy: Strategy) -> Context:
    """The context `strategy` runs in on `cluster`: its own layout of the ranks."""
    return Context(cluster=cluster, model=model, workload=workload, priors=priors,
                   layout=strategy.layout(cluster))
