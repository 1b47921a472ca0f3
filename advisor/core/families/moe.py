"""Mixture-of-experts families: which layers are MoE, the experts' sizes, the router, the shared
experts, and DeepSeek's latent attention. Defaults of MixtralConfig, Qwen3MoeConfig,
Qwen2MoeConfig, DeepseekV2Config, DeepseekV3Config and GptOssConfig."""

from __future__ import annotations

from typing import Any

from advisor.core.families.common import Keys, sliding
from advisor.core.families.dense import _core

REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")


def _moe(experts: int, top_k: int, expert_ffn: int, moe_layers: int, **more: Any) -> dict[str, Any]:
    return {"experts": experts, "top_k": top_k, "expert_ffn": expert_ffn, "moe_layers": moe_layers, **more}


def mixtral(k: Keys) -> dict[str, Any]:
    """MixtralConfig: every layer's MLP is `num_local_experts` gated experts, `num_experts_per_tok`
    per token, a bias-free router."""
    core = _core(k, {"kv_heads": 8, "ffn": 14336, "max_positions": 131072})
    window = k.int("sliding_window", default=None)
    kinds = ["sliding_attention" if window else "full_attention"] * core["layers"]
    moe = _moe(k.int("num_local_experts", default=8), k.int("num_experts_per_tok", default=2),
               core["ffn"], core["layers"])
    return {**core, **sliding(kinds, window), "moe": moe, "decoder_layer_class": "MixtralDecoderLayer"}


def _sparse_layers(k: Keys, layers: int) -> int:
    """Qwen-MoE: layer i is MoE unless listed in mlp_only_layers, when (i + 1) is a multiple of
    decoder_sparse_step."""
    step = k.int("decoder_sparse_step", default=1)
    dense = k.get("mlp_only_layers", default=[])
    if not isinstance(dense, list):
        raise k._fail("mlp_only_layers must be a list of layer indices")
    return sum(1 for i in range(layers) if i not in dense and (i + 1) % step == 0)


def qwen3_moe(k: Keys) -> dict[str, Any]:
    """Qwen3MoeConfig (Qwen3-30B-A3B, 235B-A22B): Qwen3's attention (per-head q/k norms), 128
    experts of moe_intermediate_size, no shared expert."""
    core = _core(k, {"hidden": 2048, "ffn": 6144, "layers": 24, "kv_heads": 4, "head_dim": 128,
                     "vocab": 151936, "max_positions": 32768})
    bias = k.bool("attention_bias", False)
    moe = _moe(k.int("num_experts", default=128), k.int("num_experts_per_tok", default=8),
               k.int("moe_intermediate_size", default=768), _sparse_layers(k, core["layers"]))
    return {**core, "qk_norm": "head", "qkv_bias": bias, "out_bias": bias, "moe": moe,
            "decoder_layer_class": "Qwen3MoeDecoderLayer"}


def qwen2_moe(k: Keys) -> dict[str, Any]:
    """Qwen2MoeConfig (Qwen1.5-MoE, Qwen2-57B-A14B): q/k/v biases, a gated shared expert."""
    core = _core(k, {"hidden": 2048, "ffn": 5632, "layers": 24, "heads": 16, "vocab": 151936,
                     "max_positions": 32768})
    moe = _moe(k.int("num_experts", default=60), k.int("num_experts_per_tok", default=4),
               k.int("moe_intermediate_size", default=1408), _sparse_layers(k, core["layers"]),
               shared_ffn=k.int("shared_expert_intermediate_size", default=5632, low=0), shared_gate=True)
    return {**core, "qkv_bias": True, "moe": moe, "decoder_layer_class": "Qwen2MoeDecoderLayer"}


def _deepseek(k: Keys, d: dict[str, Any], layer_class: str) -> dict[str, Any]:
    core = _core(k, {"max_positions": 2048, **d})
    layers = core["layers"]
    first_dense = k.int("first_k_dense_replace", default=d["first_dense"], low=0)
    freq = k.int("moe_layer_freq", default=1)
    moe_layers = sum(1 for i in range(layers) if i >= first_dense and i % freq == 0)
    expert_ffn = k.int("moe_intermediate_size", default=d["expert_ffn"])
    shared = k.int("n_shared_experts", default=d["shared"], low=0)
    # an explicit null means no query compression (V2-Lite); absent means the class default
    q_lora = k.int("q_lora_rank", default=None) if "q_lora_rank" in k.config else d["q_lora"]
    mla = {"q_lora_rank": q_lora,
           "kv_lora_rank": k.int("kv_lora_rank", default=512),
           "qk_nope_head_dim": k.int("qk_nope_head_dim", default=128),
           "qk_rope_head_dim": k.int("qk_rope_head_dim", default=64),
           "v_head_dim": k.int("v_head_dim", default=128)}
    out = {**core, "head_dim": 0, "mla": mla, "qkv_bias": k.bool("attention_bias", False),
           "decoder_layer_class": layer_class}
    if moe_layers:
        out["moe"] = _moe(k.int("n_routed_experts", default=d["experts"]),
                          k.int("num_experts_per_tok", default=d["top_k"]), expert_ffn, moe_layers,
                          shared_ffn=shared * expert_ffn)
    return out


def deepseek_v2(k: Keys) -> dict[str, Any]:
    """DeepseekV2Config (DeepSeek-V2, V2-Lite): latent attention; layers from
    first_k_dense_replace on (every moe_layer_freq-th) are MoE with shared experts."""
    return _deepseek(k, {"vocab": 102400, "experts": 64, "top_k": 6, "expert_ffn": 1407,
                         "shared": 2, "first_dense": 0, "q_lora": 1536}, "DeepseekV2DecoderLayer")


def deepseek_v3(k: Keys) -> dict[str, Any]:
    """DeepseekV3Config (DeepSeek-V3, R1): V2's layer with sigmoid routing; its expert score
    correction bias is a buffer in transformers, not a parameter."""
    return _deepseek(k, {"vocab": 129280, "hidden": 7168, "ffn": 18432, "layers": 61, "heads": 128,
                         "max_positions": 4096, "experts": 256, "top_k": 8, "expert_ffn": 2048,
                         "shared": 1, "first_dense": 3, "q_lora": 1536}, "DeepseekV3DecoderLayer")


def gpt_oss(k: Keys) -> dict[str, Any]:
    """GptOssConfig (gpt-oss-20b, 120b): biased attention with per-head sinks, every other layer
    local (sliding_window 128), experts and router with biases."""
    core = _core(k, {"hidden": 2880, "ffn": 2880, "layers": 36, "heads": 64, "kv_heads": 8,
                     "head_dim": 64, "vocab": 201088, "max_positions": 131072})
    bias = k.bool("attention_bias", True)
    window = k.int("sliding_window", default=128)
    kinds = k.layer_types(core["layers"], lambda i: "sliding_attention" if i % 2 == 0 else "full_attention")
    moe = _moe(k.int("num_local_experts", "num_experts", default=128),
               k.int("num_experts_per_tok", "experts_per_token", default=4), core["ffn"], core["layers"],
               expert_bias=True, router_bias=True)
    return {**core, **sliding(kinds, window), "qkv_bias": bias, "out_bias": bias,
            "attention_sinks": True, "moe": moe, "decoder_layer_class": "GptOssDecoderLayer"}
