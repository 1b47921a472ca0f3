"""Small builders shared by the model tests (no fixtures with hidden state)."""

from __future__ import annotations

from advisor.estimate import estimate
from advisor.hardware import parse_cluster
from advisor.model import ModelSpec, infer_from_params, preset
from advisor.priors import default_priors
from advisor.results import Estimate
from advisor.strategies import get_strategy
from advisor.strategies.base import Context
from advisor.workload import Workload


def context(gpus: str = "8xA100", model: ModelSpec | str | float = "llama-2-7b",
            **workload) -> Context:
    if isinstance(model, str):
        model = preset(model)
    elif isinstance(model, float | int):
        model = infer_from_params(model)
    return Context(cluster=parse_cluster(gpus), model=model, workload=Workload(**workload),
                   priors=default_priors())


def run(strategy: str, gpus: str = "8xA100", model: ModelSpec | str | float = "llama-2-7b",
        fsdp_version: int = 2, **workload) -> Estimate:
    ctx = context(gpus, model, **workload)
    return estimate(ctx.cluster, ctx.model, ctx.workload, get_strategy(strategy, fsdp_version),
                    ctx.priors)
