"""ModelSpec: the shape of a dense decoder-only transformer, its exact parameter count, its FLOPs.

Three ways in: a preset (`advisor/data/models/<id>.toml`), a local Hugging Face `config.json`
(`advisor/core/hf_config.py`), or `--params` alone (`infer_from_params`, shape from a canonical aspect
ratio). The model knows nothing of parallelism; strategies read its counts.
"""

from __future__ import annotations

import math
from functools import cache, lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from advisor.core.errors import InvalidInput
from advisor.core.text import SafeText
from advisor.data import load_presets

MAX_PARAMS = 1e13  # 10T: beyond any dense model trained today


class ModelSpec(BaseModel):
    """A dense decoder-only transformer. Parameter counts follow the Hugging Face modules."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: SafeText
    """Shown in every output and written into the emitted files (validated: printable, bounded)."""
    layers: int = Field(gt=0, le=1024)
    hidden: int = Field(gt=0, le=131072)
    heads: int = Field(gt=0, le=1024)
    kv_heads: int = Field(gt=0, le=1024)
    """Key/value heads: equal to `heads` for multi-head, fewer for GQA, 1 for multi-query."""
    ffn: int = Field(gt=0, le=1048576)
    """MLP intermediate size."""
    vocab: int = Field(gt=0, le=4194304)
    gated_mlp: bool = True
    """SwiGLU-style MLP with gate, up and down projections (3 matrices) instead of 2."""
    tied_embeddings: bool = False
    """Output head shares the input embedding matrix."""
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    norm_bias: bool = False
    qkv_bias: bool = False
    out_bias: bool = False
    """Bias on the attention output projection."""
    mlp_bias: bool = False
    parallel_block: bool = False
    """Attention and MLP read the same normalized input (Falcon, GPT-J): one norm per layer."""
    position_embedding: Literal["rope", "alibi", "learned"] = "rope"
    max_position_embeddings: int = Field(default=4096, gt=0)
    decoder_layer_class: str = "LlamaDecoderLayer"
    """The transformers class of one decoder layer: the FSDP wrap unit in emitted configs."""
    params_override: int | None = Field(default=None, gt=0)
    """Exact parameter count given by the user (`--params`); the shape is then only inferred."""
    source: str = ""
    """Where the shape comes from (preset file, config.json path, or 'inferred from --params')."""

    @model_validator(mode="after")
    def _check_shape(self) -> ModelSpec:
        if self.hidden % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide hidden ({self.hidden})")
        if self.heads % self.kv_heads:
            raise ValueError(f"kv_heads ({self.kv_heads}) must divide heads ({self.heads})")
        return self

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        """Width of the K (or V) projection output: kv_heads * head_dim."""
        return self.kv_heads * self.head_dim

    @property
    def inferred(self) -> bool:
        return self.params_override is not None

    # -- parameter counts (elements) ------------------------------------------------------
    @property
    def layer_params(self) -> int:
        """Parameters of one decoder layer.

        attention: q and o are h x h, k and v are h x kv_dim; MLP: 3 (gated) or 2 matrices of
        h x ffn; plus biases and 1-2 norms (weight, and bias for LayerNorm with bias).
        """
        h, kv, f = self.hidden, self.kv_dim, self.ffn
        attention = 2 * h * h + 2 * h * kv
        attention += (h + 2 * kv) * self.qkv_bias + h * self.out_bias
        mlp = (3 if self.gated_mlp else 2) * h * f
        mlp += ((2 * f if self.gated_mlp else f) + h) * self.mlp_bias
        norms = (1 if self.parallel_block else 2) * self.norm_params
        return attention + mlp + norms

    @property
    def norm_params(self) -> int:
        return self.hidden * (2 if self.norm_bias else 1)

    @property
    def embedding_params(self) -> int:
        """Token embedding plus learned positions (if any)."""
        positions = self.max_position_embeddings if self.position_embedding == "learned" else 0
        return (self.vocab + positions) * self.hidden

    @property
    def head_params(self) -> int:
        """Output projection (0 when tied to the embedding) plus the final norm."""
        return (0 if self.tied_embeddings else self.vocab * self.hidden) + self.norm_params

    @property
    def shape_params(self) -> int:
        """Parameters implied by the shape."""
        return self.embedding_params + self.layers * self.layer_params + self.head_params

    @property
    def params(self) -> int:
        """Exact parameter count: the user's `--params` if given, else the shape's."""
        return self.params_override or self.shape_params

    def parameter_tensors(self) -> list[int]:
        """Element counts of the parameter tensors in registration order (a Hugging Face
        decoder: embedding, then per layer q, k, v, o (+ biases), the MLP matrices (+ biases) and
        the norms, then the final norm and the untied head). DeepSpeed flattens them in this
        order before partitioning."""
        h, kv, f = self.hidden, self.kv_dim, self.ffn
        attention = [h * h, h * kv, h * kv] + ([h, kv, kv] if self.qkv_bias else [])
        attention += [h * h] + ([h] if self.out_bias else [])
        mats = 3 if self.gated_mlp else 2
        mlp = [h * f] * mats + ([f] * (mats - 1) + [h] if self.mlp_bias else [])
        norm = [h, h] if self.norm_bias else [h]
        layer = attention + mlp + norm * (1 if self.parallel_block else 2)
        out = [self.vocab * h]
        if self.position_embedding == "learned":
            out.append(self.max_position_embeddings * h)
        out += layer * self.layers + norm
        if not self.tied_embeddings:
            out.append(self.vocab * h)
        return out

    @property
    def modules_per_layer(self) -> int:
        """Submodules of one decoder layer that own parameters or wrap them (hook targets):
        q, k, v, o, 2-3 MLP matrices, the norms, and the attention / MLP / layer containers."""
        return 4 + (3 if self.gated_mlp else 2) + (1 if self.parallel_block else 2) + 3

    @property
    def largest_layer_params(self) -> int:
        """Largest single module's parameters, as DeepSpeed's ZeRO-3 estimator takes it: the
        embedding matrix for most LLMs, else a decoder layer."""
        return max(self.vocab * self.hidden, self.layer_params)

    # -- FLOPs -----------------------------------------------------------------------------
    def mfu_flops_per_token(self, seq_len: int) -> float:
        """Model FLOPs per token for forward + backward: 6 * P + 12 * L * h * s.

        The MFU convention of PaLM (Chowdhery et al. 2022, appendix B) as used by MosaicML
        llm-foundry: 6 FLOPs per parameter per token, plus attention scores and values
        (2 matmuls x 2 FLOPs x 3 for fwd+bwd = 12, per layer, per hidden unit, per context
        position), counted over the full s x s square regardless of the causal mask.
        """
        return 6.0 * self.params + 12.0 * self.layers * self.hidden * seq_len

    @property
    def matmul_params(self) -> int:
        """Weights (and biases) that take part in a matmul: all but the token-embedding lookup,
        learned positions and norms; a tied embedding counts once, as the output head."""
        norms = (self.layers * (1 if self.parallel_block else 2) + 1) * self.norm_params
        tied_head = self.vocab * self.hidden if self.tied_embeddings else 0
        return self.params - self.embedding_params - norms + tied_head

    def dense_flops_per_token(self) -> float:
        """Forward + backward FLOPs per token of the weight matmuls: 6 per matmul weight
        (2 forward, 4 backward; Kaplan et al. 2020)."""
        return 6.0 * self.matmul_params

    def attention_flops_per_token(self, seq_len: int) -> float:
        """Forward + backward FLOPs per token of the attention scores and values over the full
        s x s square: 12 * L * h * s (a causal kernel may skip half)."""
        return 12.0 * self.layers * self.hidden * seq_len


# Canonical aspect ratio for `--params` alone: head_dim 128, layers = hidden / 128 (Llama-13B
# is 5120 x 40), gated MLP of 8/3 h rounded up to 256, Llama-2 vocabulary.
_INFER_HEAD_DIM = 128
_INFER_VOCAB = 32000


@lru_cache(maxsize=256)
def infer_from_params(params: float) -> ModelSpec:
    """A Llama-style shape for a parameter count: hidden ~ (128 * P / 12)^(1/3) rounded to 128;
    layers chosen so the shape's count is closest to P. The given P stays exact for memory.
    Cached: a ModelSpec is immutable."""
    if not (params > 0) or params > MAX_PARAMS or math.isnan(params):
        raise InvalidInput("params", f"{params:g} is out of range", f"1e6 to {MAX_PARAMS:g}")
    if params < 1e6:
        raise InvalidInput("params", f"{params:g} is too small to be an LLM", f"1e6 to {MAX_PARAMS:g}")
    hidden = max(_INFER_HEAD_DIM, round((128 * params / 12) ** (1 / 3) / 128) * 128)
    ffn = math.ceil(8 * hidden / 3 / 256) * 256
    probe = ModelSpec(name="probe", layers=1, hidden=hidden, heads=hidden // _INFER_HEAD_DIM,
                      kv_heads=hidden // _INFER_HEAD_DIM, ffn=ffn, vocab=_INFER_VOCAB)
    non_layer = probe.shape_params - probe.layer_params
    layers = max(1, round((params - non_layer) / probe.layer_params))
    return probe.model_copy(update={
        "name": f"{params / 1e9:g}B (inferred)",
        "layers": layers,
        "params_override": int(params),
        "source": "inferred from --params: Llama-style shape, head_dim 128, gated MLP, vocab 32000",
    })


@cache
def model_presets() -> dict[str, ModelSpec]:
    """All model presets by id, read from `advisor/data/models/*.toml` on first use."""
    return load_presets("models", ModelSpec)


def preset(name: str) -> ModelSpec:
    presets = model_presets()
    key = name.strip().lower()
    if key not in presets:
        raise InvalidInput("model", f"unknown model preset {name!r}", ", ".join(sorted(presets)))
    return presets[key]
