"""The result page's charts and the micro-batch sweep behind two of them: geometry relations,
the break mark, one capacity figure everywhere, and the sweep agreeing with the plan."""

from __future__ import annotations

import time

import pytest

import advisor
from advisor.core.results import Estimate
from advisor.core.units import GiB
from advisor.search.space import MICRO_BATCH_LADDER
from api import charts, views
from api.schemas import RecommendRequest
from api.sweep import sweep


def _rec(**job):
    req = RecommendRequest.model_validate(job)
    rec = advisor.recommend(req)
    return req, rec, views.chosen_plan(rec)


@pytest.fixture(scope="module")
def a100():
    return _rec(params="13B", gpus="8xA100")


def _items(rec):
    return [charts.Item(e.strategy, e, e.strategy == rec.chosen) for e in rec.estimates]


def test_memory_bars_are_stacked_to_scale_and_cut_with_a_break_mark(a100):
    _, rec, _ = a100
    chart = charts.memory_chart(_items(rec))
    estimates = {e.strategy: e for e in rec.estimates if isinstance(e, Estimate)}
    capacity = next(iter(estimates.values())).memory.capacity_bytes
    largest = max(e.memory.per_gpu_bytes.total for e in estimates.values())
    axis_max = max(capacity, min(largest, charts.AXIS_CUT * capacity)) * charts.HEADROOM
    assert chart.line.x == pytest.approx(capacity / axis_max)
    broken = 0
    for row in chart.rows:
        e = estimates.get(row.label)
        if e is None:  # cannot run: a note, no bar
            assert row.note.startswith("cannot run") and not row.segments
            continue
        total = e.memory.per_gpu_bytes.total
        end = sum(s.width for s in row.segments)
        assert all(s.x >= 0 and s.x + s.width <= 1 + 1e-9 for s in row.segments)
        assert row.value_text.startswith(f"{total / GiB:,.1f} GiB")  # the whole figure, cut or not
        if total > axis_max:
            broken += 1
            assert row.broken and end == pytest.approx(1.0)
        else:
            assert not row.broken and end == pytest.approx(total / axis_max)
        assert row.bad == (not e.fits) and ("does not fit" in row.value_text) == (not e.fits)
        gpu_short = total > e.memory.usable_bytes
        assert ("host side" in row.value_text) == (not e.fits and not gpu_short)
    assert broken == 1  # ddp: 255 GiB on an 80 GiB axis stopping at 2x capacity


def test_cut_bars_of_different_sizes_read_differently():
    """221 GiB and 1536 GiB used to look the same; cut, they still differ in their labels."""
    _, rec, plan = _rec(params="70B", gpus="8xA100")
    chart = charts.memory_chart(_items(rec))
    cut = [r for r in chart.rows if r.broken]
    assert len(cut) >= 2 and len({r.value_text for r in cut}) == len(cut)
    # zero3-offload's 13.9 GiB fit on the GPU; its 1,760 GiB of host RAM per node do not
    offload = next(r for r in chart.rows if r.label == "zero3-offload")
    assert offload.value_text.endswith("host side does not fit") and not offload.broken


def test_the_capacity_reads_the_same_on_the_chart_in_the_table_and_in_the_text():
    _, rec, plan = _rec(params="7B", gpus="8xL40S")  # 44.99 GiB
    chart = charts.memory_chart(_items(rec))
    assert chart.line.text == "capacity 45.0 GiB"
    row = views.table_row(1, plan, rec.chosen)
    assert row.memory.endswith(" / 45.0")
    assert "of 45.0 GiB" in " ".join(rec.summary)


def test_labels_and_ticks_stay_inside_the_chart(a100):
    _, rec, _ = a100
    for chart in (charts.memory_chart(_items(rec)), charts.throughput_chart(_items(rec))):
        for tick in chart.ticks:
            assert 0 <= tick.x <= 1
            assert tick.anchor == ("start" if tick.x < 0.06 else "end" if tick.x > 0.94 else "middle")
        assert all(len(r.note or "") <= charts.NOTE_CHARS for r in chart.rows)
        assert chart.height == chart.axis_y + charts.AXIS_H
    line = charts.memory_chart(_items(rec)).line
    assert line.anchor == ("end" if line.x > 0.7 else "middle")


def test_throughput_bars_scale_with_tokens_per_second(a100):
    _, rec, _ = a100
    chart = charts.throughput_chart(_items(rec))
    fitting = {e.strategy: e for e in rec.estimates if isinstance(e, Estimate) and e.fits}
    widths = {r.label: r.segments[0].width for r in chart.rows if r.segments}
    assert set(widths) == set(fitting)
    a, b = "fsdp", "zero2"
    ratio = fitting[a].throughput.tokens_per_s_per_gpu / fitting[b].throughput.tokens_per_s_per_gpu
    assert widths[a] / widths[b] == pytest.approx(ratio)
    assert max(widths.values()) == pytest.approx(1 / charts.HEADROOM)


def test_the_sweep_reproduces_the_plan_at_its_micro_batch(a100):
    req, rec, plan = a100
    points = sweep(req, plan)
    assert [p.micro_batch for p in points] == list(MICRO_BATCH_LADDER)
    mine = next(p.estimate for p in points if p.micro_batch == plan.workload.micro_batch)
    assert mine.throughput.tokens_per_s_per_gpu == plan.throughput.tokens_per_s_per_gpu
    assert mine.memory.per_gpu_bytes.total == plan.memory.per_gpu_bytes.total
    memory = [p.estimate.memory.per_gpu_bytes.total for p in points]
    assert memory == sorted(memory)  # activations grow with the micro-batch
    for p in points:
        w = p.estimate.workload
        assert (w.act_ckpt, w.precision, w.grad_accum) == (plan.workload.act_ckpt, plan.workload.precision, 1)


def test_with_a_global_batch_the_sweep_keeps_it_and_says_where_it_does_not_divide():
    req, rec, plan = _rec(params="7B", gpus="2x8xH100", seq_len=8192, global_batch_tokens="4M")
    points = sweep(req, plan)
    tokens = {p.micro_batch * p.grad_accum * 8192 * p.estimate.layout.dp for p in points if p.estimate}
    assert tokens == {4 * 2**20}
    assert [p.micro_batch for p in points if p.estimate is None] == [64]  # 64 x 8192 x 16 > 4M
    assert "not a multiple" in next(p.error for p in points if p.estimate is None)
    items = views.sweep_items(points, plan)
    assert items[-1].label == "64" and charts.memory_chart(items).rows[-1].value_text == "no estimate"


def test_the_sweep_is_fast(a100):
    req, _, plan = a100
    sweep(req, plan)
    start = time.perf_counter()
    sweep(req, plan)
    assert time.perf_counter() - start < 0.5  # 7 estimates of ~1 ms each, with a wide margin
