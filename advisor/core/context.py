"""Context: everything a strategy may read for one estimate, built once per estimate."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.core.hardware import Cluster
from advisor.core.layout import Dim, Group, ParallelLayout
from advisor.core.model import ModelSpec
from advisor.core.priors import Priors
from advisor.core.workload import ParamBytes, Workload, optimizer_state_bytes, param_bytes


@dataclass(frozen=True, slots=True)
class Context:
    """The cluster, model, workload, priors and the layout of ranks the strategy runs on."""

    cluster: Cluster
    model: ModelSpec
    workload: Workload
    priors: Priors
    layout: ParallelLayout

    @property
    def P(self) -> int:  # noqa: N802 - the papers' name for the parameter count
        return self.model.params

    @property
    def dp(self) -> int:
        """Data-parallel degree: micro-batches processed side by side."""
        return self.layout.dp

    def group(self, *dims: Dim) -> Group:
        """The shape of the process group over `dims` on this cluster."""
        return self.layout.group(dims, self.cluster.gpus_per_node)

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
