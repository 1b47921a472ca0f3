"""The result page's text: the ranked table and the recommendation, formatted at the edge
(GiB, ms, percentages) from the typed Recommendation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from advisor.core.results import Estimate, InfeasiblePlan, Recommendation
from advisor.core.units import GB, GiB, duration_text, params_text
from api import charts


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


def table_row(rank: int, e: Estimate | InfeasiblePlan, chosen: str | None) -> TableRow:
    s = e.workload
    offload = e.offload if isinstance(e, Estimate) else "none"
    base: dict[str, Any] = dict(rank=rank, strategy=e.strategy, engine=e.engine, fits=e.fits,
                                chosen=e.strategy == chosen, reason=e.reason, fix=e.fix,
                                plan=f"{s.micro_batch} × {s.grad_accum}, ckpt {s.act_ckpt}, "
                                     f"offload {offload}")
    if isinstance(e, InfeasiblePlan):
        return TableRow(**base, memory="–", comm="–", step="–", tokens_per_s="–", mfu="–",
                        time_to_train="–")
    return TableRow(
        **base,
        memory=f"{e.memory.per_gpu_bytes.total / GiB:.1f} / {e.memory.capacity_bytes / GiB:g}",
        comm=f"{e.communication.per_gpu_bytes_per_step.total / GB:.1f}",
        step=f"{e.time.step_s:.2f}",
        tokens_per_s=f"{e.throughput.tokens_per_s_per_gpu:,.0f}",
        mfu=f"{100 * e.throughput.mfu:.1f}%",
        time_to_train=duration_text(e.throughput.time_to_train_s, "–") if e.fits else "–")


def result_context(rec: Recommendation) -> dict:
    """Everything the results part of the page draws."""
    m = rec.model
    return {
        "rec": rec,
        "model_line": (f"{m.name} ({m.family}): "
                       f"{params_text(m.params, m.active_params, m.experts, m.top_k)}, "
                       f"{m.layers} layers × {m.hidden} hidden, {m.heads} heads ({m.kv_heads} KV), "
                       f"FFN {m.ffn}, vocab {m.vocab}"),
        "cluster_line": (f"{rec.cluster.num_gpus} × {rec.cluster.gpu} ({rec.cluster.nodes} node"
                         f"{'s' if rec.cluster.nodes > 1 else ''} of {rec.cluster.gpus_per_node}, "
                         f"{rec.cluster.intra_node_link})"),
        "rows": [table_row(i, e, rec.chosen) for i, e in enumerate(rec.estimates, 1)],
        "memory_chart": charts.memory_chart(rec.estimates, rec.chosen),
        "throughput_chart": charts.throughput_chart(rec.estimates, rec.chosen),
        "components": charts.COMPONENTS,
    }
