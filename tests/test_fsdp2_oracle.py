"""FSDP2 at scale against an oracle: PyTorch's FSDPMemTracker, run on CPU under FakeTensorMode
with the fake process group (tests/real/fsdp2_oracle.py), at 8 and 64 ranks, for 7B-, 13B- and
70B-class Llama layer shapes cut to 2 and 4 decoder layers, sequence 4096, micro-batch 1, bf16.

The advisor's side is its FSDP (FULL_SHARD, FSDP2) estimate for the same shape, world and
workload, *less its priors-based overhead* (CUDA context, NCCL buffers, allocator fragmentation):
the tracker counts tensors only, so `total - overhead` is what it can confirm.

The tracker's peak, by category, maps onto the advisor's terms as
  params ~ Sharded Param; grads ~ Sharded Grad; optimizer ~ OptState;
  activations + logits ~ Activation + Temp (Temp: backward temporaries, here the loss's fp32
  gradients); buffers ~ Unsharded Param + All Gather + Unsharded Grad + Reduce Scatter.
Per-layer terms are the difference between the 4- and the 2-layer runs, halved: what one more
decoder layer adds, free of the embedding, head and loss.
"""

from __future__ import annotations

import json

import pytest

from advisor.core.model import preset
from tests.helpers import run
from tests.real.common import launch

pytestmark = pytest.mark.slow
SHAPES = ("llama-2-7b", "llama-2-13b", "llama-3-70b")  # 7B-, 13B-, 70B-class layer shapes
WORLDS = (8, 64)
LAYERS = (2, 4)
SEQ_LEN, MICRO_BATCH = 4096, 1
PEAK_TOLERANCE = 0.05
BUFFERS = ("Unsharded Param", "All Gather", "Unsharded Grad", "Reduce Scatter")
CASES = [(m, w) for m in SHAPES for w in WORLDS]


def _name(model: str, layers: int, world: int) -> str:
    return f"{model}-L{layers}-N{world}"


@pytest.fixture(scope="module")
def oracle(tmp_path_factory) -> dict[str, dict[str, int]]:
    folder = tmp_path_factory.mktemp("oracle")
    cases = [{"name": _name(m, n, w), "model": m, "layers": n, "world": w,
              "micro_batch": MICRO_BATCH, "seq_len": SEQ_LEN}
             for m in SHAPES for n in LAYERS for w in WORLDS]
    (folder / "cases.json").write_text(json.dumps(cases))
    launch("tests.real.fsdp2_oracle", folder / "cases.json", folder / "out.json", ranks=1)
    return json.loads((folder / "out.json").read_text())


def _predicted(model: str, layers: int, world: int):
    spec = preset(model).model_copy(update={"layers": layers})
    est = run("fsdp", f"{world}xH100", spec, seq_len=SEQ_LEN, micro_batch=MICRO_BATCH)
    return spec, est.memory.per_gpu_bytes


def _within(measured: float, predicted: float, tolerance: float, what: str) -> None:
    error = predicted / measured - 1
    assert abs(error) <= tolerance, (f"{what}: tracker {measured / 2**20:,.0f} MiB, advisor "
                                     f"{predicted / 2**20:,.0f} MiB ({error:+.1%})")


def _ids(cases):
    return [f"{m}-N{w}" for m, w in cases]


@pytest.mark.parametrize(("model", "world"), CASES, ids=_ids(CASES))
def test_sharded_params_and_optimizer_state(oracle, model, world):
    """fp32 shards 4P/N and AdamW moments 8P/N (FSDP2 pads dim 0 to a multiple of N)."""
    snap = oracle[_name(model, 4, world)]
    _, mem = _predicted(model, 4, world)
    _within(snap["Sharded Param"], mem.params, 0.02, "sharded params")
    _within(snap["OptState"], mem.optimizer, 0.02, "optimizer state")


@pytest.mark.parametrize(("model", "world"), CASES, ids=_ids(CASES))
def test_activations_per_layer(oracle, model, world):
    """What one more decoder layer keeps for backward (activations.layer_bytes)."""
    act = {n: oracle[_name(model, n, world)]["Activation"] for n in LAYERS}
    mem = {n: _predicted(model, n, world)[1] for n in LAYERS}
    _within((act[4] - act[2]) / 2, (mem[4].activations - mem[2].activations) / 2, 0.05,
            "activations per layer")


@pytest.mark.parametrize(("model", "world"), CASES, ids=_ids(CASES))
def test_peak_per_layer(oracle, model, world):
    """What one more layer adds to the peak: its activations + its share of sharded state
    (no sharded gradients at the backward-start peak: zero_grad() set them to None)."""
    peak = {n: oracle[_name(model, n, world)]["Total"] for n in LAYERS}
    mem = {n: _predicted(model, n, world)[1] for n in LAYERS}
    predicted = {n: m.total - m.overhead for n, m in mem.items()}
    _within((peak[4] - peak[2]) / 2, (predicted[4] - predicted[2]) / 2, PEAK_TOLERANCE,
            "peak per added layer")


@pytest.mark.parametrize(("model", "world"), CASES, ids=_ids(CASES))
def test_peak(oracle, model, world):
    """The per-rank peak, overhead priors excluded (the tracker does not see them)."""
    snap = oracle[_name(model, 4, world)]
    _, mem = _predicted(model, 4, world)
    _within(snap["Total"], mem.total - mem.overhead, PEAK_TOLERANCE, "per-rank peak")


@pytest.mark.parametrize(("model", "world"), CASES, ids=_ids(CASES))
def test_buffers_at_peak(oracle, model, world):
    snap = oracle[_name(model, 4, world)]
    _, mem = _predicted(model, 4, world)
    _within(sum(snap[k] for k in BUFFERS), mem.buffers, PEAK_TOLERANCE, "buffers at the peak")


@pytest.mark.parametrize(("model", "world"), CASES, ids=_ids(CASES))
def test_logits_at_peak(oracle, model, world):
    """The head's share of the peak: Activation + Temp less what the layers keep."""
    snap = {n: oracle[_name(model, n, world)] for n in LAYERS}
    layers_4 = 2 * (snap[4]["Activation"] - snap[2]["Activation"])  # 4 layers' worth
    head = snap[4]["Activation"] - layers_4 + snap[4]["Temp"]
    _, mem = _predicted(model, 4, world)
    _within(head, mem.logits, PEAK_TOLERANCE, "head and loss at the peak")
