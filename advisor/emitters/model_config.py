"""A ModelSpec as the Hugging Face `config.json` that builds it: the inverse of the family readers
(advisor/core/families/, entry point advisor/core/hf_config.py `from_hf_config`).

Plan bundles ship it as `model_config.json`, so a dry run can build the plan's own architecture
class (`AutoConfig.for_model(**config)`, then `AutoModelForCausalLM.from_config`), e.g. with
fewer layers or a smaller hidden size, on CPU.

Source: the transformers 5.x config classes of each `model_type` (LlamaConfig, GraniteConfig,
MistralConfig, Qwen2Config, Qwen3Config, Olmo2Config, Phi3Config, Gemma2Config,
Gemma3TextConfig, MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig, DeepseekV2Config,
DeepseekV3Config, GptOssConfig, GPT2Config, GPTNeoXConfig, FalconConfig, MptConfig) and the
modules they build. Every key that shapes a parameter is written explicitly, so neither the
readers' defaults nor the classes' decide anything; keys that shape no parameter (rope, eps,
dropout, token ids, dtype) are left to the class defaults.

Units: widths in elements (hidden_size, intermediate_size, head_dim, the MLA ranks and head
widths), counts (layers, heads, experts), positions and windows in tokens; soft-caps are logit
values. Gemma-3 is written as its text model (`gemma3_text`, Gemma3ForCausalLM): the part the
advisor describes and trains.

Every config written is read back with `from_hf_config` before it is returned: a spec that its
family's config.json cannot express (a Llama with LayerNorm, an MPT whose ffn is not 4 x hidden,
which transformers' MptMLP always builds) is one InvalidInput naming the field, never a config
for some other model. A spec's `params_override` (`--params`) is not written: the config
describes the shape, whose count is `spec.shape_params`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from advisor.core.architecture import MLASpec, MoESpec
from advisor.core.errors import InvalidInput
from advisor.core.hf_config import ACTIVATION_KEY, from_hf_config
from advisor.core.model import ModelSpec

Config = dict[str, Any]
NOT_ARCHITECTURE = frozenset({"name", "source", "params_override"})
"""ModelSpec fields a config.json does not carry (compared on read-back: all the others)."""
CHECKS_HEADS_DIVIDE_HIDDEN = frozenset({"llama", "gemma2", "gemma3_text", "deepseek_v2", "gpt_neox"})
"""Families whose transformers config class refuses hidden_size % num_attention_heads != 0
(its `validate_architecture`), whatever head_dim says."""


class _Unwritable(Exception):
    """A spec the family's config.json (or transformers' class) cannot express; the message
    says what."""


def _cannot(spec: ModelSpec, what: str) -> InvalidInput:
    arch = WRITERS[spec.family][0]
    return InvalidInput("model", f"{spec.name!r} cannot be written as a config.json of model_type "
                        f"{spec.family!r}: {what}", f"a shape transformers' {arch} builds")


# -- the parts families share --------------------------------------------------------------

def _core(s: ModelSpec) -> Config:
    """The Llama-style shape keys (advisor/core/families/dense.py `_core`)."""
    return {"vocab_size": s.vocab, "hidden_size": s.hidden, "intermediate_size": s.ffn,
            "num_hidden_layers": s.layers, "num_attention_heads": s.heads,
            "num_key_value_heads": s.kv_heads, "head_dim": s.head_dim,
            "max_position_embeddings": s.max_position_embeddings,
            "tie_word_embeddings": s.tied_embeddings}


def _window(s: ModelSpec) -> int | None:
    """The sliding window of the layers that use one; None when no layer does."""
    return s.sliding_window if s.sliding_layers else None


def _layer_types(s: ModelSpec, slides: Callable[[int], bool]) -> Config:
    """`layer_types` only where the class's default pattern (`slides(i)`: layer i is local) does
    not give the spec's number of sliding layers; then the first `sliding_layers` are local."""
    if sum(slides(i) for i in range(s.layers)) == s.sliding_layers:
        return {}
    return {"layer_types": ["sliding_attention" if i < s.sliding_layers else "full_attention"
                            for i in range(s.layers)]}


