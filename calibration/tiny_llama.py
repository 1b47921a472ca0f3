"""A tiny Llama in plain torch, shaped like Hugging Face's `LlamaForCausalLM`, for real CPU runs.

It mirrors transformers' modeling_llama.py wherever that changes what autograd keeps (checked
against transformers 5.18 by tests/test_real_runs.py, saved tensor for saved tensor):
eager `LlamaRMSNorm` (fp32 upcast, normalise, cast back, times weight), q/k/v/o projections
without bias and with grouped-query attention, rotary embeddings computed in fp32 and cast to the
activations' dtype, `sdpa_attention_forward` (torch scaled_dot_product_attention with
`enable_gqa`, output transposed back and made contiguous), a gated SiLU MLP, an untied lm_head
and `ForCausalLMLoss` (logits upcast with `.float()`, labels shifted by padding, mean cross-
entropy). `model_spec` gives the advisor's `ModelSpec` of the same shape, so a measurement on this
module and the advisor's prediction describe the same network. The module knows nothing of
parallelism; the worker scripts in tests/real/ wrap it.

What one layer really keeps for backward (bf16 weights; measured with calibration.measure):
each RMSNorm its fp32 upcast (4 B), the normalised bf16 tensor (2 B) and its output, the
matmuls' input (2 B), plus one fp32 rsqrt per token; attention q and k after RoPE, v, and the
SDPA output (the o_proj input is the same storage: the CPU flash kernel, like the CUDA ones,
writes (b, s, heads, d), so transpose + contiguous is free), plus an fp32 logsumexp per head
and token; the MLP gate, silu(gate), up and their product. RoPE keeps only the shared cos/sin.
That is advisor.core.activations.layer_bytes plus (8 + 4 x heads) B per token. Under autocast with
an fp32 module the residual stream is fp32 and the norms keep more (see tests/test_real_runs.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from advisor.core.model import ModelSpec

IGNORE_INDEX = -100  # transformers' ForCausalLMLoss default


@dataclass(frozen=True, slots=True)
class TinyLlamaConfig:
    """Shape of the tiny model; field names follow advisor's ModelSpec."""

    vocab: int = 512
    """Vocabulary; large next to hidden so the loss term is visible, as in real LLMs."""
    hidden: int = 64
    layers: int = 3
    """Three layers: the first one also keeps the shared rotary tables, the others are clean."""
    heads: int = 4
    kv_heads: int = 2
    """Grouped-query attention: 2 query heads share each key/value head."""
    ffn: int = 176
    """~8/3 * hidden rounded to 16, the Llama ratio."""
    rms_eps: float = 1e-5
    rope_theta: float = 10000.0

    def __post_init__(self) -> None:
        if self.hidden % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide hidden ({self.hidden})")
        if self.heads % self.kv_heads:
            raise ValueError(f"kv_heads ({self.kv_heads}) must divide heads ({self.heads})")
        if (self.hidden // self.heads) % 2:
            raise ValueError("head_dim must be even for rotary embeddings")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def model_spec(cfg: TinyLlamaConfig, name: str = "tiny-llama") -> ModelSpec:
    """The advisor's description of the same network: untied head, RMSNorm, no biases, RoPE."""
    return ModelSpec(name=name, layers=cfg.layers, hidden=cfg.hidden, heads=cfg.heads,
                     kv_heads=cfg.kv_heads, ffn=cfg.ffn, vocab=cfg.vocab, gated_mlp=True,
                     tied_embeddings=False, norm="rmsnorm", position_embedding="rope",
                     source="calibration/tiny_llama.py")


def config_from_spec(spec: ModelSpec) -> TinyLlamaConfig:
    """The module for an advisor shape (Llama family: gated MLP, RMSNorm, RoPE, no biases)."""
    unsupported = [name for name, bad in (
        ("plain MLP", not spec.gated_mlp), ("tied embeddings", spec.tied_embeddings),
        ("LayerNorm", spec.norm != "rmsnorm"), ("parallel block", spec.parallel_block),
        ("non-RoPE positions", spec.position_embedding != "rope"),
        ("biases", spec.norm_bias or spec.qkv_bias or spec.out_bias or spec.mlp_bias)) if bad]
    if unsupported:
        raise ValueError(f"{spec.name}: TinyLlama has no {', '.join(unsupported)}")
    return TinyLlamaConfig(vocab=spec.vocab, hidden=spec.hidden, layers=spec.layers, heads=spec.heads,
                           kv_heads=spec.kv_heads, ffn=spec.ffn)


class RMSNorm(nn.Module):
    """`LlamaRMSNorm`, eager: keeps the fp32 upcast of its input and the normalised tensor."""

    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x.to(dtype)


class RotaryEmbedding(nn.Module):
    """`LlamaRotaryEmbedding` (default rope type): cos/sin in fp32, cast to the input's dtype."""

    def __init__(self, cfg: TinyLlamaConfig):
        super().__init__()
        exponent = torch.arange(0, cfg.head_dim, 2, dtype=torch.float32) / cfg.head_dim
        self.register_buffer("inv_freq", 1.0 / cfg.rope_theta**exponent, persistent=False)

    @torch.no_grad()
    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type=x.device.type, enabled=False):
            freqs = positions[:, :, None].float() * self.inv_freq[None, None, :].float()
            emb = torch.cat((freqs, freqs), dim=-1)
            return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # broadcast over heads
    return x * cos + _rotate_half(x) * sin


