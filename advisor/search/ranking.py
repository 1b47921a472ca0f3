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

from advisor.core.errors import Infeasible, InvalidInput
from advisor.core.estimate import cluster_info, estimate, model_info
from advisor.core.hardware import Cluster
from advisor.core.memory import does_not_fit, memory_breakdown
from advisor.core.model import ModelSpec
from advisor.core.priors import Priors
from advisor.core.results import Estimate, Recommendation
from advisor.core.timing import step_parts
from advisor.core.workload import ACT_CKPTS, MAX_GRAD_ACCUM, ActCkpt, Workload
from advisor.search.explain import TIE_FRACTION, cheapest_fix, explain
from advisor.strategies import STRATEGY_NAMES, get_strategy
from advisor.strategies.base import Context, Strategy

MICRO_BATCH_LADDER = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True, slots=True)
class SearchSpace:
    """What the user fixed and what the search may choose."""

    base: Workload
    """Precision, optimizer, sequence length, flash/compile; micro-batch and ckpt overridden."""
    micro_batches: tuple[int, ...] = MICRO_BATCH_LADDER
    act_ckpts: tuple[ActCkpt, ...] = ACT_CKPTS
    sync_options: tuple[bool, ...] = (False, True)
    """`Workload.sync_each_micro_batch` values tried for FSDP plans with accumulation (it trades
    the unsharded gradient buffer for a reduce-scatter per micro-batch); other plans keep base's."""
    grad_accum: int | None = None
    """Fixed gradient accumulation; None: 1, or derived from global_batch_tokens."""
    global_batch_tokens: int | None = None
    strategies: tuple[str, ...] = STRATEGY_NAMES
    fsdp_version: int = 2
    tokens_to_train: float | None = None


def grad_accum_for(space: SearchSpace, micro_batch: int, world: int) -> int:
    """Gradient accumulation that gives the requested global batch; raises Infeasible if the
    global batch is not a multiple of micro_batch x seq_len x world."""
    if space.global_batch_tokens is None:
        return space.grad_accum or 1
    per_micro = micro_batch * space.base.seq_len * world
    if space.global_batch_tokens % per_micro:
        raise Infeasible(f"global batch {space.global_batch_tokens} tokens is not a multiple of "
                         f"micro-batch {micro_batch} x {space.base.seq_len} tokens x {world} GPUs")
    grad_accum = space.global_batch_tokens // per_micro
    if grad_accum > MAX_GRAD_ACCUM:
        raise Infeasible(f"global batch {space.global_batch_tokens} tokens needs {grad_accum} "
                         f"accumulation steps at micro-batch {micro_batch}, over {MAX_GRAD_ACCUM}")
    return grad_accum


def check_global_batch(space: SearchSpace, world: int) -> None:
    """The global batch must be reachable by at least one micro-batch of the space."""
    if space.global_batch_tokens is None:
        return
    unit = space.base.seq_len * world
    if space.global_batch_tokens % unit or space.global_batch_tokens < unit:
        raise InvalidInput("global_batch_tokens",
                           f"{space.global_batch_tokens} tokens is not a multiple of seq_len x GPUs"
                           f" = {space.base.seq_len} x {world} = {unit}",
                           f"a positive multiple of {unit}")
    largest = max(space.micro_batches) * MAX_GRAD_ACCUM * unit
    if space.global_batch_tokens > largest:
        raise InvalidInput("global_batch_tokens",
                           f"{space.global_batch_tokens} tokens needs more than {MAX_GRAD_ACCUM} "
                           "accumulation steps at every micro-batch", f"at most {largest}")


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
        tps = ctx.workload.tokens_per_step(ctx.world) / step / ctx.world
    return _Candidate(ctx.workload, fits, memory.per_gpu_bytes.total, tps)


