"""FSDP2 per-rank memory of real transformers models, from FSDPMemTracker, without GPUs.

    python -m tests.real.hf_oracle CASES.json OUT.json            # fake: FakeTensorMode + fake PG
    python -m torch.distributed.run --standalone --nproc-per-node 2 \\
        -m tests.real.hf_oracle --real CASES.json OUT.json        # real tensors, gloo ranks
    python -m tests.real.hf_oracle --matrix families|checkpointing OUT.json  # tests/data/oracle

A case: {"name", "config" (config.json path, from the repository root), "layers", "world",
"micro_batch", "seq_len"; optional "act_ckpt" (none | full | every-2nd | hf), "attn" (sdpa |
eager), "sdpa_kernel" (cuda | cpu), "reshard_after_forward" (true), "units" (layers | accelerate),
"overrides" (config.json keys replaced first)}.

What runs: `AutoModelForCausalLM.from_config` in fp32 (sdpa; eager where the class has none:
gpt-oss), cut by tests/real/hf_counts.build_config, under FakeTensorMode (nothing allocated), in
train mode; fully_shard per decoder layer (the case's reshard_after_forward), then the root (its
default: it keeps its parameters gathered), MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=
bf16), over the fake process group of `world` ranks, device "cpu"; AdamW(foreach=False); two steps
of `model(input_ids=ids, labels=ids, use_cache=False).loss` (HF's shift + fp32 cross-entropy,
outputs dropped before backward), backward, step, zero_grad (to None). units "accelerate" adds
Accelerate 1.15's fsdp2_prepare_model units: the input embedding, and [final norm, lm_head] (+ the
embedding when tied) with reshard_after_forward=False. Activation checkpointing as Accelerate's
FSDP2 path (fsdp_utils.fsdp2_apply_ac): checkpoint_wrapper(layer, preserve_rng_state=False)
(non-reentrant) replaces each decoder layer BEFORE fully_shard, which shards the inner layer, then
the (parameter-less) wrapper; every-2nd wraps layers 0, 2, 4...; "hf" is instead
model.gradient_checkpointing_enable({"use_reentrant": False}).

Measured: the peak is reset after step 1 (reset_mod_stats keeps it; under FakeTensorMode AdamW's
first step has a transient of several times the moments that real runs lack): `peak` is the 2nd
step's peak by category, bytes; `step1_peak` the 1st step's total. `timeline`: a row per FSDP event
of step 2 (pre/post_forward, pre/post_backward per unit; recompute/recompute_end: a forward during
backward; optimizer step_start/step_end): TIMELINE_FIELDS, by_category in CATEGORIES order.
`peak_event`: the rows around the peak, the phase, ModTracker's innermost module (can be stale
under activation checkpointing).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker, _FSDPRefType
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.testing._internal.distributed.fake_pg import FakeStore
from transformers import masking_utils

from tests.real import common
from tests.real.hf_counts import build_config, build_model, decoder_layers

CATEGORIES = [t.value for t in _FSDPRefType]
TIMELINE_FIELDS = ["unit", "event", "peak_since_prev", "total", "by_category"]
CPU = torch.device("cpu")
_SDPA = torch.nn.functional.scaled_dot_product_attention


def _short(fqn: str) -> str:  # 'X.model.layers.3._checkpoint_wrapped_module.mlp' -> 'model.layers.3.mlp'
    if fqn in ("Global", "optimizer", "?"):
        return fqn
    return fqn.replace("._checkpoint_wrapped_module", "").split(".", 1)[1] if "." in fqn else "root"


class TimelineTracker(FSDPMemTracker):
    """FSDPMemTracker that also logs a row per FSDP hook and where the global peak was reached."""

    def __init__(self, mod: torch.nn.Module, optm: torch.optim.Optimizer) -> None:
        super().__init__(mod, optm)
        self.events: list[list[Any]] = []
        self.peak_event: dict[str, Any] | None = None
        self._since = 0

    def reset_peak(self) -> None:
        self.events, self.peak_event = [], None
        self._peak_mem_snap = self.get_tracker_snapshot()
        self._peak_mem = {dev: snap["Total"] for dev, snap in self._peak_mem_snap.items()}
        self._since = self._peak_mem.get(CPU, 0)

    def log(self, mod: torch.nn.Module | None, event: str) -> None:
        snap = self._curr_mem_snap.get(CPU, {})
        unit = _short("optimizer" if mod is None else self._mod_tracker.get_known_fqn(mod) or "?")
        by = [int(snap.get(t, 0)) for t in _FSDPRefType]
        self.events.append([unit, event, int(self._since), int(snap.get("Total", 0)), by])
        self._since = snap.get("Total", 0)

    def _update_peak_stats(self, peak_state: Any) -> None:
        before = self._peak_mem.get(CPU, 0)
        super()._update_peak_stats(peak_state)
        total = self._curr_mem_snap.get(CPU, {}).get("Total", 0)
        self._since = max(self._since, total)
        if self._peak_mem.get(CPU, 0) > before:
            inner = max(self._mod_tracker.parents, key=lambda p: p.count("."))
            phase = "optimizer" if self._in_opt else "backward" if self._mod_tracker.is_bw else "forward"
            last = self.events[-1][:2] if self.events else None
            self.peak_event = {"after_event": last, "event_index": len(self.events), "phase": phase,
                               "module": _short(inner)}

    def _wrap(self, inner: Any, mod: torch.nn.Module, event: str) -> Any:
        def hook(*args: Any, **kwargs: Any) -> Any:
            out = inner(*args, **kwargs)
            again = self._mod_tracker.is_bw and event.endswith("forward")
            self.log(mod, ("recompute" if event == "pre_forward" else "recompute_end") if again else event)
            return out
        return hook


HOOKS = {"_fsdp_state_pre_forward": "pre_forward", "_fsdp_state_post_forward": "post_forward",
         "_fsdp_param_group_pre_backward": "pre_backward", "_fsdp_param_group_post_backward": "post_backward"}
for _method, _event in HOOKS.items():  # each FSDP hook the tracker installs, wrapped to log a row
    setattr(TimelineTracker, _method, lambda self, mod, orig, _m=_method, _e=_event: self._wrap(
        getattr(FSDPMemTracker, _m)(self, mod, orig), mod, _e))


def _efficient_sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False,  # type: ignore[no-untyped-def]
                    scale=None, enable_gqa=False):
    """SDPA as CUDA dispatches it when q/k and v head dims differ (DeepSeek's MLA: 192 vs 128):
    flash needs equal dims, so the memory-efficient kernel runs (it saves out + fp32 logsumexp).
    The CPU has no such kernel and falls back to the math path, which keeps the S x S softmax."""
    if q.size(-1) != v.size(-1) and attn_mask is None and q.size(1) == k.size(1):
        return torch.ops.aten._scaled_dot_product_efficient_attention(
            q, k, v, None, True, dropout_p, is_causal, scale=scale)[0]
    return _SDPA(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                 enable_gqa=enable_gqa)


@contextmanager
def _fake_fixes(enabled: bool, sdpa_kernel: str) -> Iterator[None]:
    """What FakeTensorMode on a CPU would otherwise get wrong. (1) transformers cannot read the
    fake position_ids, so create_causal_mask assumes packed sequences and materialises a 4D bool
    mask (then SDPA repeats K/V, no is_causal path); a real run finds arange position_ids unpacked
    (None): restore that answer. (2) sdpa_kernel "cuda": _efficient_sdpa (no effect unless MLA)."""
    saved = masking_utils.find_packed_sequence_indices
    if enabled:
        masking_utils.find_packed_sequence_indices = lambda position_ids: None
        if sdpa_kernel == "cuda":
            torch.nn.functional.scaled_dot_product_attention = _efficient_sdpa
    try:
        yield
    finally:
        masking_utils.find_packed_sequence_indices = saved
        torch.nn.functional.scaled_dot_product_attention = _SDPA


def _static_rope(model: torch.nn.Module) -> None:
    """Longrope (Phi-3.5) and dynamic RoPE pick frequencies from max(position_ids), a data read
    FakeTensorMode refuses; renaming rope_type skips that update (the initial short-factor inv_freq
    stays: same shapes and memory, other values past original_max_position_embeddings)."""
    for mod in model.modules():
        kind = getattr(mod, "rope_type", None)
        if isinstance(kind, str) and (kind == "longrope" or "dynamic" in kind):
            mod.rope_type = f"{kind}-static"


def _checkpoint_layers(model: torch.nn.Module, mode: str) -> list[torch.nn.Module]:
    """Wrap decoder layers as Accelerate's fsdp2_apply_ac does; returns the FSDP units (inner
    layer, then its wrapper when wrapped), in the bottom-up order Accelerate shards them."""
    stack = decoder_layers(model)
    if mode == "hf":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    units: list[torch.nn.Module] = []
    for i, layer in enumerate(list(stack)):
        wrap = mode == "full" or (mode == "every-2nd" and i % 2 == 0)
        stack[i] = checkpoint_wrapper(layer, preserve_rng_state=False) if wrap else layer
        units += [layer, stack[i]] if wrap else [layer]
    return units


def _shard(model: torch.nn.Module, case: dict, mesh: Any) -> None:
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
    kw = {"mesh": mesh, "mp_policy": mp, "reshard_after_forward": case.get("reshard_after_forward", True)}
    for unit in _checkpoint_layers(model, case.get("act_ckpt", "none")):
        fully_shard(unit, **kw)
    if case.get("units", "layers") == "accelerate":
        emb, head = model.get_input_embeddings(), model.get_output_embeddings()
        if not (tied := head.weight is emb.weight):
            fully_shard(emb, **kw)
        norm = [m for m in model.get_decoder().children() if "Norm" in type(m).__name__][-1:]
        fully_shard([*norm, *([emb] if tied else []), head], **{**kw, "reshard_after_forward": False})
    fully_shard(model, mesh=mesh, mp_policy=mp)


def run_case(case: dict, real: bool = False) -> dict[str, Any]:
    """One case's result (see the module docstring). `real`: dist is already a gloo group."""
    raw = {**json.loads(Path(case["config"]).read_text()), **case.get("overrides", {})}
    cfg = build_config(raw, case["layers"])
    start = time.perf_counter()
    if not real:
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=case["world"])
    try:
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        fixes = _fake_fixes(not real, case.get("sdpa_kernel", "cuda"))
        with FakeTensorMode() if not real else nullcontext(), fixes:
            torch.manual_seed(dist.get_rank())
            model = build_model(cfg, case.get("attn", "sdpa"))
            model.train()
            if not real:
                _static_rope(model)
            layer_class = type(decoder_layers(model)[0]).__name__
            _shard(model, case, mesh)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
            ids = torch.randint(0, cfg.vocab_size, (case["micro_batch"], case["seq_len"]))
            tracker = TimelineTracker(model, opt)
            tracker.track_inputs((ids,))
            losses: list[float] = []
            with tracker:
                for step in range(2):
                    loss = model(input_ids=ids, labels=ids, use_cache=False).loss
                    loss.backward()
                    tracker.log(None, "step_start")
                    opt.step()
                    opt.zero_grad()
                    tracker.log(None, "step_end")
                    losses += [loss.item()] if real else []
                    del loss
                    if step == 0:
                        step1 = tracker.get_tracker_snapshot("peak")[CPU]["Total"]
                        tracker.reset_mod_stats()
                        tracker.reset_peak()
            peak = tracker.get_tracker_snapshot("peak")[CPU]
    finally:
        if not real:
            dist.destroy_process_group()
    event, rows = tracker.peak_event or {}, tracker.events
    event["before_event"] = (rows[event["event_index"]:] or [[None, None]])[0][:2]
    return {"peak": {str(getattr(k, "value", k)): int(v) for k, v in peak.items()},
            "step1_peak": int(step1), "peak_event": event,
            "attn_implementation": model.config._attn_implementation,
            "experts_implementation": getattr(model.config, "_experts_implementation", None)
            if hasattr(cfg, "num_experts_per_tok") else None,
            "decoder_layer_class": layer_class, "seconds": round(time.perf_counter() - start, 2),
            **({"losses": losses} if real else {}), "timeline": rows}


