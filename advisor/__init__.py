"""advisor: per-GPU memory, communication, step time and throughput of distributed LLM training
(DDP, DeepSpeed ZeRO, FSDP), a recommended plan, and its config files.

The Python API, what the CLI and the REST API call (a request is a dict of the CLI's flags with
underscores, or an `advisor.requests.models.EstimateRequest` / `RecommendRequest`):

    import advisor
    est = advisor.estimate({"params": 13e9, "gpus": "8xA100", "strategy": "fsdp", "micro_batch": 2})
    est.memory.per_gpu_bytes.total, est.throughput.tokens_per_s_per_gpu
    rec = advisor.recommend({"model": "llama-3-8b", "gpus": "2x8xH100", "global_batch_tokens": "4M"})
    rec.chosen, rec.summary
    advisor.emit(rec, "plan/")      # accelerate_config.yaml, ds_config.json, launch.sh, PLAN.md

Bad input raises `advisor.core.errors.InvalidInput` (its `field` and `allowed`); results are the
dataclasses of advisor/core/results.py (`advisor.core.schemas.to_json` prints them as the CLI does).
The imports sit inside the functions so that `import advisor` (and the CLI) stays light.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from advisor.core.results import Estimate, InfeasiblePlan, Recommendation
    from advisor.requests.models import EstimateRequest, RecommendRequest

__all__ = ["emit", "estimate", "recommend"]


def estimate(request: EstimateRequest | dict[str, Any]) -> Estimate | InfeasiblePlan:
    """One strategy at the given settings (`advisor estimate`)."""
    from advisor.requests.jobs import run_estimate
    from advisor.requests.models import EstimateRequest, validate_request

    req = request if isinstance(request, EstimateRequest) else validate_request(EstimateRequest, request)
    return run_estimate(req)


def recommend(request: RecommendRequest | dict[str, Any]) -> Recommendation:
    """Every strategy at its best settings, ranked, with the reasons (`advisor recommend`)."""
    from advisor.requests.jobs import run_recommend
    from advisor.requests.models import RecommendRequest, validate_request

    req = request if isinstance(request, RecommendRequest) else validate_request(RecommendRequest, request)
    return run_recommend(req)[0]


def emit(plan: Recommendation | Estimate | InfeasiblePlan, out_dir: str | Path, *,
         nvme_path: str | None = None, alternatives: int = 0) -> list[Path]:
    """Write the config files of a plan into `out_dir` (created, or replaced if advisor wrote
    it): the recommendation's chosen plan (and `alternatives` runners-up in
    out_dir/alternatives/), or one estimate. Returns the folders written."""
    from advisor.core.results import Recommendation
    from advisor.emitters.choices import EmitOptions
    from advisor.emitters.files import alternative_folder, write_plans, write_recommendation

    options = EmitOptions(nvme_path=nvme_path)
    root = Path(out_dir).expanduser().resolve()
    if isinstance(plan, Recommendation):
        plans = write_recommendation(plan, root, alternatives, options)
        return [root] + [root / alternative_folder(i, p.estimate) for i, p in enumerate(plans[1:], 2)]
    write_plans(root, plan, options, [], plan.notes)
    return [root]