def _qwen_window(s: ModelSpec) -> Config:
    """Qwen2/3: layers from max_window_layers on use the window when use_sliding_window."""
    return {"use_sliding_window": bool(s.sliding_layers), "sliding_window": _window(s),
            "max_window_layers": s.layers - s.sliding_layers}


def _moe(s: ModelSpec) -> MoESpec:
    if s.moe is None:
        raise _Unwritable("a dense spec (moe is None): every layer of this family is routed")
    return s.moe


def _qwen_moe(s: ModelSpec) -> Config:
    """Qwen-MoE: the dense layers (ModelSpec counts them first) listed in mlp_only_layers."""
    moe = _moe(s)
    return {"num_experts": moe.experts, "num_experts_per_tok": moe.top_k,
            "moe_intermediate_size": moe.expert_ffn, "decoder_sparse_step": 1,
            "mlp_only_layers": list(range(s.dense_layers))}


# -- one writer per family (the readers' order) --------------------------------------------

def llama(s: ModelSpec) -> Config:
    """LlamaConfig (GraniteConfig the same keys): attention_bias covers q, k, v and o."""
    return {**_core(s), "attention_bias": s.qkv_bias, "mlp_bias": s.mlp_bias}


def mistral(s: ModelSpec) -> Config:
    """MistralConfig: every layer uses sliding_window, or none (null)."""
    return {**_core(s), "sliding_window": _window(s)}


def qwen2(s: ModelSpec) -> Config:
    """Qwen2Config: q, k, v always carry a bias (no key)."""
    return {**_core(s), **_qwen_window(s)}


def qwen3(s: ModelSpec) -> Config:
    return {**_core(s), "attention_bias": s.qkv_bias, **_qwen_window(s)}


def olmo2(s: ModelSpec) -> Config:
    return {**_core(s), "attention_bias": s.qkv_bias}


def phi3(s: ModelSpec) -> Config:
    """Phi3Config: fused projections (no key); every layer uses sliding_window, or none."""
    return {**_core(s), "sliding_window": _window(s)}


def _gemma(s: ModelSpec, pattern: int) -> Config:
    """Gemma 2 / 3: global attention every `pattern`-th layer by default."""
    return {**_core(s), "attention_bias": s.qkv_bias, "sliding_window": _window(s),
            **_layer_types(s, lambda i: (i + 1) % pattern != 0),
            "attn_logit_softcapping": s.attn_softcap, "final_logit_softcapping": s.logit_softcap}


def gemma2(s: ModelSpec) -> Config:
    return _gemma(s, pattern=2)


def gemma3_text(s: ModelSpec) -> Config:
    """Gemma3TextConfig (its default sliding_window_pattern 6: five local layers to one global)."""
    return _gemma(s, pattern=6)


def mixtral(s: ModelSpec) -> Config:
    """MixtralConfig: every layer routed; intermediate_size is each expert's."""
    moe = _moe(s)
    return {**_core(s), "sliding_window": _window(s), "num_local_experts": moe.experts,
            "num_experts_per_tok": moe.top_k}


def qwen2_moe(s: ModelSpec) -> Config:
    """Qwen2MoeConfig: a gated shared expert on every MoE layer; qkv_bias (q, k, v)."""
    return {**_core(s), "qkv_bias": s.qkv_bias, **_qwen_moe(s),
            "shared_expert_intermediate_size": _moe(s).shared_ffn}


def qwen3_moe(s: ModelSpec) -> Config:
    return {**_core(s), "attention_bias": s.qkv_bias, **_qwen_moe(s)}


