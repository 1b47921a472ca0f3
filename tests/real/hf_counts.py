"""Exact parameter counts from transformers' own model classes, built on the meta device.

    python -m tests.real.hf_counts tests/data/hf_configs/*.json        # a table
    python -m tests.real.hf_counts --json tests/data/hf_configs/*.json # one JSON object

`counts(config)` builds `AutoModelForCausalLM.from_config(cfg, dtype=float32)` under
`torch.device("meta")` (no memory, well under a second even for DeepSeek-V3's 671B: transformers 5
fuses each layer's routed experts into two or four 3D parameters) and returns:

  total          sum of numel over model.parameters() (tied weights counted once)
  active         parameters one token uses: total less, per MoE layer, (n_routed - top_k) routed
                 experts' worth (shared experts and routers stay in)
  embedding      the input embedding's numel; `lm_head` the output head's (0 when tied)
  per_layer      numel of each model.model.layers[i]; `decoder_layer_class` the class of layer 0
  moe            per MoE layer's routed experts: layers, experts, top_k, params_per_expert (or None)
  attn_implementation, seconds (the build-and-count time)

The routed experts are found from the module structure: a submodule named `experts` whose
parameters are fused 3D tensors (leading dim = number of experts; biases 2D, same leading dim),
or an nn.ModuleList of per-expert modules (older layouts). top_k is `num_experts_per_tok`.

Config handling (`build_config`, shared with tests/real/hf_oracle.py):
  - `quantization_config` is dropped (DeepSeek-V3's fp8, gpt-oss' mxfp4 describe the published
    checkpoint, not the training model; counts are unaffected).
  - a multimodal Gemma-3 config (model_type gemma3, nested `text_config`) is reduced to its text
    model: Gemma3ForCausalLM on the Gemma3TextConfig (the vision tower and projector are not in
    `total`; `multimodal_total` gives the Gemma3ForConditionalGeneration count for reference).
  - `layers=L` below num_hidden_layers cuts the stack: num_hidden_layers=L, `layer_types` cut to
    its first L entries, `mlp_only_layers` kept below L, and DeepSeek's `first_k_dense_replace`
    set to min(k, 1): layer 0 stays dense, every later one is MoE (L=4 minus L=2: two MoE layers).
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig
from transformers.utils import logging as hf_logging

MULTIMODAL_TEXT_ONLY = {"gemma3": "gemma3_text"}
"""model_type whose CausalLM training target here is the nested text_config alone."""


def _cut(d: dict[str, Any], layers: int) -> dict[str, Any]:
    if layers >= d.get("num_hidden_layers", layers + 1):
        return d  # full depth: the published layout
    d = {**d, "num_hidden_layers": layers}
    if isinstance(d.get("layer_types"), list):
        d["layer_types"] = d["layer_types"][:layers]
    if isinstance(d.get("mlp_only_layers"), list):
        d["mlp_only_layers"] = [i for i in d["mlp_only_layers"] if i < layers]
    if "first_k_dense_replace" in d:
        d["first_k_dense_replace"] = min(d["first_k_dense_replace"], 1)
    return d


def build_config(raw: dict[str, Any], layers: int | None = None) -> PretrainedConfig:
    """The training config for a published config.json dict (see the module docstring)."""
    d = {k: v for k, v in raw.items() if k != "quantization_config"}
    if d.get("model_type") in MULTIMODAL_TEXT_ONLY and "text_config" in d:
        text = {"model_type": MULTIMODAL_TEXT_ONLY[d["model_type"]], **d["text_config"]}
        text.setdefault("torch_dtype", d.get("torch_dtype"))
        d = text
    if layers is not None:
        d = _cut(d, layers)
    hf_logging.set_verbosity_error()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoConfig.for_model(**d)


def build_model(cfg: PretrainedConfig, attn: str = "sdpa") -> nn.Module:
    """AutoModelForCausalLM.from_config in fp32 (the dtype FSDP2 mixed precision shards), with
    `attn` attention, or eager where the class rejects it (gpt-oss has no sdpa)."""
    try:
        return AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation=attn)
    except ValueError:
        return AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="eager")


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The decoder stack: model.model.layers, GPT-NeoX's gpt_neox.layers, GPT-2/Falcon's
    transformer.h, MPT's transformer.blocks (the decoder's ModuleList of num_hidden_layers)."""
    decoder = model.get_decoder()
    for name in ("layers", "h", "blocks"):
        if isinstance(getattr(decoder, name, None), nn.ModuleList):
            return getattr(decoder, name)
    raise ValueError(f"no decoder layer list in {type(decoder).__name__}")


