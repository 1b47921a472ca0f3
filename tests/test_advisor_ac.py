"""templates/bundle/advisor_ac.py, the code every plan folder ships for what no config file can
set (selective / every-k-th checkpointing, the fused loss), against the real thing on CPU:

- the fused loss gives HF's own loss and gradients (labels shifted, -100 ignored, mean or
  sum / num_items_in_batch; tied embeddings; Gemma-2's final logit soft-capping);
- the bytes a decoder layer keeps under each checkpointing mode, measured by torch's MemTracker
  (two depths differenced, so embeddings and the shared rotary tables cancel), equal the memory
  model's formula for that mode (advisor/core/activations.py) in pure bf16 and under autocast;
- every-k-th checkpointing keeps what k-1 plain layers and one checkpointed layer keep;
- the fused loss's own peak (the head and loss from hidden states to gradients) stays within the
  model's figure, and far under HF's [tokens, vocab] fp32 path.
"""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from torch.distributed._tools.mem_tracker import MemTracker  # noqa: E402

from advisor.core import activations  # noqa: E402
from advisor.core.hf_config import from_hf_config  # noqa: E402
from advisor.core.workload import Workload  # noqa: E402

HELPER = Path(__file__).resolve().parents[1] / "templates" / "bundle" / "advisor_ac.py"
SEQ, BATCH = 256, 2
TINY = {"hidden_size": 128, "intermediate_size": 352, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 2048, "max_position_embeddings": 1024}


def load_helper() -> ModuleType:
    spec = importlib.util.spec_from_file_location("advisor_ac", HELPER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ac = load_helper()


def build(model_type: str, layers: int, **extra: object) -> torch.nn.Module:
    cfg = transformers.AutoConfig.for_model(model_type, **{**TINY, **extra},
                                            num_hidden_layers=layers, attn_implementation="sdpa")
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg)


@pytest.mark.parametrize("model_type, extra", [
    ("llama", {}), ("llama", {"tie_word_embeddings": True}),
    ("gemma2", {"head_dim": 32, "final_logit_softcapping": 30.0}), ("qwen3", {"head_dim": 32})])
@pytest.mark.parametrize("num_items", [None, 300])
def test_fused_loss_equals_hf_loss_and_gradients(model_type: str, extra: dict, num_items: int | None) -> None:
    ref = build(model_type, 2, **extra)
    fused = ac.apply(copy.deepcopy(ref), fused_loss=True)
    ids = torch.randint(0, TINY["vocab_size"], (BATCH, 97))
    labels = ids.clone()
    labels[0, :13] = -100
    kw = {} if num_items is None else {"num_items_in_batch": num_items}
    want = ref(input_ids=ids, labels=labels, **kw).loss
    got = fused(input_ids=ids, labels=labels, **kw)
    assert got.logits is None
    torch.testing.assert_close(got.loss, want, rtol=1e-5, atol=1e-5)
    want.backward()
    got.loss.backward()
    names = [n for n, _ in ref.named_parameters()]
    assert names == [n for n, _ in fused.named_parameters()]  # state dict names unchanged
    for (name, p), q in zip(ref.named_parameters(), fused.parameters(), strict=True):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6, msg=name)
    # without labels the head still gives logits (evaluation, generation)
    torch.testing.assert_close(fused(input_ids=ids).logits, ref(input_ids=ids).logits)


def test_fused_loss_chunks_the_vocabulary() -> None:
    assert ac.vocab_chunk(4096, 128256) == ac.LOSS_CHUNK_ELEMENTS // 4096 // 128 * 128
    assert ac.vocab_chunk(8, 1000) == 1000
    assert ac.vocab_chunk(10**9, 50000) == 128
    assert activations.LOSS_CHUNK_ELEMENTS == ac.LOSS_CHUNK_ELEMENTS  # one figure, both sides


def test_apply_refuses_what_it_does_not_do() -> None:
    model = build("llama", 2)
    with pytest.raises(ValueError, match="act_ckpt"):
        ac.apply(model, act_ckpt="offload")
    with pytest.raises(ValueError, match="every"):
        ac.apply(model, act_ckpt="full", every=0)
    with pytest.raises(ValueError, match="GradientCheckpointingLayer"):
        ac.apply(torch.nn.Linear(4, 4), act_ckpt="full")


def forward_bytes(model: torch.nn.Module, autocast: bool) -> int:
    """Activation bytes alive after the forward (MemTracker's ACT), the loss not yet taken."""
    model.train()
    ids = torch.randint(0, TINY["vocab_size"], (BATCH, SEQ))
    tracker = MemTracker()
    tracker.track_external(model)
    with tracker, torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        hidden = model.model(input_ids=ids, use_cache=False).last_hidden_state
        snap = tracker.get_tracker_snapshot("current")
    hidden.float().sum().backward()  # the graph is sound under each mode
    (device,) = snap
    return next(v for k, v in snap[device].items() if str(k).endswith("ACT"))


