"""The chosen plan at every micro-batch of the search's ladder: what the result page's
"throughput and peak memory vs micro-batch" charts draw.

Each point is `advisor.estimate` (the Python API) of the chosen strategy with the plan's other
settings (precision, checkpointing, gradient sync, and its accumulation, or the user's global
batch, which then sets the accumulation per micro-batch). About 1 ms a point; the route runs it
in a worker thread (api/service.py `offloaded`), never on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

import advisor
from advisor.core.errors import AdvisorError, Infeasible, InvalidInput
from advisor.core.results import Estimate, InfeasiblePlan
from advisor.search.space import MICRO_BATCH_LADDER
from advisor.strategies import FSDP_NAMES
from api.schemas import EstimateRequest, RecommendRequest


@dataclass(frozen=True, slots=True)
class Point:
    micro_batch: int
    estimate: Estimate | InfeasiblePlan | None
    error: str | None = None
    """Why this micro-batch gives no estimate (e.g. the global batch does not divide)."""

    @property
    def grad_accum(self) -> int | None:
        return self.estimate.workload.grad_accum if self.estimate is not None else None


def micro_batches(plan: Estimate) -> tuple[int, ...]:
    """The ladder, and the plan's own micro-batch if the user fixed one off the ladder."""
    return tuple(sorted({*MICRO_BATCH_LADDER, plan.workload.micro_batch}))


def sweep(req: RecommendRequest, plan: Estimate) -> list[Point]:
    """`plan`'s strategy at each micro-batch, everything else as in `plan`."""
    w = plan.workload
    job = req.model_dump(include=set(EstimateRequest.model_fields) - {"strategy"}, exclude_none=True)
    job.update(strategy=plan.strategy, precision=w.precision, act_ckpt=w.act_ckpt,
               sync_each_micro_batch=w.sync_each_micro_batch)
    if plan.strategy not in FSDP_NAMES:
        job.pop("fsdp_version", None)
    if req.global_batch_tokens is None:
        job["grad_accum"] = w.grad_accum
    points = []
    for mb in micro_batches(plan):
        try:
            est = advisor.estimate(EstimateRequest.model_validate({**job, "micro_batch": mb}))
        except (AdvisorError, ValidationError, ArithmeticError, ValueError) as exc:
            points.append(Point(mb, None, _why(exc)))
            continue
        points.append(Point(mb, est))
    return points


def _why(exc: Exception) -> str:
    if isinstance(exc, InvalidInput):
        return exc.message
    if isinstance(exc, Infeasible):
        return exc.reason
    if isinstance(exc, ValidationError):
        return str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
    return f"the cost model cannot evaluate it ({type(exc).__name__})"