def routed_experts(layer: nn.Module) -> tuple[int, int] | None:
    """(number of routed experts, params per expert) of a decoder layer, None if dense."""
    for name, mod in layer.named_modules():
        if name.split(".")[-1] != "experts" or "shared" in name:
            continue
        if isinstance(mod, nn.ModuleList):
            return len(mod), sum(p.numel() for p in mod[0].parameters())
        params = list(mod.parameters(recurse=False))
        n = {p.shape[0] for p in params}
        if len(n) == 1 and all(p.dim() >= 2 for p in params):
            e = n.pop()
            return e, sum(p.numel() // e for p in params)
        raise ValueError(f"unrecognised experts module {name}: {[tuple(p.shape) for p in params]}")
    return None


def _numel(mod: nn.Module | None) -> int:
    return 0 if mod is None else sum(p.numel() for p in mod.parameters())


def counts(raw: dict[str, Any], layers: int | None = None) -> dict[str, Any]:
    """The exact counts of the model a config.json describes (see the module docstring)."""
    start = time.perf_counter()
    cfg = build_config(raw, layers)
    with torch.device("meta"):
        model = build_model(cfg)
    stack = decoder_layers(model)
    emb, head = model.get_input_embeddings(), model.get_output_embeddings()
    tied = head is not None and head.weight is emb.weight
    total = sum(p.numel() for p in model.parameters())
    moe = [routed_experts(layer) for layer in stack]
    top_k = getattr(cfg, "num_experts_per_tok", None)
    unused = sum((e - top_k) * per for e, per in filter(None, moe))
    moe_layers = [m for m in moe if m]
    out = {
        "total": total,
        "active": total - unused,
        "embedding": emb.weight.numel(),
        "lm_head": 0 if tied else _numel(head),
        "tied": tied,
        "layers": len(stack),
        "per_layer": [_numel(layer) for layer in stack],
        "decoder_layer_class": type(stack[0]).__name__,
        "model_class": type(model).__name__,
        "attn_implementation": model.config._attn_implementation,
        "moe": None if not moe_layers else {
            "layers": len(moe_layers), "experts": moe_layers[0][0], "top_k": top_k,
            "params_per_expert": moe_layers[0][1],
            "dense_layers": [i for i, m in enumerate(moe) if not m]},
    }
    if raw.get("model_type") in MULTIMODAL_TEXT_ONLY and "text_config" in raw and layers is None:
        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            full = AutoModelForCausalLM.from_config(
                AutoConfig.for_model(**{k: v for k, v in raw.items() if k != "quantization_config"}))
        out["multimodal_total"] = sum(p.numel() for p in full.parameters())
    out["seconds"] = round(time.perf_counter() - start, 3)
    return out


def main(argv: list[str]) -> None:
    as_json = "--json" in argv
    results = {Path(p).stem: counts(json.loads(Path(p).read_text())) for p in argv if p != "--json"}
    if as_json:
        print(json.dumps(results, indent=1))
        return
    print(f"{'config':18} {'total':>16} {'active':>16} {'embedding':>13} {'lm_head':>13} {'L':>3} "
          f"{'layer[0]':>12} {'layer[-1]':>12}  {'class':26} {'attn':5} {'s':>5}")
    for name, c in results.items():
        print(f"{name:18} {c['total']:16,} {c['active']:16,} {c['embedding']:13,} {c['lm_head']:13,} "
              f"{c['layers']:3} {c['per_layer'][0]:12,} {c['per_layer'][-1]:12,}  "
              f"{c['decoder_layer_class']:26} {c['attn_implementation']:5} {c['seconds']:5.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
