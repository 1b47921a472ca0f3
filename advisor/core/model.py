"""ModelSpec: the shape of a dense decoder-only transformer, its exact parameter count, its FLOPs.

Three ways in: a preset (`advisor/data/models/<id>.toml`), a local Hugging Face `config.json`
(`advisor/core/hf_config.py`), or `--params` alone (`infer_from_params`, shape from a canonical aspect
ratio). The model knows nothing of parallelism; strategies read its counts.
"""

from __future__ import annotations

import math
from functools import cache, lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from advisor.core.architecture import MLASpec, MoESpec
from advisor.core.errors import InvalidInput
from advisor.core.text import SafeText
from advisor.data import load_presets

MAX_PARAMS = 1e13  # 10T: beyond any dense model trained today


class ModelSpec(BaseModel):
    """A decoder-only transformer as its model family builds it (advisor/core/families/).
    Parameter counts follow the Hugging Face modules exactly (tests/test_families.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: SafeText
    """Shown in every output and written into the emitted files (validated: printable, bounded)."""
    family: str = "llama"
    """The model family (a transformers model_type) whose reader built this spec."""
    layers: int = Field(gt=0, le=1024)
    hidden: int = Field(gt=0, le=131072)
    heads: int = Field(gt=0, le=1024)
    kv_heads: int = Field(gt=0, le=1024)
    """Key/value heads: equal to `heads` for multi-head, fewer for GQA, 1 for multi-query."""
    head_dim: int = Field(default=0, ge=0, le=4096)
    """Per-head width; 0 (the default) means hidden / heads. Gemma-2, Qwen3-MoE, Mistral-Nemo
    and gpt-oss set their own, so heads x head_dim need not equal hidden."""
    ffn: int = Field(gt=0, le=1048576)
    """MLP intermediate size (of the dense layers, for MoE models)."""
    vocab: int = Field(gt=0, le=4194304)
    gated_mlp: bool = True
    """SwiGLU / GeGLU-style MLP with gate, up and down projections (3 matrices) instead of 2."""
    tied_embeddings: bool = False
    """Output head shares the input embedding matrix."""
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    norm_bias: bool = False
    norms_per_layer: int = Field(default=0, ge=0, le=4)
    """Norms in one decoder layer; 0 (the default) means 1 for a parallel block, else 2. Gemma-2
    and -3 have 4 (before and after attention and MLP); OLMo-2 2 after them."""
    norm_position: Literal["pre", "post", "sandwich"] = "pre"
    """Where the norms sit: before attention and MLP (Llama), after them (OLMo-2), or both
    (Gemma-2/3)."""
    qk_norm: Literal["none", "head", "full"] = "none"
    """RMSNorm on queries and keys: per head (Qwen3, Gemma-3: head_dim weights each) or over the
    whole projection (OLMo-2: heads x head_dim and kv_heads x head_dim)."""
    qkv_bias: bool = False
    out_bias: bool = False
    """Bias on the attention output projection."""
    mlp_bias: bool = False
    attention_sinks: bool = False
    """A learned per-head sink logit (gpt-oss): `heads` parameters per layer."""
    parallel_block: bool = False
    """Attention and MLP computed from the same layer input in parallel (Falcon, GPT-J, NeoX)."""
    mla: MLASpec | None = None
    """Multi-head latent attention (DeepSeek-V2/V3) instead of q/k/v projections."""
    moe: MoESpec | None = None
    """Mixture-of-experts MLP in `moe.moe_layers` of the layers (None: dense)."""
    sliding_window: int | None = Field(default=None, gt=0)
    """Local attention window of the `sliding_layers` layers that use one."""
    sliding_layers: int = Field(default=0, ge=0)
    attn_softcap: float | None = Field(default=None, gt=0)
    """Attention logit soft-capping (Gemma-2: transformers then runs eager attention)."""
    logit_softcap: float | None = Field(default=None, gt=0)
    """Final logit soft-capping (Gemma-2): tanh(logits / cap) x cap before the loss."""
    fused_qkv: bool = False
    """One qkv projection tensor (Phi-3, NeoX, Falcon): the same count, one tensor."""
    fused_gate_up: bool = False
    """One gate+up projection tensor (Phi-3)."""
    activation: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_]{0,31}$")
    """The MLP activation the config names (hidden_act, hidden_activation, activation_function,
    activation); None: the family's default (advisor/core/activations.py DEFAULT_ACTIVATION)."""
    position_embedding: Literal["rope", "alibi", "learned"] = "rope"
    max_position_embeddings: int = Field(default=4096, gt=0)
    decoder_layer_class: str = Field(default="LlamaDecoderLayer", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
    """The transformers class of one decoder layer: the FSDP wrap unit in emitted configs."""
    params_override: int | None = Field(default=None, gt=0)
    """Exact parameter count given by the user (`--params`); the shape is then only inferred."""
    source: str = ""
    """Where the shape comes from (preset file, config.json path, or 'inferred from --params')."""

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out = dict(data)
        if not out.get("head_dim") and out.get("heads") and out.get("hidden"):
            if out["hidden"] % out["heads"]:
                raise ValueError(f"heads ({out['heads']}) must divide hidden ({out['hidden']}) "
                                 "unless head_dim is given")
            out["head_dim"] = out["hidden"] // out["heads"]
        if not out.get("norms_per_layer"):
            out["norms_per_layer"] = 1 if out.get("parallel_block") else 2
        return out

    @model_validator(mode="after")
    def _check_shape(self) -> ModelSpec:
        if self.heads % self.kv_heads:
            raise ValueError(f"kv_heads ({self.kv_heads}) must divide heads ({self.heads})")
        if self.moe is not None and self.moe.moe_layers > self.layers:
            raise ValueError(f"moe_layers ({self.moe.moe_layers}) exceeds layers ({self.layers})")
        if self.sliding_layers > self.layers:
            raise ValueError(f"sliding_layers ({self.sliding_layers}) exceeds layers ({self.layers})")
        return self

    @property
    def q_dim(self) -> int:
        """Width of the query projection output: heads * head_dim (hidden for most models)."""
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of the K (or V) projection output: kv_heads * head_dim."""
        return self.kv_heads * self.head_dim

    @property
    def inferred(self) -> bool:
        return self.params_override is not None

    @property
    def moe_layers(self) -> int:
        return self.moe.moe_layers if self.moe else 0

    @property
    def dense_layers(self) -> int:
        return self.layers - self.moe_layers

    # -- parameter counts (elements) ------------------------------------------------------
    @property
    def attention_params(self) -> int:
        """One layer's attention: q, k, v, o (or MLA's projections), biases, q/k norms, sinks."""
        h, q, kv = self.hidden, self.q_dim, self.kv_dim
        if self.mla is not None:
            out = self.mla.params(h, self.heads, self.qkv_bias)
        else:
            out = 2 * h * q + 2 * h * kv + (q + 2 * kv) * self.qkv_bias + h * self.out_bias
        out += {"none": 0, "head": 2 * self.head_dim, "full": q + kv}[self.qk_norm]
        return out + self.heads * self.attention_sinks

    @property
    def dense_mlp_params(self) -> int:
        h, f = self.hidden, self.ffn
        mlp = (3 if self.gated_mlp else 2) * h * f
        return mlp + ((2 * f if self.gated_mlp else f) + h) * self.mlp_bias

    @property
    def norm_params(self) -> int:
        return self.hidden * (2 if self.norm_bias else 1)

    @property
    def dense_layer_params(self) -> int:
        """Parameters of one dense decoder layer: attention, MLP, norms."""
        return self.attention_params + self.dense_mlp_params + self.norms_per_layer * self.norm_params

    @property
    def moe_layer_params(self) -> int:
        """Parameters of one MoE decoder layer (0 for a dense model)."""
        if self.moe is None:
            return 0
        return self.attention_params + self.moe.params(self.hidden) + self.norms_per_layer * self.norm_params

    @property
    def layer_params(self) -> int:
        """The largest decoder layer: the FSDP unit gathered at once."""
        return max(self.dense_layer_params if self.dense_layers else 0, self.moe_layer_params)

    @property
    def all_layer_params(self) -> int:
        """All decoder layers together."""
        return self.dense_layers * self.dense_layer_params + self.moe_layers * self.moe_layer_params

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
        return self.embedding_params + self.all_layer_params + self.head_params

    @property
    def params(self) -> int:
        """Exact parameter count: the user's `--params` if given, else the shape's."""
        return self.params_override or self.shape_params

    @property
    def active_params(self) -> int:
        """Parameters one token uses: all of them for a dense model; for MoE, the routed
        experts a token does not reach are left out (router and shared experts stay in)."""
        if self.moe is None:
            return self.params
        unused = (self.moe.experts - self.moe.top_k) * self.moe.expert_params(self.hidden)
        return self.params - self.moe_layers * unused

    def parameter_tensors(self) -> list[int]:
        """Element counts of the parameter tensors in registration order (embedding, per layer
        the attention projections (+ biases), the MLP or MoE tensors (+ biases) and the norms,
        then the final norm and the untied head). DeepSpeed flattens them in this order before
        partitioning."""
        return [numel for numel, _ in self.parameter_shapes()]

    def parameter_shapes(self) -> list[tuple[int, int]]:
        """(elements, size of dim 0) of each parameter tensor, in registration order: what FSDP2
        shards (dim 0, padded to the shard group)."""
        h = self.hidden
        out: list[tuple[int, int]] = [(self.vocab * h, self.vocab)]
        if self.position_embedding == "learned":
            out.append((self.max_position_embeddings * h, self.max_position_embeddings))
        for i in range(self.layers):
            out += self.layer_shapes(moe=self.moe is not None and i >= self.dense_layers)
        out += [(h, h), (h, h)] if self.norm_bias else [(h, h)]
        if not self.tied_embeddings:
            out.append((self.vocab * h, self.vocab))
        return out

    def layer_shapes(self, moe: bool) -> list[tuple[int, int]]:
        """(elements, dim 0) of one decoder layer's tensors (a dense or an MoE layer)."""
        h, q, kv, f, d = self.hidden, self.q_dim, self.kv_dim, self.ffn, self.head_dim
        norm = [(h, h), (h, h)] if self.norm_bias else [(h, h)]
        if self.mla is not None:
            out = [(self.attention_params, q)]
        else:
            fused = [(h * (q + 2 * kv), q + 2 * kv)]
            out = fused if self.fused_qkv else [(h * q, q), (h * kv, kv), (h * kv, kv)]
            out += [(q + 2 * kv, q + 2 * kv)] * self.qkv_bias + [(q * h, h)] + [(h, h)] * self.out_bias
            out += {"none": [], "head": [(d, d), (d, d)], "full": [(q, q), (kv, kv)]}[self.qk_norm]
            out += [(self.heads, self.heads)] * self.attention_sinks
        if moe and self.moe is not None:
            e, ef = self.moe.experts, self.moe.expert_ffn
            out += [(e * h, e)] + [(e, e)] * self.moe.router_bias
            out += [(e * h * 2 * ef, e), (e * ef * h, e)]
            out += [(e * 2 * ef, e), (e * h, e)] * self.moe.expert_bias
            if self.moe.shared_ffn:
                out.append((3 * h * self.moe.shared_ffn, self.moe.shared_ffn))
            if self.moe.shared_gate:
                out.append((h, 1))
        else:
            mats = 3 if self.gated_mlp else 2
            out += [(2 * h * f, 2 * f), (f * h, h)] if self.fused_gate_up else [(h * f, f)] * mats
            out += ([(f, f)] * (mats - 1) + [(h, h)]) * self.mlp_bias
        return out + norm * self.norms_per_layer

    @property
    def modules_per_layer(self) -> int:
        """Submodules of one decoder layer that own parameters or wrap them (hook targets):
        q, k, v, o, 2-3 MLP matrices, the norms, and the attention / MLP / layer containers."""
        return 4 + (3 if self.gated_mlp else 2) + self.norms_per_layer + 3

    @property
    def largest_layer_params(self) -> int:
        """Largest single module's parameters, as DeepSpeed's ZeRO-3 estimator takes it: the
        embedding matrix for most LLMs, else a decoder layer."""
        return max(self.vocab * self.hidden, self.layer_params)

    # -- FLOPs -----------------------------------------------------------------------------
    @property
    def _attention_widths(self) -> tuple[int, int]:
        """(query/key width, value width) summed over heads: what QK^T and AV multiply."""
        if self.mla is not None:
            return self.heads * self.mla.qk_head_dim, self.heads * self.mla.v_head_dim
        return self.q_dim, self.q_dim

    def mfu_flops_per_token(self, seq_len: int) -> float:
        """Model FLOPs per token for forward + backward: 6 * P_active + 6 * L * (qk + v) * s.

        The MFU convention of PaLM (Chowdhery et al. 2022, appendix B) as used by MosaicML
        llm-foundry: 6 FLOPs per parameter per token (the active parameters of an MoE model),
        plus attention scores and values (2 matmuls x 2 FLOPs x 3 for fwd+bwd, per layer, per
        query/key and value width, per context position), counted over the full s x s square
        regardless of the causal mask or a sliding window: 12 * L * h * s when qk = v = h.
        """
        qk, v = self._attention_widths
        return 6.0 * self.active_params + 6.0 * self.layers * (qk + v) * seq_len

    @property
    def _non_matmul_params(self) -> int:
        """Norm weights (decoder layers, q/k norms, MLA's latent norms, the final norm) and
        attention sinks: parameters that take part in no matmul."""
        per_layer = self.norms_per_layer * self.norm_params + self.heads * self.attention_sinks
        per_layer += {"none": 0, "head": 2 * self.head_dim, "full": self.q_dim + self.kv_dim}[self.qk_norm]
        if self.mla is not None:
            per_layer += self.mla.kv_lora_rank + (self.mla.q_lora_rank or 0)
        return self.layers * per_layer + self.norm_params

    @property
    def matmul_params(self) -> int:
        """Weights (and biases) that take part in a matmul, every expert included: all but the
        token-embedding lookup, learned positions and the non-matmul parameters; a tied
        embedding counts once, as the output head."""
        tied_head = self.vocab * self.hidden if self.tied_embeddings else 0
        return self.params - self.embedding_params - self._non_matmul_params + tied_head

    @property
    def active_matmul_params(self) -> int:
        """Matmul weights one token multiplies: matmul_params less the unused routed experts."""
        return self.matmul_params - (self.params - self.active_params)

    def dense_flops_per_token(self) -> float:
        """Forward + backward FLOPs per token of the weight matmuls a token goes through: 6 per
        active matmul weight (2 forward, 4 backward; Kaplan et al. 2020)."""
        return 6.0 * self.active_matmul_params

    def attention_flops_per_token(self, seq_len: int) -> float:
        """Forward + backward FLOPs per token of the attention scores and values over the full
        s x s square, 6 * (qk + v) * s per layer (a causal kernel may skip half); layers with a
        sliding window see at most `sliding_window` positions."""
        qk, v = self._attention_widths
        local = min(seq_len, self.sliding_window or seq_len)
        spans = (self.layers - self.sliding_layers) * seq_len + self.sliding_layers * local
        return 6.0 * (qk + v) * spans


