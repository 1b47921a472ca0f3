"""A request in, a typed result out: the steps the CLI, the API, `advisor emit` and the Python
API (advisor/__init__.py) share.

Resolution (advisor/requests/resolve.py) turns the request into the model's inputs and picks
the priors (shipped, or a calibration profile); then one estimate or the search runs.
"""

from __future__ import annotations

from advisor.core.estimate import estimate
from advisor.core.model import ModelSpec
from advisor.core.results import Estimate, InfeasiblePlan, Recommendation
from advisor.requests.models import EstimateRequest, RecommendRequest
from advisor.requests.resolve import (
    base_workload,
    resolve_cluster,
    resolve_estimate,
    resolve_model,
    resolve_priors,
    search_space,
)
from advisor.search.ranking import recommend
from advisor.strategies import get_strategy


def run_estimate(req: EstimateRequest) -> Estimate | InfeasiblePlan:
    cluster, model, workload = resolve_estimate(req)
    priors, cluster = resolve_priors(req, cluster)
    return estimate(cluster, model, workload, get_strategy(req.strategy, req.fsdp), priors, req.tokens)


def run_recommend(req: RecommendRequest) -> tuple[Recommendation, ModelSpec]:
    """The recommendation and the resolved model (the config writers need its layer class)."""
    cluster, model = resolve_cluster(req), resolve_model(req)
    workload, cluster = base_workload(req, cluster, model)
    priors, cluster = resolve_priors(req, cluster)
    return recommend(search_space(req, workload), cluster, model, priors), model