def _deepseek(s: ModelSpec) -> Config:
    """DeepseekV2Config / DeepseekV3Config: latent attention; the first first_k_dense_replace
    layers dense (all of them for a dense spec), the rest routed with n_shared_experts shared
    experts of moe_intermediate_size. head_dim is not written (the class sets qk_rope_head_dim)."""
    if s.mla is None:
        raise _Unwritable("no mla: DeepSeek's attention is always multi-head latent attention")
    mla: MLASpec = s.mla
    out = {**_core(s), "attention_bias": s.qkv_bias, "first_k_dense_replace": s.dense_layers,
           "q_lora_rank": mla.q_lora_rank, "kv_lora_rank": mla.kv_lora_rank,
           "qk_nope_head_dim": mla.qk_nope_head_dim, "qk_rope_head_dim": mla.qk_rope_head_dim,
           "v_head_dim": mla.v_head_dim}
    del out["head_dim"]
    if s.moe is not None:
        if s.moe.shared_ffn % s.moe.expert_ffn:
            raise _Unwritable(f"shared_ffn {s.moe.shared_ffn} is not a whole number of experts of "
                              f"{s.moe.expert_ffn} (n_shared_experts x moe_intermediate_size)")
        out |= {"n_routed_experts": s.moe.experts, "num_experts_per_tok": s.moe.top_k,
                "moe_intermediate_size": s.moe.expert_ffn,
                "n_shared_experts": s.moe.shared_ffn // s.moe.expert_ffn}
    return out


def gpt_oss(s: ModelSpec) -> Config:
    """GptOssConfig: every layer routed (intermediate_size each expert's), local attention on
    the even layers by default; biases and sinks always."""
    moe = _moe(s)
    return {**_core(s), "attention_bias": s.qkv_bias, "sliding_window": _window(s),
            **_layer_types(s, lambda i: i % 2 == 0),
            "num_local_experts": moe.experts, "num_experts_per_tok": moe.top_k}


def gpt2(s: ModelSpec) -> Config:
    """GPT2Config: learned positions (n_positions), biases everywhere."""
    return {"vocab_size": s.vocab, "n_embd": s.hidden, "n_layer": s.layers, "n_head": s.heads,
            "n_inner": s.ffn, "n_positions": s.max_position_embeddings,
            "tie_word_embeddings": s.tied_embeddings}


def gpt_neox(s: ModelSpec) -> Config:
    """GPTNeoXConfig: attention_bias on query_key_value and dense (the MLP always has biases)."""
    return {"vocab_size": s.vocab, "hidden_size": s.hidden, "intermediate_size": s.ffn,
            "num_hidden_layers": s.layers, "num_attention_heads": s.heads,
            "max_position_embeddings": s.max_position_embeddings,
            "tie_word_embeddings": s.tied_embeddings, "use_parallel_residual": s.parallel_block,
            "attention_bias": s.qkv_bias}


def falcon(s: ModelSpec) -> Config:
    """FalconConfig: multi-query (one KV head) or multi-head in the original layout, grouped KV
    in the new one; a parallel block has num_ln_in_parallel_attn norms (1 or 2), a sequential
    one 2; `bias` covers every linear."""
    new = s.kv_heads not in (1, s.heads)
    out = {"vocab_size": s.vocab, "hidden_size": s.hidden, "ffn_hidden_size": s.ffn,
           "num_hidden_layers": s.layers, "num_attention_heads": s.heads, "num_kv_heads": s.kv_heads,
           "new_decoder_architecture": new, "multi_query": not new and s.kv_heads == 1,
           "parallel_attn": s.parallel_block, "bias": s.qkv_bias,
           "alibi": s.position_embedding == "alibi",
           "max_position_embeddings": s.max_position_embeddings,
           "tie_word_embeddings": s.tied_embeddings}
    if s.parallel_block:
        out["num_ln_in_parallel_attn"] = s.norms_per_layer
    return out


def mpt(s: ModelSpec) -> Config:
    """MptConfig. transformers' MPT modules ignore expansion_ratio (the MLP is always 4 x
    d_model), no_bias (no linear or LayerNorm has a bias) and the position keys (always ALiBi):
    only specs of that shape are written, with the keys saying so."""
    if (s.ffn, s.qkv_bias, s.norm_bias, s.position_embedding) != (4 * s.hidden, False, False, "alibi"):
        raise _Unwritable(f"ffn {s.ffn}, biases {s.qkv_bias}, norm bias {s.norm_bias}, positions "
                          f"{s.position_embedding!r}; MptForCausalLM builds ffn 4 x hidden "
                          f"({4 * s.hidden}), no biases and ALiBi whatever its config says")
    return {"vocab_size": s.vocab, "d_model": s.hidden, "n_layers": s.layers, "n_heads": s.heads,
            "expansion_ratio": 4, "max_seq_len": s.max_position_embeddings, "no_bias": True,
            "attn_config": {"alibi": True}, "tie_word_embeddings": True}


WRITERS: dict[str, tuple[str, Callable[[ModelSpec], Config]]] = {
    # model_type: (the CausalLM class AutoModelForCausalLM builds, the writer)
    "llama": ("LlamaForCausalLM", llama),
    "granite": ("GraniteForCausalLM", llama),
    "mistral": ("MistralForCausalLM", mistral),
    "qwen2": ("Qwen2ForCausalLM", qwen2),
    "qwen3": ("Qwen3ForCausalLM", qwen3),
    "olmo2": ("Olmo2ForCausalLM", olmo2),
    "phi3": ("Phi3ForCausalLM", phi3),
    "gemma2": ("Gemma2ForCausalLM", gemma2),
    "gemma3_text": ("Gemma3ForCausalLM", gemma3_text),
    "mixtral": ("MixtralForCausalLM", mixtral),
    "qwen2_moe": ("Qwen2MoeForCausalLM", qwen2_moe),
    "qwen3_moe": ("Qwen3MoeForCausalLM", qwen3_moe),
    "deepseek_v2": ("DeepseekV2ForCausalLM", _deepseek),
    "deepseek_v3": ("DeepseekV3ForCausalLM", _deepseek),
    "gpt_oss": ("GptOssForCausalLM", gpt_oss),
    "gpt2": ("GPT2LMHeadModel", gpt2),
    "gpt_neox": ("GPTNeoXForCausalLM", gpt_neox),
    "falcon": ("FalconForCausalLM", falcon),
    "mpt": ("MptForCausalLM", mpt),
}
SUPPORTED = ", ".join(sorted(WRITERS))


def _read_back(spec: ModelSpec, config: Config) -> None:
    """The config read by the family's reader must give the spec back, field for field."""
    try:
        back = from_hf_config(config)
    except InvalidInput as error:
        raise _Unwritable(f"it would not read back ({error.message})") from None
    want, got = _fields(spec), _fields(back)
    wrong = [key for key in dict.fromkeys([*want, *got]) if want.get(key) != got.get(key)]
    if wrong:
        raise _Unwritable("; ".join(f"{key} {want.get(key)!r} would read back as {got.get(key)!r}"
                                    for key in wrong))


def _fields(spec: ModelSpec) -> dict[str, Any]:
    """The architectural fields, the nested ones (moe, mla) as `moe.top_k`..."""
    out: dict[str, Any] = {}
    for key, value in spec.model_dump(exclude=set(NOT_ARCHITECTURE)).items():
        if isinstance(value, dict):
            out |= {f"{key}.{inner}": v for inner, v in value.items()}
        else:
            out[key] = value
    return out


def to_hf_config(spec: ModelSpec) -> dict[str, Any]:
    """The config.json contents (a JSON-ready dict with model_type and architectures) from
    which transformers builds exactly the model `spec` describes. InvalidInput (field "model")
    for a family without a writer or a spec its family's config cannot express."""
    if spec.family not in WRITERS:
        raise InvalidInput("model", f"no config.json writer for model family {spec.family!r}",
                           f"supported families {SUPPORTED}")
    architecture, write = WRITERS[spec.family]
    try:
        if spec.family in CHECKS_HEADS_DIVIDE_HIDDEN and spec.hidden % spec.heads:
            raise _Unwritable(f"heads ({spec.heads}) must divide hidden ({spec.hidden}) for "
                              f"transformers' {spec.family} config class")
        config = {"model_type": spec.family, "architectures": [architecture], **write(spec)}
        if spec.activation is not None:
            if spec.family not in ACTIVATION_KEY:
                raise _Unwritable(f"its config has no activation key for {spec.activation!r}")
            config[ACTIVATION_KEY[spec.family]] = spec.activation
        _read_back(spec, config)
    except _Unwritable as error:
        raise _cannot(spec, str(error)) from None
    return config
