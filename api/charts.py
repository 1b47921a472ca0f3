"""Server-side SVG charts for the result page: geometry here, drawing in templates/web/_chart.html.

Horizontal bars, one row per plan: a label line (the plan on the left, its value on the right)
above its bar. Positions along the axis are fractions of the chart's width, drawn as
percentages of an SVG without a viewBox: the chart fills any width and its text stays 12 px
(no scaling to unreadable on a phone), and no text can overlap a bar or the capacity line,
which run only through the bars' band. Memory bars past the axis are cut with a break mark;
their value label gives the whole figure. No JavaScript, no chart library, nothing fetched.
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
CHOSEN_COLOR, OTHER_COLOR = "#D55E00", "#0072B2"
TOP = 24  # the capacity label's line
ROW_H = 38  # label line (16) + bar (14) + gap
LABEL_LINE = 12  # baseline of a row's label line, from the row's top
BAR_Y, BAR_H = 17, 14  # the bar's band, from the row's top (clear of the label line)
AXIS_H = 40  # tick labels and the axis title
AXIS_CUT = 2.0  # the memory axis stops near 2x capacity; longer bars are cut, with a break mark
HEADROOM = 1.08  # the axis runs 8% past the largest value it shows
BREAK_AT = 0.955  # where a cut bar shows its break mark
NOTE_CHARS = 44  # a row's note on the bar band (the whole text is its tooltip)


@dataclass(frozen=True, slots=True)
class Segment:
    x: float
    """Fraction of the width where it starts (0-1), as are all x and width below."""
    width: float
    color: str
    title: str


@dataclass(frozen=True, slots=True)
class Row:
    y: int
    label: str
    value_text: str
    segments: list[Segment]
    note: str | None = None
    """Text on the bar band instead of a bar (cannot run / does not fit)."""
    title: str = ""
    """The note's whole text."""
    highlight: bool = False
    broken: bool = False
    """The bar runs past the axis: drawn to the end with a break mark."""
    bad: bool = False
    """Does not fit: the value label is drawn in red."""


@dataclass(frozen=True, slots=True)
class Tick:
    x: float
    text: str
    anchor: str


@dataclass(frozen=True, slots=True)
class Marker:
    """The capacity line and its label at the top."""

    x: float
    text: str
    anchor: str


@dataclass(frozen=True, slots=True)
class Chart:
    height: int
    rows: list[Row]
    ticks: list[Tick]
    axis_y: int
    axis_label: str
    line: Marker | None = None
    reserve: tuple[float, float] | None = None
    """(x, width) of the band between usable memory and capacity, which no plan may use."""
    top: int = TOP
    bar_y: int = BAR_Y
    bar_h: int = BAR_H
    label_line: int = LABEL_LINE
    break_at: float = BREAK_AT


@dataclass(frozen=True, slots=True)
class Item:
    """One row to draw: a plan (or None when there is no estimate) and its label."""

    label: str
    estimate: Estimate | InfeasiblePlan | None
    highlight: bool = False
    missing: str | None = None
    """Why there is no estimate."""


def gib_text(value_bytes: float) -> str:
    """GiB as the table, the chart and the capacity label all print it."""
    return f"{value_bytes / GiB:,.1f}"


def _nice_step(span: float, target_ticks: int = 5) -> float:
    raw = span / target_ticks
    magnitude = 10 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)


def _anchor(x: float) -> str:
    return "start" if x < 0.06 else "end" if x > 0.94 else "middle"


def _ticks(axis_max: float) -> list[Tick]:
    step = _nice_step(axis_max)
    count = int(axis_max / step + 1e-9)
    fmt = ",.0f" if step >= 1 else "g"
    return [Tick(x=i * step / axis_max, text=format(i * step, fmt), anchor=_anchor(i * step / axis_max))
            for i in range(count + 1)]


def _short(text: str) -> str:
    return text if len(text) <= NOTE_CHARS else text[:NOTE_CHARS - 1].rstrip() + "…"


def _no_estimate(y: int, item: Item) -> Row:
    if isinstance(item.estimate, InfeasiblePlan):
        why = f"cannot run: {item.estimate.reason}"
        return Row(y=y, label=item.label, value_text="cannot run", segments=[], note=_short(why),
                   title=why, highlight=item.highlight)
    why = item.missing or "no estimate"
    return Row(y=y, label=item.label, value_text="no estimate", segments=[], note=_short(why),
               title=why, highlight=item.highlight)


