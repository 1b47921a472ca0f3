"""The parts of a decoder layer that differ between model families: multi-head latent attention
(DeepSeek-V2/V3) and mixture-of-experts MLPs (Mixtral, Qwen3-MoE, DeepSeek, gpt-oss).

Counts follow the transformers modules (transformers 5: routed experts fused into 3D
parameters, `gate_up_proj` [experts, hidden, 2 x ffn] and `down_proj` [experts, ffn, hidden]);
tests/test_families.py checks every family against transformers' own model built on the meta
device.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class MLASpec(_Strict):
    """Multi-head latent attention (DeepseekV2Attention / DeepseekV3Attention): queries through
    an optional low-rank `q_a_proj` -> norm -> `q_b_proj`, keys and values from one compressed
    latent (`kv_a_proj_with_mqa` -> norm -> `kv_b_proj`) plus a shared rotary key."""

    q_lora_rank: int | None = Field(default=None, gt=0)
    """Rank of the query compression; None: one q_proj."""
    kv_lora_rank: int = Field(gt=0)
    qk_nope_head_dim: int = Field(gt=0)
    qk_rope_head_dim: int = Field(gt=0)
    v_head_dim: int = Field(gt=0)

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    def params(self, hidden: int, heads: int, bias: bool) -> int:
        """q (direct, or a + norm + b), kv_a (latent + rope key), its norm, kv_b, o (+ biases)."""
        q_out = heads * self.qk_head_dim
        if self.q_lora_rank is None:
            q = hidden * q_out
        else:
            r = self.q_lora_rank  # q_a_proj (+ bias), q_a_layernorm, q_b_proj
            q = hidden * r + r * bias + r + r * q_out
        kv_a = hidden * (self.kv_lora_rank + self.qk_rope_head_dim)
        kv_a += (self.kv_lora_rank + self.qk_rope_head_dim) * bias
        kv_b = self.kv_lora_rank * heads * (self.qk_nope_head_dim + self.v_head_dim)
        out = heads * self.v_head_dim * hidden + hidden * bias
        return q + kv_a + self.kv_lora_rank + kv_b + out


class MoESpec(_Strict):
    """A mixture-of-experts MLP: a router picks `top_k` of `experts` routed experts per token;
    `shared_experts` run on every token. Gated (SwiGLU-style) experts."""

    experts: int = Field(gt=1, le=4096)
    """Routed experts per MoE layer."""
    top_k: int = Field(gt=0, le=64)
    """Routed experts each token uses."""
    expert_ffn: int = Field(gt=0)
    """Intermediate size of one routed expert."""
    shared_ffn: int = Field(default=0, ge=0)
    """Intermediate size of the shared expert MLP (all shared experts as one, as transformers
    builds them: DeepSeek's n_shared_experts x moe_intermediate_size); 0: none."""
    shared_gate: bool = False
    """A sigmoid gate (hidden -> 1) on the shared expert's output (Qwen2-MoE)."""
    moe_layers: int = Field(gt=0)
    """Decoder layers whose MLP is the MoE (the others keep a dense MLP of `ModelSpec.ffn`)."""
    expert_bias: bool = False
    """Biases on the experts' projections (gpt-oss)."""
    router_bias: bool = False
    """A bias on the router (gpt-oss)."""

    def expert_params(self, hidden: int) -> int:
        """One routed expert: gate and up (hidden x 2 ffn) and down (ffn x hidden), + biases."""
        f = self.expert_ffn
        return 3 * hidden * f + (2 * f + hidden) * self.expert_bias

    def params(self, hidden: int) -> int:
        """Router + routed experts + shared experts (+ gate) of one MoE layer."""
        router = self.experts * hidden + self.experts * self.router_bias
        shared = 3 * hidden * self.shared_ffn + hidden * self.shared_gate
        return router + self.experts * self.expert_params(hidden) + shared

    def active_params(self, hidden: int) -> int:
        """What one token uses: the router, `top_k` routed experts and the shared experts."""
        return self.params(hidden) - (self.experts - self.top_k) * self.expert_params(hidden)
