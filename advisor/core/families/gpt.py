"""GPT-style families: LayerNorm, a plain (non-gated) MLP, biases. Defaults of GPT2Config,
GPTNeoXConfig, FalconConfig and MptConfig."""

from __future__ import annotations

from typing import Any

from advisor.core.families.common import Keys

REQUIRED_GPT2 = ("n_embd", "n_layer", "n_head")
REQUIRED_NEOX = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
REQUIRED_FALCON = ("hidden_size", "num_hidden_layers", "num_attention_heads")
REQUIRED_MPT = ("d_model", "n_layers", "n_heads")


def gpt2(k: Keys) -> dict[str, Any]:
    """GPT2Config: biases everywhere, LayerNorm with bias, learned positions, tied by default."""
    hidden = k.int("n_embd", "hidden_size", default=768)
    heads = k.int("n_head", "num_attention_heads", default=12)
    return {
        "layers": k.int("n_layer", "num_hidden_layers", default=12), "hidden": hidden, "heads": heads,
        "kv_heads": heads, "ffn": k.int("n_inner", default=4 * hidden),
        "vocab": k.int("vocab_size", default=50257), "gated_mlp": False,
        "tied_embeddings": k.bool("tie_word_embeddings", True),
        "norm": "layernorm", "norm_bias": True, "qkv_bias": True, "out_bias": True, "mlp_bias": True,
        "fused_qkv": True, "position_embedding": "learned",
        "max_position_embeddings": k.int("n_positions", default=1024),
        "decoder_layer_class": "GPT2Block",
    }


def gpt_neox(k: Keys) -> dict[str, Any]:
    """GPTNeoXConfig (GPT-NeoX-20B, Pythia): a fused query_key_value projection, biases on every
    linear (attention_bias for attention), two LayerNorms per layer, parallel residual by
    default, rotary on `rotary_pct` of each head (no parameters)."""
    bias = k.bool("attention_bias", True)
    heads = k.int("num_attention_heads", default=64)
    return {
        "layers": k.int("num_hidden_layers", default=44), "hidden": k.int("hidden_size", default=6144),
        "heads": heads, "kv_heads": heads, "ffn": k.int("intermediate_size", default=24576),
        "vocab": k.int("vocab_size", default=50432), "gated_mlp": False,
        "tied_embeddings": k.bool("tie_word_embeddings", False),
        "norm": "layernorm", "norm_bias": True, "norms_per_layer": 2,
        "parallel_block": k.bool("use_parallel_residual", True),
        "qkv_bias": bias, "out_bias": bias, "mlp_bias": True, "fused_qkv": True,
        "max_position_embeddings": k.int("max_position_embeddings", default=2048),
        "decoder_layer_class": "GPTNeoXLayer",
    }


def falcon(k: Keys) -> dict[str, Any]:
    """FalconConfig: multi-query (7B) or grouped KV (`new_decoder_architecture`, 40B/180B);
    `parallel_attn` shares one LayerNorm unless the new architecture gives attention and MLP a
    norm each; `bias` covers all linears."""
    hidden = k.int("hidden_size", default=4544)
    heads = k.int("num_attention_heads", "n_head", default=71)
    new_arch = k.bool("new_decoder_architecture", False)
    if new_arch:
        kv_heads = k.int("num_kv_heads", "n_head_kv", default=heads)
    else:
        kv_heads = 1 if k.bool("multi_query", True) else heads
    norms = k.int("num_ln_in_parallel_attn", default=2 if new_arch else 1)
    parallel = k.bool("parallel_attn", True)
    bias = k.bool("bias", False)
    return {
        "layers": k.int("num_hidden_layers", "n_layer", default=32), "hidden": hidden, "heads": heads,
        "kv_heads": kv_heads, "ffn": k.int("ffn_hidden_size", default=4 * hidden),
        "vocab": k.int("vocab_size", default=65024), "gated_mlp": False,
        "tied_embeddings": k.bool("tie_word_embeddings", True),
        "norm": "layernorm", "norm_bias": True, "parallel_block": parallel,
        "norms_per_layer": norms if parallel else 2,
        "qkv_bias": bias, "out_bias": bias, "mlp_bias": bias, "fused_qkv": True,
        "position_embedding": "alibi" if k.bool("alibi", False) else "rope",
        "max_position_embeddings": k.int("max_position_embeddings", default=2048),
        "decoder_layer_class": "FalconDecoderLayer",
    }


def mpt(k: Keys) -> dict[str, Any]:
    """MptConfig: `no_bias` (default true) drops every bias, norms included; the output head is
    always the input embedding; ALiBi (attn_config default) or learned positions."""
    hidden = k.int("d_model", default=2048)
    heads = k.int("n_heads", default=16)
    attn = k.get("attn_config", default={})
    if not isinstance(attn, dict):
        raise k._fail("attn_config must be an object")
    kv_heads = 1 if attn.get("attn_type") == "multiquery_attention" else attn.get("kv_n_heads") or heads
    if attn.get("alibi", True):
        positions = "alibi"
    else:
        positions = "learned" if k.bool("learned_pos_emb", True) else "rope"
    bias = not k.bool("no_bias", True)
    ratio = k.number("expansion_ratio", 4)
    if ratio is None or ratio > 64:
        raise k._fail("expansion_ratio must be a number in (0, 64]")
    return {
        "layers": k.int("n_layers", default=24), "hidden": hidden, "heads": heads, "kv_heads": kv_heads,
        "ffn": int(ratio * hidden), "vocab": k.int("vocab_size", default=50368), "gated_mlp": False,
        "tied_embeddings": True, "norm": "layernorm", "norm_bias": bias,
        "qkv_bias": bias, "out_bias": bias, "mlp_bias": bias, "fused_qkv": True,
        "position_embedding": positions, "max_position_embeddings": k.int("max_seq_len", default=2048),
        "decoder_layer_class": "MptBlock",
    }