def _misfit(e: Estimate) -> str:
    """What the value label adds when a plan does not fit: on the GPU, or on the host side
    (host RAM or NVMe for offload: the bar itself is under the line)."""
    if e.fits:
        return ""
    on_gpu = e.memory.per_gpu_bytes.total > e.memory.usable_bytes
    return " · does not fit" if on_gpu else " · host side does not fit"


def _height(rows: int) -> tuple[int, int]:
    axis_y = TOP + rows * ROW_H
    return axis_y, axis_y + AXIS_H


def memory_chart(items: list[Item]) -> Chart | None:
    """Per-GPU memory stacked by component for each item, against the GPU's capacity (the
    dashed line) and its usable part (the shaded reserve between them)."""
    with_memory = [i.estimate for i in items if isinstance(i.estimate, Estimate)]
    if not with_memory:
        return None
    capacity = with_memory[0].memory.capacity_bytes
    usable = with_memory[0].memory.usable_bytes
    largest = max(e.memory.per_gpu_bytes.total for e in with_memory)
    axis_max = max(capacity, min(largest, AXIS_CUT * capacity)) * HEADROOM
    rows = []
    for n, item in enumerate(items):
        y, e = TOP + n * ROW_H, item.estimate
        if not isinstance(e, Estimate):
            rows.append(_no_estimate(y, item))
            continue
        m, x, segments = e.memory.per_gpu_bytes, 0.0, []
        for key, label, color in COMPONENTS:
            part = getattr(m, key)
            width = min(part / axis_max, 1.0 - x)
            if width > 0:
                segments.append(Segment(x=x, width=width, color=color,
                                        title=f"{item.label}: {label} {gib_text(part)} GiB"))
                x += width
        rows.append(Row(y=y, label=item.label, segments=segments, highlight=item.highlight,
                        value_text=f"{gib_text(m.total)} GiB" + _misfit(e), broken=m.total > axis_max,
                        bad=not e.fits))
    axis_y, height = _height(len(items))
    line_x = capacity / axis_max
    return Chart(height=height, rows=rows, ticks=_ticks(axis_max / GiB), axis_y=axis_y,
                 axis_label="GiB per GPU",
                 line=Marker(x=line_x, text=f"capacity {gib_text(capacity)} GiB",
                             anchor="end" if line_x > 0.7 else "middle"),
                 reserve=(usable / axis_max, (capacity - usable) / axis_max))


def throughput_chart(items: list[Item]) -> Chart | None:
    """Predicted tokens/s/GPU of each item that fits (the highlighted one in orange)."""
    fitting = [i.estimate for i in items if isinstance(i.estimate, Estimate) and i.estimate.fits]
    if not fitting:
        return None
    axis_max = max(e.throughput.tokens_per_s_per_gpu for e in fitting) * HEADROOM
    rows = []
    for n, item in enumerate(items):
        y, e = TOP + n * ROW_H, item.estimate
        if not isinstance(e, Estimate):
            rows.append(_no_estimate(y, item))
            continue
        if not e.fits:
            why = f"needs {gib_text(e.memory.per_gpu_bytes.total)} of {gib_text(e.memory.capacity_bytes)} GiB"
            rows.append(Row(y=y, label=item.label, value_text="does not fit", segments=[], note=why,
                            title=why, highlight=item.highlight, bad=True))
            continue
        tps = e.throughput.tokens_per_s_per_gpu
        seg = Segment(x=0.0, width=tps / axis_max, color=CHOSEN_COLOR if item.highlight else OTHER_COLOR,
                      title=f"{item.label}: {tps:,.0f} tokens/s/GPU, MFU {100 * e.throughput.mfu:.1f}%")
        rows.append(Row(y=y, label=item.label, segments=[seg], highlight=item.highlight,
                        value_text=f"{tps:,.0f} tok/s · MFU {100 * e.throughput.mfu:.1f}%"))
    axis_y, height = _height(len(items))
    return Chart(height=height, rows=rows, ticks=_ticks(axis_max), axis_y=axis_y,
                 axis_label="tokens/s per GPU")