def per_layer(model_type: str, autocast: bool, act_ckpt: str, every: int = 1) -> float:
    """Bytes one decoder layer keeps: the forward's activations at 6 layers less those at 2."""
    kept = []
    for layers in (2, 6):
        model = build(model_type, layers, **({"head_dim": 32} if model_type == "qwen3" else {}))
        if not autocast:
            model = model.to(torch.bfloat16)
        kept.append(forward_bytes(ac.apply(model, act_ckpt=act_ckpt, every=every), autocast))
    layer = (kept[1] - kept[0]) / 4
    if autocast:  # autocast's cached bf16 copy of each linear weight is a buffer, not activations
        first = next(m for m in model.modules() if isinstance(m, transformers.modeling_layers
                                                                 .GradientCheckpointingLayer))
        layer -= sum(2 * m.weight.numel() for m in first.modules() if isinstance(m, torch.nn.Linear))
    return layer


def predicted(model_type: str, autocast: bool, act_ckpt: str) -> float:
    cfg = transformers.AutoConfig.for_model(model_type, **TINY, num_hidden_layers=2,
                                            **({"head_dim": 32} if model_type == "qwen3" else {}))
    spec = from_hf_config(cfg.to_dict())
    w = Workload(seq_len=SEQ, micro_batch=BATCH, act_ckpt=act_ckpt,  # type: ignore[arg-type]
                 master_weights=autocast)
    residual = 4 if autocast else 2
    if act_ckpt == "none":
        return activations.layer_bytes(spec, w, residual)
    if act_ckpt == "full":
        return activations.checkpoint_input_bytes(spec, w, residual)
    return activations.selective_layer_bytes(spec, w, residual)


@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["llama", "qwen3"])
@pytest.mark.parametrize("autocast", [False, True], ids=["pure-bf16", "autocast"])
@pytest.mark.parametrize("act_ckpt", ["none", "selective", "full"])
def test_layer_bytes_per_mode_equal_the_model(model_type: str, autocast: bool, act_ckpt: str) -> None:
    measured = per_layer(model_type, autocast, act_ckpt)
    assert measured == pytest.approx(predicted(model_type, autocast, act_ckpt), rel=0.02)


@pytest.mark.slow
def test_every_second_layer() -> None:
    """Layers 0, 2, 4... checkpointed: the mean layer keeps half a plain and half a checkpointed one
    (6 layers less 2: layers 2..5, two of each)."""
    measured = per_layer("llama", False, "selective", every=2)
    want = (predicted("llama", False, "selective") + predicted("llama", False, "none")) / 2
    assert measured == pytest.approx(want, rel=0.02)


@pytest.mark.slow
@pytest.mark.parametrize("fused", [False, True])
def test_fused_loss_peak(fused: bool) -> None:
    """Peak bytes from the final hidden states through the loss and its backward to the head's
    gradient (parameters and the hidden input excluded), against activations.logits_bytes."""
    model = build("llama", 1).to(torch.bfloat16)
    if fused:
        ac.apply(model, fused_loss=True)
    hidden = torch.randn(BATCH, SEQ, TINY["hidden_size"], dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, TINY["vocab_size"], (BATCH, SEQ))
    tracker = MemTracker()
    tracker.track_external(model, hidden)
    with tracker:
        if fused:
            loss = model.lm_head(hidden, labels=labels)
        else:
            loss = model.loss_function(model.lm_head(hidden), labels, TINY["vocab_size"])
        loss.backward()
        peak = tracker.get_tracker_snapshot("peak")
    (device,) = peak
    held = sum(v for k, v in peak[device].items() if not str(k).endswith(("PARAM", "Total", "BUFFER")))
    cfg = transformers.AutoConfig.for_model("llama", **TINY, num_hidden_layers=1)
    w = Workload(seq_len=SEQ, micro_batch=BATCH, fused_loss=fused, master_weights=False)
    spec = from_hf_config(cfg.to_dict())
    model_bytes = activations.logits_bytes(spec, w, 2) - activations.final_norm_bytes(spec, w, 2)
    head_grad = TINY["vocab_size"] * TINY["hidden_size"] * 2  # the grads term, not the loss's
    # the chunked loss as the model counts it; HF's 12 B per logit is its start-of-backward
    # figure, which the small tensors of this tiny head undercut by 3%
    assert held - head_grad == pytest.approx(model_bytes, rel=0.03 if fused else 0.05)