class Attention(nn.Module):
    """`LlamaAttention` with `sdpa_attention_forward`: causal, no mask tensor, GQA in the kernel."""

    def __init__(self, cfg: TinyLlamaConfig):
        super().__init__()
        self.cfg = cfg
        kv = cfg.kv_heads * cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden, cfg.hidden, bias=False)
        self.k_proj = nn.Linear(cfg.hidden, kv, bias=False)
        self.v_proj = nn.Linear(cfg.hidden, kv, bias=False)
        self.o_proj = nn.Linear(cfg.hidden, cfg.hidden, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        d = self.cfg.head_dim
        q = self.q_proj(x).view(b, s, -1, d).transpose(1, 2)
        k = self.k_proj(x).view(b, s, -1, d).transpose(1, 2)
        v = self.v_proj(x).view(b, s, -1, d).transpose(1, 2)
        q, k = _apply_rope(q, cos, sin), _apply_rope(k, cos, sin)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        out = out.transpose(1, 2).contiguous().reshape(b, s, -1)
        return self.o_proj(out)


class MLP(nn.Module):
    """`LlamaMLP`: down(silu(gate(x)) * up(x))."""

    def __init__(self, cfg: TinyLlamaConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden, cfg.ffn, bias=False)
        self.up_proj = nn.Linear(cfg.hidden, cfg.ffn, bias=False)
        self.down_proj = nn.Linear(cfg.ffn, cfg.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """`LlamaDecoderLayer`: pre-norm attention and MLP, each with a residual add."""

    def __init__(self, cfg: TinyLlamaConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden, cfg.rms_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden, cfg.rms_eps)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class TinyLlama(nn.Module):
    """`LlamaForCausalLM`: embedding, decoder layers, final norm, untied lm_head, HF loss."""

    def __init__(self, cfg: TinyLlamaConfig):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        self.rotary_emb = RotaryEmbedding(cfg)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.hidden, cfg.rms_eps)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean loss, logits in the compute dtype), as `CausalLMOutputWithPast` holds them."""
        x = self.embed_tokens(input_ids)
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)[None, :]  # (1, s)
        cos, sin = self.rotary_emb(x, positions)
        for layer in self.layers:
            x = layer(x, cos, sin)
        hidden = self.norm(x)  # held until the loss, as HF's BaseModelOutput holds it
        logits = self.lm_head(hidden)
        return causal_lm_loss(logits, labels), logits


def causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """transformers' `ForCausalLMLoss`: fp32 logits, labels shifted left by padding, mean CE."""
    logits = logits.float()
    shifted = F.pad(labels, (0, 1), value=IGNORE_INDEX)[..., 1:].contiguous()
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), shifted.view(-1).to(logits.device),
                           ignore_index=IGNORE_INDEX, reduction="mean")


def sample_batch(cfg: TinyLlamaConfig, micro_batch: int, seq_len: int, seed: int = 0,
                 device: str | torch.device = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Random token ids and labels (= inputs, as in causal LM training)."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, cfg.vocab, (micro_batch, seq_len), generator=gen).to(device)
    return ids, ids.clone()
