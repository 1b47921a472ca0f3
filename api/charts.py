"""Server-side SVG charts for the result page: geometry here, drawing in templates/web/.

Horizontal bars, one row per strategy: per-GPU memory stacked by component against the GPU's
capacity line, and tokens/s/GPU. No JavaScript, no chart library, nothing from the network.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.core.results import Estimate, InfeasiblePlan
from advisor.core.units import GiB

# Okabe-Ito colours: distinguishable with the common colour-vision deficiencies.
COMPONENTS = (("params", "parameters", "#0072B2"), ("grads", "gradients", "#56B4E9"),
              ("optimizer", "optimizer states", "#E69F00"), ("activations", "activations", "#009E73"),
              ("logits", "logits / loss", "#F0E442"), ("buffers", "comm. buffers", "#CC79A7"),
              ("overhead", "CUDA / NCCL / fragmentation", "#999999"))
WIDTH = 830  # plot plus room for the value labels on the right
LABEL_W = 130  # strategy names on the left
PLOT_W = 540
ROW_H = 30
BAR_H = 18
TOP = 34  # room for the capacity label
AXIS_H = 30
MAX_OVER_CAPACITY = 2.0  # the memory axis stops at 2x capacity; longer bars are cut, the label says


@dataclass(frozen=True, slots=True)
class Segment:
    x: float
    width: float
    color: str
    title: str


@dataclass(frozen=True, slots=True)
class Row:
    y: float
    label: str
    segments: list[Segment]
    value_text: str
    value_x: float
    note: str | None = None
    """Text drawn instead of a bar (cannot run / does not fit)."""
    highlight: bool = False


@dataclass(frozen=True, slots=True)
class Tick:
    x: float
    text: str


@dataclass(frozen=True, slots=True)
class Chart:
    width: int
    height: int
    plot_x: int
    plot_w: int
    rows: list[Row]
    ticks: list[Tick]
    axis_y: float
    axis_label: str
    line_x: float | None = None
    """The capacity line (memory chart)."""
    line_text: str = ""


def _nice_step(span: float, target_ticks: int = 5) -> float:
    raw = span / target_ticks
    magnitude = 10 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)


def _ticks(axis_max: float, scale: float, fmt: str) -> list[Tick]:
    step = _nice_step(axis_max)
    count = int(axis_max / step + 1e-9)
    return [Tick(x=LABEL_W + i * step * scale, text=format(i * step, fmt)) for i in range(count + 1)]


def memory_chart(estimates: list[Estimate | InfeasiblePlan], chosen: str | None) -> Chart | None:
    """Per-GPU memory by component for each strategy, against the GPU's capacity."""
    with_memory = [e for e in estimates if isinstance(e, Estimate)]
    if not with_memory:
        return None
    capacity = with_memory[0].memory.capacity_bytes / GiB
    largest = max(e.memory.per_gpu_bytes.total for e in with_memory) / GiB
    axis_max = max(capacity, min(largest, MAX_OVER_CAPACITY * capacity)) * 1.08
    scale = PLOT_W / axis_max
    rows = []
    for i, e in enumerate(estimates):
        y = TOP + i * ROW_H
        if isinstance(e, InfeasiblePlan):
            rows.append(Row(y=y, label=e.strategy, segments=[], value_text="", value_x=0,
                            note=f"cannot run: {e.reason}"))
            continue
        m, x, segments = e.memory.per_gpu_bytes, float(LABEL_W), []
        for key, label, color in COMPONENTS:
            gib = getattr(m, key) / GiB
            width = min(gib * scale, LABEL_W + PLOT_W - x)
            if width > 0:
                segments.append(Segment(x=x, width=width, color=color,
                                        title=f"{e.strategy}: {label} {gib:.1f} GiB"))
                x += width
        total = m.total / GiB
        rows.append(Row(y=y, label=e.strategy, segments=segments, value_x=x + 6,
                        value_text=f"{total:,.1f} GiB" + ("" if e.fits else " (does not fit)"),
                        highlight=e.strategy == chosen))
    height = TOP + len(estimates) * ROW_H + AXIS_H
    return Chart(width=WIDTH, height=height, plot_x=LABEL_W, plot_w=PLOT_W, rows=rows,
                 ticks=_ticks(axis_max, scale, "g"), axis_y=TOP + len(estimates) * ROW_H,
                 axis_label="GiB per GPU", line_x=LABEL_W + capacity * scale,
                 line_text=f"capacity {capacity:g} GiB")


def throughput_chart(estimates: list[Estimate | InfeasiblePlan], chosen: str | None) -> Chart | None:
    """Predicted tokens/s/GPU of each strategy that fits."""
    fitting = [e for e in estimates if isinstance(e, Estimate) and e.fits]
    if not fitting:
        return None
    top = max(e.throughput.tokens_per_s_per_gpu for e in fitting) * 1.08
    scale = PLOT_W / top
    rows = []
    for i, e in enumerate(estimates):
        y = TOP + i * ROW_H
        if not isinstance(e, Estimate) or not e.fits:
            rows.append(Row(y=y, label=e.strategy, segments=[], value_text="", value_x=0,
                            note="does not fit" if isinstance(e, Estimate) else "cannot run"))
            continue
        tps = e.throughput.tokens_per_s_per_gpu
        color = "#D55E00" if e.strategy == chosen else "#0072B2"
        seg = Segment(x=LABEL_W, width=tps * scale, color=color,
                      title=f"{e.strategy}: {tps:,.0f} tokens/s/GPU, MFU {100 * e.throughput.mfu:.1f}%")
        rows.append(Row(y=y, label=e.strategy, segments=[seg], value_x=LABEL_W + tps * scale + 6,
                        value_text=f"{tps:,.0f}", highlight=e.strategy == chosen))
    height = TOP + len(estimates) * ROW_H + AXIS_H
    return Chart(width=WIDTH, height=height, plot_x=LABEL_W, plot_w=PLOT_W, rows=rows,
                 ticks=_ticks(top, scale, ",g"), axis_y=TOP + len(estimates) * ROW_H,
                 axis_label="tokens/s per GPU")