# `--params` alone: the shape of the public model nearest in size (log scale), its layer count
# refitted so the shape's count is closest to P (P itself stays exact for memory). head_dim 128,
# heads a multiple of 8, the Llama-2 vocabulary (32000) throughout.
#   params   hidden heads kv  ffn     anchor
_ANCHORS = (
    (1.24e9, 2048, 16, 8, 8192),     # Llama-3.2-1B (16 layers; its 32 heads of 64 as 16 of 128)
    (3.21e9, 3072, 24, 8, 8192),     # Llama-3.2-3B (28 layers)
    (6.74e9, 4096, 32, 32, 11008),   # Llama-2-7B (32 layers, multi-head)
    (13.0e9, 5120, 40, 40, 13824),   # Llama-2-13B (40 layers, multi-head)
    (33.7e9, 8192, 64, 8, 22016),    # CodeLlama-34B (48 layers)
    (69.0e9, 8192, 64, 8, 28672),    # Llama-2-70B (80 layers)
    (405.9e9, 16384, 128, 8, 53248),  # Llama-3.1-405B (126 layers)
)
_INFER_VOCAB = 32000
_INFER_HEAD_DIM = 128


def _anchor(params: float) -> tuple[int, int, int, int, str]:
    """(hidden, heads, kv_heads, ffn, what it follows) for a parameter count."""
    if params > _ANCHORS[-1][0] * 1.5:  # past the largest public dense model: grow its aspect
        hidden = max(16384, round((128 * params / 12) ** (1 / 3) / 1024) * 1024)
        return hidden, hidden // _INFER_HEAD_DIM, 8, math.ceil(3.25 * hidden / 256) * 256, \
            "Llama-3.1-405B's aspect, scaled"
    if params < 0.5e9:  # below the smallest anchor: 8 heads of 128
        return 1024, 8, 8, 2816, "8 heads of 128, ffn 2.75 x hidden"
    p, hidden, heads, kv, ffn = min(_ANCHORS, key=lambda a: abs(math.log(params / a[0])))
    return hidden, heads, kv, ffn, f"the {p / 1e9:g}B public shape"


