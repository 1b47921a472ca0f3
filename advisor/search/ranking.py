"""The recommender: enumerate strategy x micro-batch x checkpointing, prune, rank, explain.

Pruning: for one strategy and checkpointing mode, memory grows with the micro-batch, so the
micro-batch ladder stops at the first size that does not fit; candidates are scored (memory,
and step time only where they fit) without building full estimates. Per strategy the best fitting plan
(highest tokens/s/GPU, then least memory) is kept; a strategy with no fitting plan keeps its
smallest-memory plan with the reason and the cheapest fix. Strategies rank by tokens/s/GPU,
except that a plan keeping everything on the GPU goes ahead of an offload plan it ties with.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from advisor.core.context import Context
from advisor.core.errors import Infeasible
from advisor.core.estimate import cluster_info, estimate, feasible_context, model_info, moe_note
from advisor.core.hardware import Cluster
from advisor.core.memory import does_not_fit, memory_breakdown
from advisor.core.model import ModelSpec
from advisor.core.priors import Priors
from advisor.core.protocol import Strategy
from advisor.core.results import Estimate, InfeasiblePlan, Recommendation
from advisor.core.timing import step_parts
from advisor.core.workload import Workload
from advisor.search.explain import explain
from advisor.search.fixes import TIE_FRACTION, cheapest_fix
from advisor.search.space import SearchSpace, check_global_batch, grad_accum_for
from advisor.strategies import get_strategy


@dataclass(frozen=True, slots=True)
class _Candidate:
    """A scored point of the search: enough to rank it; the winners become full Estimates."""

    workload: Workload
    fits: bool
    memory_bytes: float
    tokens_per_s_per_gpu: float


def _score(ctx: Context, strategy: Strategy) -> _Candidate:
    """Memory check first; step time only for plans that fit (the rest rank by memory)."""
    memory = memory_breakdown(ctx, strategy)
    fits = does_not_fit(memory, ctx.priors.offload.host_ram_usable_fraction) is None
    tps = 0.0
    if fits:
        step = step_parts(ctx, strategy).step_s
        tps = ctx.workload.tokens_per_step(ctx.dp) / step / ctx.layout.world
    return _Candidate(ctx.workload, fits, memory.per_gpu_bytes.total, tps)


def _candidates(space: SearchSpace, base: Context, strategy: Strategy) -> list[_Candidate]:
    """Checkpointing modes (x gradient-sync modes for FSDP) x the micro-batch ladder, each ladder
    stopped at the first size that does not fit (memory grows with the micro-batch)."""
    syncs = space.sync_options if strategy.family == "fsdp" else (space.base.sync_each_micro_batch,)
    found = []
    for ckpt in space.act_ckpts:
        for sync in syncs:
            for mb in space.micro_batches:
                try:
                    ga = grad_accum_for(space, mb, base.dp)
                except Infeasible:
                    continue
                if sync and ga == 1 and len(syncs) > 1:
                    continue  # the same plan as without
                workload = space.base.model_copy(update={
                    "micro_batch": mb, "act_ckpt": ckpt, "grad_accum": ga,
                    "sync_each_micro_batch": sync})
                candidate = _score(replace(base, workload=workload), strategy)
                found.append(candidate)
                if not candidate.fits:
                    break
    return found


def _rank_key(e: Estimate | InfeasiblePlan) -> tuple[bool, float]:
    if isinstance(e, InfeasiblePlan):
        return (True, float("inf"))
    return (not e.fits, -e.throughput.tokens_per_s_per_gpu if e.fits else e.memory.per_gpu_bytes.total)


def prefer_resident(ranked: list[Estimate | InfeasiblePlan]) -> list[Estimate | InfeasiblePlan]:
    """Ranked plans, with the fastest plan that keeps everything on the GPU moved first when the
    top plan offloads and this one is within a tie (TIE_FRACTION) of it: offload needs host RAM
    and CPU time the estimate only approximates, for no real gain."""
    if not ranked or not isinstance(ranked[0], Estimate) or not ranked[0].fits or ranked[0].offload == "none":
        return ranked
    top = ranked[0].throughput.tokens_per_s_per_gpu
    for i, e in enumerate(ranked):
        if (isinstance(e, Estimate) and e.fits and e.offload == "none"
                and e.throughput.tokens_per_s_per_gpu >= (1 - TIE_FRACTION) * top):
            return [e, *ranked[:i], *ranked[i + 1:]]
    return ranked


def best_per_strategy(space: SearchSpace, cluster: Cluster, model: ModelSpec,
                      priors: Priors) -> tuple[list[Estimate | InfeasiblePlan], int, int]:
    """The best plan of each strategy, ranked; plus candidates evaluated and infeasible."""
    best: list[Estimate | InfeasiblePlan] = []
    evaluated = infeasible = 0
    for name in space.strategies:
        strategy = get_strategy(name, space.fsdp_version)
        base = feasible_context(cluster, model, space.base, strategy, priors)
        if isinstance(base, InfeasiblePlan):  # cannot run here at all: it carries the reason
            best.append(base)
            evaluated, infeasible = evaluated + 1, infeasible + 1
            continue
        check_global_batch(space, base.dp)
        found = _candidates(space, base, strategy)
        evaluated += len(found)
        infeasible += sum(not c.fits for c in found)
        if not found:
            continue
        top = min(found, key=lambda c: (not c.fits, -c.tokens_per_s_per_gpu if c.fits else c.memory_bytes))
        est = estimate(cluster, model, top.workload, strategy, priors, space.tokens_to_train)
        if isinstance(est, Estimate) and not est.fits:
            est = replace(est, fix=cheapest_fix(est, space, cluster, model, priors))
        best.append(est)
    best.sort(key=_rank_key)
    return prefer_resident(best), evaluated, infeasible


def recommend(space: SearchSpace, cluster: Cluster, model: ModelSpec,
              priors: Priors) -> Recommendation:
    ranked, evaluated, infeasible = best_per_strategy(space, cluster, model, priors)
    chosen = ranked[0] if ranked and isinstance(ranked[0], Estimate) and ranked[0].fits else None
    summary, rule = explain(chosen, ranked, cluster, model)
    notes = list(cluster.notes)
    if model.moe is not None:
        notes.append(moe_note(model))
    if model.inferred:
        notes.append(f"model shape inferred from --params: {model.layers} layers x "
                     f"{model.hidden} hidden, {model.heads} heads, ffn {model.ffn}, vocab "
                     f"{model.vocab}; parameter count {model.params:,} kept exact")
    for e in ranked:  # the defaults a verdict rests on, once each
        notes += [n for n in getattr(e, "notes", []) if n.startswith("assumed ") and n not in notes]
    if space.global_batch_tokens is None and space.grad_accum is None:
        notes.append("no global batch given: gradient accumulation 1, so the global batch is "
                     "micro-batch x seq_len x GPUs; pass --global-batch-tokens to fix it")
    return Recommendation(chosen=chosen.strategy if chosen else None, summary=summary,
                          rule_of_thumb=rule, estimates=ranked, cluster=cluster_info(cluster),
                          model=model_info(model), candidates_evaluated=evaluated,
                          infeasible_candidates=infeasible, notes=notes)
