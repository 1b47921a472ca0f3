"""The strategy protocol: what each GPU holds, what it sends, what runs on the host.

A strategy answers from a `Context` (cluster + model + workload + priors); it never sees another
strategy's flags. `advisor/memory.py`, `advisor/communication.py` and `advisor/compute.py` turn
its answers into bytes and seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal, Protocol

from advisor.core.communication import Collective
from advisor.core.hardware import Cluster
from advisor.core.model import ModelSpec
from advisor.core.priors import Priors
from advisor.core.workload import ParamBytes, Workload, optimizer_state_bytes, param_bytes

Engine = Literal["ddp", "fsdp1", "fsdp2", "deepspeed"]
Family = Literal["ddp", "deepspeed", "fsdp"]


@dataclass(frozen=True, slots=True)
class Context:
    """Everything a strategy may read. Built once per estimate."""

    cluster: Cluster
    model: ModelSpec
    workload: Workload
    priors: Priors

    @property
    def P(self) -> int:  # noqa: N802 - the papers' name for the parameter count
        return self.model.params

    @property
    def world(self) -> int:
        return self.cluster.num_gpus

    @property
    def bytes(self) -> ParamBytes:
        return param_bytes(self.workload.precision, self.workload.master_weights)

    @property
    def optimizer_state(self) -> int:
        return optimizer_state_bytes(self.workload.optimizer, self.bytes.optimizer_element)

    @property
    def fp32_state(self) -> int:
        """Bytes per parameter of optimizer-owned fp32 state: master copy + moments."""
        return self.bytes.master + self.optimizer_state


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
    """One distributed-training strategy. Implementations are registered in `registry.py`."""

    name: ClassVar[str]
    family: ClassVar[Family]
    description: ClassVar[str]

    @property
    def engine(self) -> Engine: ...

    @property
    def offload(self) -> Literal["none", "cpu", "nvme"]:
        """Where the optimizer state (and, for ZeRO-3 / FSDP, the params) live off the GPU."""
        ...

    @property
    def fsdp_version(self) -> int | None:
        """1 or 2 for FSDP strategies, None otherwise."""
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

    def framework_hooks(self, ctx: Context) -> tuple[str, int]:
        """(hook kind in the priors, modules hooked per micro-batch) for host-side overhead."""
        ...

    def residual_bytes(self, ctx: Context) -> int:
        """Bytes per element of the residual stream: the module's dtype during forward."""
        ...