@lru_cache(maxsize=256)
def infer_from_params(params: float) -> ModelSpec:
    """A standard Llama-style shape for a parameter count (the public model nearest in size,
    _ANCHORS), layers chosen so the shape's count is closest to P. The given P stays exact for
    memory. Cached: a ModelSpec is immutable."""
    if not (params > 0) or params > MAX_PARAMS or math.isnan(params):
        raise InvalidInput("params", f"{params:g} is out of range", f"1e6 to {MAX_PARAMS:g}")
    if params < 1e6:
        raise InvalidInput("params", f"{params:g} is too small to be an LLM", f"1e6 to {MAX_PARAMS:g}")
    hidden, heads, kv_heads, ffn, follows = _anchor(params)
    probe = ModelSpec(name="probe", layers=1, hidden=hidden, heads=heads, kv_heads=kv_heads, ffn=ffn,
                      vocab=_INFER_VOCAB)
    non_layer = probe.shape_params - probe.layer_params
    layers = max(1, round((params - non_layer) / probe.layer_params))
    return probe.model_copy(update={
        "name": f"{params / 1e9:g}B (inferred)",
        "layers": layers,
        "params_override": int(params),
        "source": f"inferred from --params: {follows} (hidden {hidden}, {heads} heads of 128, "
                  f"{kv_heads} KV heads, ffn {ffn}), vocab 32000",
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