def _candidates(space: SearchSpace, cluster: Cluster, model: ModelSpec, priors: Priors,
                strategy: Strategy) -> list[_Candidate]:
    """Checkpointing modes (x gradient-sync modes for FSDP) x the micro-batch ladder, each ladder
    stopped at the first size that does not fit (memory grows with the micro-batch)."""
    syncs = space.sync_options if strategy.family == "fsdp" else (space.base.sync_each_micro_batch,)
    found = []
    for ckpt in space.act_ckpts:
        for sync in syncs:
            for mb in space.micro_batches:
                try:
                    ga = grad_accum_for(space, mb, cluster.num_gpus)
                except Infeasible:
                    continue
                if sync and ga == 1 and len(syncs) > 1:
                    continue  # the same plan as without
                workload = space.base.model_copy(update={
                    "micro_batch": mb, "act_ckpt": ckpt, "grad_accum": ga,
                    "sync_each_micro_batch": sync})
                candidate = _score(Context(cluster, model, workload, priors), strategy)
                found.append(candidate)
                if not candidate.fits:
                    break
    return found


def _rank_key(e: Estimate) -> tuple:
    tps = e.throughput.tokens_per_s_per_gpu if e.throughput else 0.0
    mem = e.memory.per_gpu_bytes.total if e.memory else float("inf")
    return (not e.fits, -tps if e.fits else mem)


def prefer_resident(ranked: list[Estimate]) -> list[Estimate]:
    """Ranked plans, with the fastest plan that keeps everything on the GPU moved first when the
    top plan offloads and this one is within a tie (TIE_FRACTION) of it: offload needs host RAM
    and CPU time the estimate only approximates, for no real gain."""
    if not ranked or not ranked[0].fits or ranked[0].settings.offload == "none":
        return ranked
    top = ranked[0].throughput.tokens_per_s_per_gpu
    for i, e in enumerate(ranked):
        if (e.fits and e.settings.offload == "none"
                and e.throughput.tokens_per_s_per_gpu >= (1 - TIE_FRACTION) * top):
            return [e, *ranked[:i], *ranked[i + 1:]]
    return ranked


def best_per_strategy(space: SearchSpace, cluster: Cluster, model: ModelSpec,
                      priors: Priors) -> tuple[list[Estimate], int, int]:
    """The best plan of each strategy, ranked; plus candidates evaluated and infeasible."""
    check_global_batch(space, cluster.num_gpus)
    best, evaluated, infeasible = [], 0, 0
    for name in space.strategies:
        strategy = get_strategy(name, space.fsdp_version)
        try:
            strategy.check(Context(cluster, model, space.base, priors))
            cluster.gpu.peak_flops(space.base.precision)
        except Infeasible:  # cannot run here at all: the estimate carries the reason
            best.append(estimate(cluster, model, space.base, strategy, priors, space.tokens_to_train))
            evaluated, infeasible = evaluated + 1, infeasible + 1
            continue
        found = _candidates(space, cluster, model, priors, strategy)
        evaluated += len(found)
        infeasible += sum(not c.fits for c in found)
        if not found:
            continue
        top = min(found, key=lambda c: (not c.fits, -c.tokens_per_s_per_gpu if c.fits else c.memory_bytes))
        est = estimate(cluster, model, top.workload, strategy, priors, space.tokens_to_train)
        if not est.fits:
            est = replace(est, fix=cheapest_fix(est, space, cluster, model, priors))
        best.append(est)
    best.sort(key=_rank_key)
    return prefer_resident(best), evaluated, infeasible


def recommend(space: SearchSpace, cluster: Cluster, model: ModelSpec,
              priors: Priors) -> Recommendation:
    ranked, evaluated, infeasible = best_per_strategy(space, cluster, model, priors)
    chosen = ranked[0] if ranked and ranked[0].fits else None
    summary, rule = explain(chosen, ranked, cluster, model)
    notes = list(cluster.notes)
    if model.inferred:
        notes.append(f"model shape inferred from --params: {model.layers} layers x "
                     f"{model.hidden} hidden, {model.heads} heads, ffn {model.ffn}, vocab "
                     f"{model.vocab}; parameter count {model.params:,} kept exact")
    if space.global_batch_tokens is None and space.grad_accum is None:
        notes.append("no global batch given: gradient accumulation 1, so the global batch is "
                     "micro-batch x seq_len x GPUs; pass --global-batch-tokens to fix it")
    return Recommendation(chosen=chosen.strategy if chosen else None, summary=summary,
                          rule_of_thumb=rule, estimates=ranked, cluster=cluster_info(cluster),
                          model=model_info(model), candidates_evaluated=evaluated,
                          infeasible_candidates=infeasible, notes=notes)
