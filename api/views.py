"""The result page's text: the ranked table, the recommendation and the charts' rows, formatted
at the edge (GiB, ms, percentages) from the typed Recommendation and the micro-batch sweep."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from advisor.core.results import Estimate, InfeasiblePlan, Recommendation
from advisor.core.units import GB, duration_text, params_text
from api import charts
from api.sweep import Point


@dataclass(frozen=True, slots=True)
class TableRow:
    rank: int
    strategy: str
    engine: str
    fits: bool
    chosen: bool
    plan: str
    memory: str
    comm: str
    step: str
    tokens_per_s: str
    mfu: str
    time_to_train: str
    reason: str | None
    fix: str | None
    nvme: bool
    """Its config files need an NVMe path."""


def table_row(rank: int, e: Estimate | InfeasiblePlan, chosen: str | None) -> TableRow:
    s = e.workload
    offload = e.offload if isinstance(e, Estimate) else "none"
    base: dict[str, Any] = dict(rank=rank, strategy=e.strategy, engine=e.engine, fits=e.fits,
                                chosen=e.strategy == chosen, reason=e.reason, fix=e.fix,
                                nvme=offload == "nvme",
                                plan=f"{s.micro_batch} × {s.grad_accum}, ckpt {s.act_ckpt}, "
                                     f"offload {offload}")
    if isinstance(e, InfeasiblePlan):
        return TableRow(**base, memory="–", comm="–", step="–", tokens_per_s="–", mfu="–",
                        time_to_train="–")
    memory = e.memory
    return TableRow(
        **base,
        memory=f"{charts.gib_text(memory.per_gpu_bytes.total)} / {charts.gib_text(memory.capacity_bytes)}",
        comm=f"{e.communication.per_gpu_bytes_per_step.total / GB:.1f}",
        step=f"{e.time.step_s:.2f}",
        tokens_per_s=f"{e.throughput.tokens_per_s_per_gpu:,.0f}",
        mfu=f"{100 * e.throughput.mfu:.1f}%",
        time_to_train=duration_text(e.throughput.time_to_train_s, "–") if e.fits else "–")


def chosen_plan(rec: Recommendation) -> Estimate | None:
    return next((e for e in rec.estimates if isinstance(e, Estimate) and e.strategy == rec.chosen), None)


def sweep_items(points: list[Point], plan: Estimate) -> list[charts.Item]:
    """One chart row per micro-batch: "micro-batch x accumulation"."""
    return [charts.Item(label=f"{p.micro_batch} × {p.grad_accum}" if p.grad_accum else str(p.micro_batch),
                        estimate=p.estimate, highlight=p.micro_batch == plan.workload.micro_batch,
                        missing=p.error) for p in points]


def result_context(rec: Recommendation, points: list[Point], target: str | None = None) -> dict:
    """Everything the results part of the page draws; `target` is the strategy whose files the
    download button gives (None: the recommended one)."""
    m = rec.model
    rows = [table_row(i, e, rec.chosen) for i, e in enumerate(rec.estimates, 1)]
    by_strategy = [charts.Item(label=e.strategy, estimate=e, highlight=e.strategy == rec.chosen)
                   for e in rec.estimates]
    plan = chosen_plan(rec)
    sweep = sweep_items(points, plan) if plan is not None and points else []
    return {
        "rec": rec,
        "plan": plan,
        "model_line": (f"{m.name} ({m.family}): "
                       f"{params_text(m.params, m.active_params, m.experts, m.top_k)}, "
                       f"{m.layers} layers × {m.hidden} hidden, {m.heads} heads ({m.kv_heads} KV), "
                       f"FFN {m.ffn}, vocab {m.vocab}"),
        "cluster_line": (f"{rec.cluster.num_gpus} × {rec.cluster.gpu} ({rec.cluster.nodes} node"
                         f"{'s' if rec.cluster.nodes > 1 else ''} of {rec.cluster.gpus_per_node}, "
                         f"{rec.cluster.intra_node_link})"),
        "rows": rows,
        "needs_nvme": any(r.nvme and r.strategy == (target or rec.chosen) for r in rows),
        "memory_chart": charts.memory_chart(by_strategy),
        "throughput_chart": charts.throughput_chart(by_strategy),
        "sweep_memory_chart": charts.memory_chart(sweep) if sweep else None,
        "sweep_throughput_chart": charts.throughput_chart(sweep) if sweep else None,
        "components": charts.COMPONENTS,
    }
