"""Human-readable output (the CLI's edge): rich tables in GiB, GB, ms and percentages."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from advisor.core.results import Estimate, InfeasiblePlan, Recommendation
from advisor.core.units import GB, GiB, duration_text, params_text

_COMPONENTS = ("params", "grads", "optimizer", "activations", "logits", "buffers", "overhead")


def make_console() -> Console:
    """A console that does not squeeze the tables to 80 columns when output is piped."""
    return Console() if sys.stdout.isatty() else Console(width=160)


def _gib(n: float) -> str:
    return f"{n / GiB:.1f}"


def _plan(e: Estimate) -> str:
    s = e.workload
    return f"{s.micro_batch} x {s.grad_accum}, ckpt {s.act_ckpt}"


def _ranked_table(rec: Recommendation) -> Table:
    table = Table(title=f"Per strategy, best settings on {rec.cluster.num_gpus} x {rec.cluster.gpu}"
                        f" ({rec.cluster.nodes} node{'s' if rec.cluster.nodes > 1 else ''})",
                  title_justify="left")
    for col in ("#", "strategy", "fits", "micro x accum, ckpt", "GiB/GPU", "comm GB/step",
                "step s", "tok/s/GPU", "MFU", "time to train"):
        table.add_column(col, justify="right" if col not in ("strategy", "micro x accum, ckpt") else "left")
    for i, e in enumerate(rec.estimates, 1):
        if isinstance(e, InfeasiblePlan):
            table.add_row(str(i), e.strategy, "no", "-", "-", "-", "-", "-", "-", "-")
            continue
        mem = f"{_gib(e.memory.per_gpu_bytes.total)} / {_gib(e.memory.capacity_bytes)}"
        table.add_row(
            str(i), e.strategy, "yes" if e.fits else "[red]no[/red]", _plan(e), mem,
            f"{e.communication.per_gpu_bytes_per_step.total / GB:.1f}", f"{e.time.step_s:.2f}",
            f"{e.throughput.tokens_per_s_per_gpu:,.0f}", f"{100 * e.throughput.mfu:.1f}%",
            duration_text(e.throughput.time_to_train_s) if e.fits else "-")
    return table


def _memory_table(estimates: list[Estimate | InfeasiblePlan], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("strategy")
    for col in (*_COMPONENTS, "total", "capacity", "host/node", "NVMe/node"):
        table.add_column(col, justify="right")
    for e in estimates:
        if isinstance(e, InfeasiblePlan):
            continue
        m = e.memory
        table.add_row(e.strategy, *(_gib(getattr(m.per_gpu_bytes, c)) for c in _COMPONENTS),
                      _gib(m.per_gpu_bytes.total), _gib(m.capacity_bytes),
                      _gib(m.cpu_per_node_bytes) if m.cpu_per_node_bytes else "-",
                      _gib(m.nvme_bytes) if m.nvme_bytes else "-")
    return table


def print_recommendation(rec: Recommendation, console: Console | None = None) -> None:
    console = console or make_console()
    m = rec.model
    params = params_text(m.params, m.active_params, m.experts, m.top_k)
    console.print(f"[bold]{escape(m.name)}[/bold] ({m.family}): {params}, {m.layers} layers x "
                  f"{m.hidden} hidden, {m.heads} heads ({m.kv_heads} kv), ffn {m.ffn}, vocab {m.vocab}")
    for note in rec.notes:
        console.print(f"[dim]note: {escape(note)}[/dim]")
    console.print(_ranked_table(rec))
    console.print(_memory_table(rec.estimates, "Per-GPU memory by component, GiB"))
    misfits = [e for e in rec.estimates if not e.fits]
    if misfits:
        console.print("[bold]Does not fit / cannot run[/bold]")
        for e in misfits:
            fix = f" Cheapest fix: {e.fix}." if e.fix else ""
            console.print(escape(f"  {e.strategy}: {e.reason}.{fix}"))
    console.print()
    head = f"Recommendation: {rec.chosen}" if rec.chosen else "Recommendation: none fits"
    console.print(f"[bold green]{head}[/bold green]")
    for line in rec.summary:
        console.print(escape(f"  {line}"))
    console.print(escape(f"  {rec.rule_of_thumb}"))
    console.print(f"[dim]{rec.candidates_evaluated} candidates evaluated, "
                  f"{rec.infeasible_candidates} did not fit[/dim]")


def print_estimate(e: Estimate | InfeasiblePlan, console: Console | None = None) -> None:
    console = console or make_console()
    m, s = e.model, e.workload
    params = params_text(m.params, m.active_params, m.experts, m.top_k)
    console.print(f"[bold]{e.strategy}[/bold] ({e.engine}) on {e.cluster.num_gpus} x {e.cluster.gpu}; "
                  f"{escape(m.name)} {params}; micro-batch {s.micro_batch} x {s.seq_len} tokens,"
                  f" grad-accum {s.grad_accum}, ckpt {s.act_ckpt}, {s.precision}"
                  f"{'' if s.master_weights or s.precision == 'fp32' else ' (pure)'}, {s.optimizer}")
    for note in [*e.cluster.notes, *(e.notes if isinstance(e, Estimate) else [])]:
        console.print(f"[dim]note: {escape(note)}[/dim]")
    fix = f". Fix: {e.fix}" if e.fix else ""
    word = "cannot run" if isinstance(e, InfeasiblePlan) else "does not fit"
    verdict = "[green]fits[/green]" if e.fits else f"[red]{word}[/red]: {escape(f'{e.reason}{fix}')}"
    console.print(verdict)
    if isinstance(e, InfeasiblePlan):
        return
    console.print(_memory_table([e], "Per-GPU memory, GiB"))
    if e.memory.buffers_detail:
        console.print("  buffers: " + ", ".join(f"{k} {_gib(v)}" for k, v in e.memory.buffers_detail.items()))
    comm = Table(title="Communication per GPU per optimizer step", title_justify="left")
    for col in ("collective", "phase", "group", "x/step", "intra GB", "inter GB", "time ms"):
        comm.add_column(col, justify="left" if col == "collective" else "right")
    for c in e.communication.collectives:
        comm.add_row(c.what, c.phase, str(c.group_size), str(c.count_per_step),
                     f"{c.intra_node_bytes / GB:.2f}", f"{c.inter_node_bytes / GB:.2f}",
                     f"{1e3 * c.time_s:.1f}")
    console.print(comm)
    if e.communication.pcie_bytes_per_step or e.communication.nvme_bytes_per_step:
        console.print(f"  PCIe {e.communication.pcie_bytes_per_step / GB:.1f} GB/step, "
                      f"NVMe {e.communication.nvme_bytes_per_step / GB:.1f} GB/step per GPU")
    t, tp = e.time, e.throughput
    console.print(f"step {t.step_s:.3f} s (range {t.low_s:.3f}-{t.high_s:.3f}): compute "
                  f"{t.compute_s:.3f}, framework {t.framework_s:.3f}, exposed comm "
                  f"{t.exposed_comm_s:.3f}, optimizer {t.optimizer_s:.3f}, offload {t.offload_s:.3f}")
    console.print(f"{tp.tokens_per_s_per_gpu:,.0f} tokens/s/GPU, MFU {100 * tp.mfu:.1f}%, HFU "
                  f"{100 * tp.hfu:.1f}%, {tp.tokens_per_step:,} tokens/step"
                  + (f", time to train {duration_text(tp.time_to_train_s)}" if tp.time_to_train_s else ""))
