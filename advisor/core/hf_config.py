"""ModelSpec from a Hugging Face `config.json`, read from a local file (never from the hub).

Each `model_type` names its keys and defaults differently; the defaults below are those of the
matching transformers config class (`LlamaConfig`, `GPT2Config`, `FalconConfig`, `MptConfig`,
...), so a config.json that omits a key means what it means to transformers. An unknown
`model_type` is read as Llama-like and `source` says what was assumed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from advisor.core.errors import InvalidInput
from advisor.core.model import ModelSpec
from advisor.core.text import check_text

_FIELD = "hf_config"
_SUPPORTED = "model_type llama, mistral, qwen2, granite, gpt2, falcon, mpt (others: Llama-like)"

# model_type -> (decoder layer class, default max_position_embeddings of its config class)
_LLAMA_LIKE = {
    "llama": ("LlamaDecoderLayer", 2048),
    "mistral": ("MistralDecoderLayer", 4096 * 32),
    "qwen2": ("Qwen2DecoderLayer", 32768),
    "granite": ("GraniteDecoderLayer", 2048),
}
_MISSING = object()


def _get(config: dict[str, Any], *keys: str, default: Any = _MISSING) -> Any:
    """The first of `keys` present in `config` (later keys are older spellings), else `default`;
    a required key (no default) that is absent raises InvalidInput."""
    for key in keys:
        if key in config and config[key] is not None:
            return config[key]
    if default is _MISSING:
        raise InvalidInput(_FIELD, f"missing required key {keys[0]!r} "
                           f"(model_type {config.get('model_type', 'unknown')!r})", _SUPPORTED)
    return default


def _int(config: dict[str, Any], *keys: str, default: Any = _MISSING) -> int:
    """Like `_get`, for a count: a JSON integer (not a bool, not a string)."""
    value = _get(config, *keys, default=default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(_FIELD, f"{keys[0]} must be an integer, got {value!r}", "an integer")
    return value


def _llama_like(config: dict[str, Any], model_type: str) -> tuple[dict[str, Any], list[str]]:
    """Llama, Mistral, Qwen2, Granite and the generic fallback: SwiGLU MLP, RMSNorm, RoPE."""
    notes = []
    layer_class, max_positions = _LLAMA_LIKE.get(model_type, ("LlamaDecoderLayer", 4096))
    if model_type not in _LLAMA_LIKE:
        notes.append(f"model_type {model_type!r} is not known: assumed Llama-like (gated MLP, "
                     "RMSNorm, RoPE, LlamaDecoderLayer; biases only where attention_bias / "
                     "mlp_bias say so)")
        if "tie_word_embeddings" not in config:
            notes.append("tie_word_embeddings absent: assumed untied")
    hidden = _int(config, "hidden_size")
    heads = _int(config, "num_attention_heads")
    if config.get("head_dim") is not None and _int(config, "head_dim") * heads != hidden:
        raise InvalidInput(_FIELD, f"head_dim {config['head_dim']} x num_attention_heads "
                           f"{heads} != hidden_size {hidden}: not modelled",
                           "head_dim equal to hidden_size / num_attention_heads")
    attention_bias = bool(config.get("attention_bias", False))
    fields = {
        "layers": _int(config, "num_hidden_layers"),
        "hidden": hidden,
        "heads": heads,
        "kv_heads": _int(config, "num_key_value_heads", default=heads),
        "ffn": _int(config, "intermediate_size"),
        "vocab": _int(config, "vocab_size"),
        "tied_embeddings": bool(config.get("tie_word_embeddings", False)),
        # Qwen2 puts a bias on q/k/v only, always; Llama/Granite's attention_bias covers q/k/v/o.
        "qkv_bias": model_type == "qwen2" or attention_bias,
        "out_bias": model_type != "qwen2" and attention_bias,
        "mlp_bias": bool(config.get("mlp_bias", False)),
        "max_position_embeddings": _int(config, "max_position_embeddings", default=max_positions),
        "decoder_layer_class": layer_class,
    }
    return fields, notes


def _gpt2(config: dict[str, Any]) -> dict[str, Any]:
    """GPT2Config: biases everywhere, LayerNorm with bias, learned positions, tied by default."""
    hidden = _int(config, "n_embd", "hidden_size")
    heads = _int(config, "n_head", "num_attention_heads")
    return {
        "layers": _int(config, "n_layer", "num_hidden_layers"),
        "hidden": hidden,
        "heads": heads,
        "kv_heads": heads,
        "ffn": _int(config, "n_inner", default=4 * hidden),
        "vocab": _int(config, "vocab_size", default=50257),
        "gated_mlp": False,
        "tied_embeddings": bool(config.get("tie_word_embeddings", True)),
        "norm": "layernorm", "norm_bias": True,
        "qkv_bias": True, "out_bias": True, "mlp_bias": True,
        "position_embedding": "learned",
        "max_position_embeddings": _int(config, "n_positions", default=1024),
        "decoder_layer_class": "GPT2Block",
    }


def _falcon(config: dict[str, Any]) -> dict[str, Any]:
    """FalconConfig: multi-query (7B) or grouped KV (`new_decoder_architecture`, 40B/180B);
    `parallel_attn` shares one LayerNorm unless the new architecture gives attention and MLP
    a norm each (then counted as two norms, `parallel_block` false); `bias` covers all linears."""
    hidden = _int(config, "hidden_size")
    heads = _int(config, "num_attention_heads", "n_head")
    new_arch = bool(config.get("new_decoder_architecture", False))
    if new_arch:
        kv_heads = _int(config, "num_kv_heads", "n_head_kv", default=heads)
    else:
        kv_heads = 1 if config.get("multi_query", True) else heads
    norms_in_parallel = config.get("num_ln_in_parallel_attn") or (2 if new_arch else 1)
    bias = bool(config.get("bias", False))
    return {
        "layers": _int(config, "num_hidden_layers", "n_layer"),
        "hidden": hidden,
        "heads": heads,
        "kv_heads": kv_heads,
        "ffn": _int(config, "ffn_hidden_size", default=4 * hidden),
        "vocab": _int(config, "vocab_size", default=65024),
        "gated_mlp": False,
        "tied_embeddings": bool(config.get("tie_word_embeddings", True)),
        "norm": "layernorm", "norm_bias": True,
        "qkv_bias": bias, "out_bias": bias, "mlp_bias": bias,
        "parallel_block": bool(config.get("parallel_attn", True)) and norms_in_parallel == 1,
        "position_embedding": "alibi" if config.get("alibi", False) else "rope",
        "max_position_embeddings": _int(config, "max_position_embeddings", default=2048),
        "decoder_layer_class": "FalconDecoderLayer",
    }


def _mpt(config: dict[str, Any]) -> dict[str, Any]:
    """MptConfig: `no_bias` (default true) drops every bias, norms included; the output head
    is always the input embedding; ALiBi (attn_config default) or learned positions."""
    hidden = _int(config, "d_model")
    heads = _int(config, "n_heads")
    attn = config.get("attn_config") or {}
    if not isinstance(attn, dict):
        raise InvalidInput(_FIELD, f"attn_config must be an object, got {attn!r}", "a JSON object")
    multi_query = attn.get("attn_type") == "multiquery_attention"
    kv_heads = 1 if multi_query else attn.get("kv_n_heads") or heads
    if attn.get("alibi", True):
        positions = "alibi"
    else:
        positions = "learned" if config.get("learned_pos_emb", True) else "rope"
    bias = not config.get("no_bias", True)
    ratio = _get(config, "expansion_ratio", default=4)
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 < ratio <= 64:
        raise InvalidInput(_FIELD, f"expansion_ratio must be a number in (0, 64], got {ratio!r}",
                           "e.g. 4")
    return {
        "layers": _int(config, "n_layers"),
        "hidden": hidden,
        "heads": heads,
        "kv_heads": kv_heads,
        "ffn": int(ratio * hidden),
        "vocab": _int(config, "vocab_size", default=50368),
        "gated_mlp": False,
        "tied_embeddings": True,
        "norm": "layernorm", "norm_bias": bias,
        "qkv_bias": bias, "out_bias": bias, "mlp_bias": bias,
        "position_embedding": positions,
        "max_position_embeddings": _int(config, "max_seq_len", default=2048),
        "decoder_layer_class": "MptBlock",
    }


_READERS = {"gpt2": _gpt2, "falcon": _falcon, "mpt": _mpt}


def from_hf_config(config: dict, name: str | None = None, source: str = "") -> ModelSpec:
    """ModelSpec from a parsed config.json. `name` defaults to `_name_or_path`, else model_type.

    Raises InvalidInput("hf_config", ...) for a missing required key or an impossible shape.
    """
    if not isinstance(config, dict):
        raise InvalidInput(_FIELD, "config.json must hold a JSON object", _SUPPORTED)
    model_type = check_text(str(config.get("model_type", "unknown")), f"{_FIELD}.model_type", 64).lower()
    reader = _READERS.get(model_type)
    fields, notes = (reader(config), []) if reader else _llama_like(config, model_type)
    if name is None and config.get("_name_or_path"):
        name = check_text(config["_name_or_path"], f"{_FIELD}._name_or_path")
    name = name or model_type
    text = "; ".join([source or "Hugging Face config.json", *notes])
    try:
        return ModelSpec(name=name, source=text, **fields)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "shape"
        message = str(first["msg"]).removeprefix("Value error, ")
        raise InvalidInput(_FIELD, f"{where}: {message} (model_type {model_type!r})",
                           _SUPPORTED) from None


def load_hf_config(path: str) -> ModelSpec:
    """ModelSpec from a local config.json; named after its folder (`.../Llama-3-8B/config.json`)."""
    file = Path(path)
    try:
        config = json.loads(file.read_text())
    except OSError as error:
        raise InvalidInput(_FIELD, f"cannot read {path}: {error.strerror or error}",
                           "a path to a local config.json") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InvalidInput(_FIELD, f"{path} is not valid JSON: {error}",
                           "a Hugging Face config.json") from None
    name = file.parent.name if file.name == "config.json" and file.parent.name else file.stem
    return from_hf_config(config, name=name, source=f"config.json at {path}")
