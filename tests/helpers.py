"""Small builders shared by the model tests (no fixtures with hidden state)."""

from __future__ import annotations

from advisor.core.context import Context
from advisor.core.estimate import estimate
from advisor.core.hardware import parse_cluster
from advisor.core.model import ModelSpec, infer_from_params, preset
from advisor.core.priors import default_priors
from advisor.core.protocol import make_context
from advisor.core.results import Estimate
from advisor.core.workload import Workload
from advisor.strategies import get_strategy


def context(gpus: str = "8xA100", model: ModelSpec | str | float = "llama-2-7b",
            strategy: str = "fsdp", **workload) -> Context:
    """The context `strategy` runs in (its layout: FSDP and ZeRO shard over every GPU, which is
    also what the model-state terms of every strategy read)."""
    if isinstance(model, str):
        model = preset(model)
    elif isinstance(model, float | int):
        model = infer_from_params(model)
    return make_context(parse_cluster(gpus), model, Workload(**workload), default_priors(),
                        get_strategy(strategy))


def run(strategy: str, gpus: str = "8xA100", model: ModelSpec | str | float = "llama-2-7b",
        fsdp_version: int = 2, **workload) -> Estimate:
    ctx = context(gpus, model, strategy, **workload)
    return estimate(ctx.cluster, ctx.model, ctx.workload, get_strategy(strategy, fsdp_version),
                    ctx.priors)