CONFIGS = "tests/data/hf_configs"
FAMILIES = ["llama-2-7b", "llama-3-8b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.2-1b", "mistral-7b-v0.1",
            "mistral-nemo-12b", "mixtral-8x7b", "qwen2-7b", "qwen2.5-7b", "qwen3-8b", "qwen3-30b-a3b",
            "gemma-2-9b", "gemma-3-12b", "gemma-3-1b", "phi-3-mini-4k", "phi-3.5-mini", "phi-4",
            "gpt-neox-20b", "pythia-1.4b", "olmo-2-7b", "deepseek-v2-lite", "deepseek-v3", "gpt-oss-20b",
            "falcon-7b"]  # not gpt2: CPU runs its dropout attention on SDPA's math path (CUDA: flash)
SHORT = ["mpt-7b"]  # sequence 2048 only: MptModel builds its ALiBi bias for max_seq_len 2048


def _depth(model: str) -> int:  # the published num_hidden_layers (MPT: n_layers)
    raw = json.loads(Path(f"{CONFIGS}/{model}.json").read_text())
    raw = raw.get("text_config", raw)
    return raw.get("num_hidden_layers", raw.get("n_layers"))


def matrix(kind: str) -> list[dict[str, Any]]:
    """The cases of tests/data/oracle/{families,checkpointing}.json."""
    def case(model: str, layers: int, world: int, mb: int, seq: int, **kw: Any) -> dict[str, Any]:
        tag = "".join(f"-{v}" if k != "reshard_after_forward" else "-noreshard" for k, v in kw.items())
        return {"name": f"{model}-L{layers}-N{world}-B{mb}-S{seq}{tag}", "config": f"{CONFIGS}/{model}.json",
                "layers": layers, "world": world, "micro_batch": mb, "seq_len": seq, **kw}
    if kind == "families":
        out = [case(m, n, w, 1, s) for m in FAMILIES for n in (2, 4) for w in (8, 64) for s in (2048, 8192)]
        out += [case(m, n, w, 1, 2048) for m in SHORT for n in (2, 4) for w in (8, 64)]
        out += [case("gemma-2-9b", n, 8, 1, s, attn="eager") for n in (2, 4) for s in (2048, 8192)]
        out += [case(m, _depth(m), 64, 1, 2048) for m in FAMILIES + SHORT]  # the published depth
        return out + [case(m, n, 8, 1, s, sdpa_kernel="cpu") for m in ("deepseek-v2-lite", "deepseek-v3")
                      for n in (2, 4) for s in (2048, 8192)]  # MLA with the CPU's math SDPA
    dense = ("llama-3.1-8b", "mistral-7b-v0.1", "qwen2-7b")
    out = [case(m, 4, w, b, s, act_ckpt=a) for m in dense for a in ("none", "full", "every-2nd")
           for b in (1, 4) for s in (2048, 8192) for w in (2, 8, 64)]
    out += [case(m, 4, 8, 1, s, **kw) for m in dense for s in (2048, 8192)
            for kw in ({"act_ckpt": "hf"}, {"reshard_after_forward": False}, {"units": "accelerate"},
                       {"act_ckpt": "full", "units": "accelerate"})]
    return out + [case(m, _depth(m), 8, 1, s, act_ckpt=a) for m in dense for s in (2048, 8192)
                  for a in ("none", "full", "every-2nd")]


