"""Dense Llama-style families: RoPE, RMSNorm, a gated MLP, and what each changes.

Defaults are those of the transformers config class of each `model_type` (LlamaConfig,
MistralConfig, Qwen2Config, Qwen3Config, GraniteConfig, Olmo2Config, Phi3Config, Gemma2Config,
Gemma3TextConfig), so a config.json that omits a key means what it means to transformers.
"""

from __future__ import annotations

from typing import Any

from advisor.core.families.common import Keys, sliding

REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
REQUIRED_GEMMA3 = REQUIRED[:4]  # Gemma 3's text_config leaves vocab_size at the class default


def _core(k: Keys, d: dict[str, Any]) -> dict[str, Any]:
    """Shape keys every Llama-style config has, with the class defaults `d`."""
    heads = k.int("num_attention_heads", default=d.get("heads", 32))
    hidden = k.int("hidden_size", default=d.get("hidden", 4096))
    return {
        "layers": k.int("num_hidden_layers", default=d.get("layers", 32)),
        "hidden": hidden,
        "heads": heads,
        "kv_heads": k.int("num_key_value_heads", default=d.get("kv_heads", heads)),
        "head_dim": k.int("head_dim", default=d.get("head_dim", 0), low=0) or 0,
        "ffn": k.int("intermediate_size", default=d.get("ffn", 11008)),
        "vocab": k.int("vocab_size", default=d.get("vocab", 32000)),
        "tied_embeddings": k.bool("tie_word_embeddings", d.get("tied", False)),
        "max_position_embeddings": k.int("max_position_embeddings", default=d.get("max_positions", 2048)),
    }


def llama(k: Keys) -> dict[str, Any]:
    """LlamaConfig (Llama 2, 3, 3.1-3.3): attention_bias covers q, k, v and o."""
    bias = k.bool("attention_bias", False)
    return {**_core(k, {}), "qkv_bias": bias, "out_bias": bias, "mlp_bias": k.bool("mlp_bias", False),
            "decoder_layer_class": "LlamaDecoderLayer"}


def granite(k: Keys) -> dict[str, Any]:
    """GraniteConfig: a Llama with scaling multipliers (no parameters)."""
    return {**llama(k), "decoder_layer_class": "GraniteDecoderLayer"}


def mistral(k: Keys) -> dict[str, Any]:
    """MistralConfig (Mistral 7B v0.1-v0.3, Mistral-Nemo): every layer uses `sliding_window`
    when set (v0.1: 4096; the class default is 4096, v0.3 and Nemo set null)."""
    core = _core(k, {"kv_heads": 8, "ffn": 14336, "max_positions": 131072})
    window = k.int("sliding_window", default=4096) if "sliding_window" not in k.config \
        else k.int("sliding_window", default=None)
    kinds = ["sliding_attention" if window else "full_attention"] * core["layers"]
    return {**core, **sliding(kinds, window), "decoder_layer_class": "MistralDecoderLayer"}


def _qwen_sliding(k: Keys, layers: int) -> dict[str, Any]:
    """Qwen2/3: layers from `max_window_layers` on use the window, if use_sliding_window."""
    use = k.bool("use_sliding_window", False)
    start = k.int("max_window_layers", default=28, low=0)
    window = k.int("sliding_window", default=None, low=0) if use else None
    kinds = k.layer_types(layers, lambda i: "sliding_attention" if use and window and i >= start
                          else "full_attention")
    return sliding(kinds, window)


def qwen2(k: Keys) -> dict[str, Any]:
    """Qwen2Config (Qwen2, Qwen2.5): biases on q, k and v only, always."""
    core = _core(k, {"ffn": 22016, "vocab": 151936, "max_positions": 32768})
    return {**core, **_qwen_sliding(k, core["layers"]), "qkv_bias": True,
            "decoder_layer_class": "Qwen2DecoderLayer"}


def qwen3(k: Keys) -> dict[str, Any]:
    """Qwen3Config: per-head RMSNorm on q and k, head_dim 128, attention_bias on q, k, v, o."""
    core = _core(k, {"ffn": 22016, "vocab": 151936, "max_positions": 32768, "head_dim": 128})
    bias = k.bool("attention_bias", False)
    return {**core, **_qwen_sliding(k, core["layers"]), "qk_norm": "head", "qkv_bias": bias,
            "out_bias": bias, "decoder_layer_class": "Qwen3DecoderLayer"}


def olmo2(k: Keys) -> dict[str, Any]:
    """Olmo2Config: norms after attention and MLP (no pre-norm), RMSNorm over the whole q and
    k projections."""
    core = _core(k, {"vocab": 50304})
    bias = k.bool("attention_bias", False)
    return {**core, "norm_position": "post", "qk_norm": "full", "qkv_bias": bias, "out_bias": bias,
            "decoder_layer_class": "Olmo2DecoderLayer"}


def phi3(k: Keys) -> dict[str, Any]:
    """Phi3Config (Phi-3, 3.5, 4): fused qkv_proj and gate_up_proj; every layer uses
    `sliding_window` when set (Phi-3-mini-4k: 2047)."""
    core = _core(k, {"hidden": 3072, "ffn": 8192, "vocab": 32064, "max_positions": 4096})
    window = k.int("sliding_window", default=None)
    kinds = ["sliding_attention" if window else "full_attention"] * core["layers"]
    return {**core, **sliding(kinds, window), "fused_qkv": True, "fused_gate_up": True,
            "decoder_layer_class": "Phi3DecoderLayer"}


def _gemma(k: Keys, d: dict[str, Any], pattern: int) -> dict[str, Any]:
    core = _core(k, {"hidden": 2304, "ffn": 9216, "layers": 26, "heads": 8, "kv_heads": 4,
                     "head_dim": 256, "tied": True, **d})
    window = k.int("sliding_window", default=4096)
    kinds = k.layer_types(core["layers"], lambda i: "sliding_attention" if (i + 1) % pattern
                          else "full_attention")
    bias = k.bool("attention_bias", False)
    return {**core, **sliding(kinds, window), "norms_per_layer": 4, "norm_position": "sandwich",
            "qkv_bias": bias, "out_bias": bias}


def gemma2(k: Keys) -> dict[str, Any]:
    """Gemma2Config: 4 norms per layer, every other layer local (sliding_window 4096),
    attention and final logit soft-capping, tied embeddings."""
    out = _gemma(k, {"vocab": 256000, "max_positions": 8192}, pattern=2)
    return {**out, "attn_softcap": k.number("attn_logit_softcapping", 50.0),
            "logit_softcap": k.number("final_logit_softcapping", 30.0),
            "decoder_layer_class": "Gemma2DecoderLayer"}


def gemma3_text(k: Keys) -> dict[str, Any]:
    """Gemma3TextConfig (the text model of Gemma 3): Gemma-2's layer with per-head q/k norms,
    five local layers to one global (sliding_window_pattern 6), no soft-capping by default."""
    out = _gemma(k, {"vocab": 262208, "max_positions": 131072}, pattern=6)
    return {**out, "qk_norm": "head", "attn_softcap": k.number("attn_logit_softcapping", None),
            "logit_softcap": k.number("final_logit_softcapping", None),
            "decoder_layer_class": "Gemma3DecoderLayer"}