def main(argv: list[str]) -> None:
    real = argv[0] == "--real"
    if argv[0] == "--matrix":  # --matrix families|checkpointing OUT.json
        cases, out = matrix(argv[1]), Path(argv[2])
    else:
        cases_path, out = map(Path, argv[1:] if real else argv)
        cases = json.loads(cases_path.read_text())
    if real:  # every rank runs every case; rank 0 writes {"ranks": [{name: result}, ...]}
        common.init()
        common.write_and_exit({c["name"]: run_case(c, real=True) for c in cases}, out)
    results: dict[str, Any] = {"_meta": {"categories": CATEGORIES, "timeline_fields": TIMELINE_FIELDS}}
    for case in cases:  # a failing case is recorded as {"case", "error"}; the rest still run
        try:
            results[case["name"]] = r = {"case": case, **run_case(case)}
            note = f"{r['peak']['Total'] / 2**20:,.0f} MiB, {r['seconds']} s"
        except Exception as e:  # noqa: BLE001
            results[case["name"]] = {"case": case, "error": f"{type(e).__name__}: {e}"[:600]}
            note = results[case["name"]]["error"][:200]
        print(f"{case['name']}: {note}", file=sys.stderr, flush=True)
        out.write_text(json.dumps(results, separators=(",", ":")))


if __name__ == "__main__":
    main(sys.argv[1:])
