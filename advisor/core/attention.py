"""What one decoder layer's attention keeps for backward, per token, by the kernel transformers
runs (a helper of advisor/core/activations.py; the bytes of a micro-batch are these times s * b).

transformers 5.18, `integrations/sdpa_attention.py` `sdpa_attention_forward`: K and V are
repeated to every query head (`repeat_kv`, lines 17-26) unless `use_gqa_in_sdpa` (lines 29-36):
no attention mask, and K's and V's head dims equal and <= 256. A mask exists on the layers with a
sliding window once the sequence reaches the window (`masking_utils._ignore_causal_mask_sdpa`,
line 268: kv_length >= local_attention_size); SDPA converts the boolean mask to the query's dtype
per call (ATen `convert_boolean_attn_mask`) and the kernel saves that copy: s * s * e bytes per
masked layer, per sequence, not shared between layers. Without a mask the kernels run causal
with no mask at all.

SDPA (flash / memory-efficient) saves q, k, v and its output (+ a per-row fp32 logsumexp, left out
as the Llama model leaves it out: 4 x heads bytes per token); the output is laid out like q
(`torch/_meta_registrations.py` `meta__scaled_dot_product_flash_attention_for_cpu`: empty_like(q),
as CUDA's flash_api.cpp `empty_like(q)`), so `transpose(1, 2).contiguous()` before o_proj is free
unless q is a fresh contiguous tensor: rotary embedding applied by `torch.cat` (partial rotary:
phi3/modeling_phi3.py lines 195-196, gpt_neox/modeling_gpt_neox.py lines 149-150) makes q
contiguous and o_proj then saves its own copy of the output. The rotary mul keeps cos and sin
only, so the projections' own outputs are not kept once rotated (llama/modeling_llama.py
apply_rotary_pos_emb, line 138); v is the v_proj output's view, or the fused qkv output's, which
it keeps whole.
"""

from __future__ import annotations

from typing import Literal

from advisor.core.model import ModelSpec
from advisor.core.workload import Workload

Kernel = Literal["sdpa", "math", "eager", "eager_softcap", "eager_sinks"]

CAT_ROPE = frozenset({"phi3", "gpt_neox"})
"""Families whose apply_rotary_pos_emb ends in torch.cat: q and k come out contiguous."""
NO_SDPA = frozenset({"mpt"})
"""Families whose transformers class has no SDPA path (`_supports_sdpa` unset): eager attention
(gpt-oss too, see `kernel`)."""
FP32_NORM = frozenset({"gemma2", "gemma3_text", "olmo2", "gpt_oss"})
"""RMSNorms that multiply by the weight in fp32 before casting back, `(w * x).to(dtype)`
(gemma2/modeling_gemma2.py Gemma2RMSNorm.forward, lines 58-63; Olmo2RMSNorm; GptOssRMSNorm):
the normalized tensor they keep is fp32, not the module dtype (Llama: `w * x.to(dtype)`)."""
MAX_GQA_HEAD_DIM = 256  # sdpa_attention.use_gqa_in_sdpa


def kernel(model: ModelSpec, workload: Workload) -> Kernel:
    """The attention transformers runs for this model with its default implementation.

    - gpt-oss has no SDPA support (gpt_oss/modeling_gpt_oss.py line 387): eager with the sink
      logit concatenated to the scores (eager_attention_forward, lines 235-262).
    - Falcon-7B (multi-query, `modeling_falcon.FalconAttention.forward`, lines 311-392) passes its
      single K/V head to F.scaled_dot_product_attention without repeating it: no flash or
      memory-efficient kernel takes unequal head counts, so SDPA's math path runs, upcast to fp32
      (the default `allow_fp16_bf16_reduction_math_sdp(False)`).
    - Gemma-2 defaults to SDPA (`_supports_sdpa = True`), which drops the attention soft-capping
      silently; `flash_attention=False` asks for eager, where soft-capping keeps tanh's output
      (gemma2/modeling_gemma2.py eager_attention_forward, lines 203-206).
    - MPT has no SDPA support: eager (mpt/modeling_mpt.py MptAttention, lines 108-127; the ALiBi
      bias is added to the scores, which keeps nothing).
    - otherwise SDPA; `flash_attention=False`: transformers' eager attention.
    """
    if model.attention_sinks:
        return "eager_sinks"
    if model.family in NO_SDPA:
        return "eager"
    if model.family == "falcon" and model.kv_heads == 1 < model.heads:
        return "math"
    if not workload.flash_attention:
        return "eager_softcap" if model.attn_softcap and model.family == "gemma2" else "eager"
    return "sdpa"


ALWAYS_MASKED = frozenset({"falcon"})
"""FalconModel materializes the causal mask always (falcon/modeling_falcon.py lines 763-769:
create_causal_mask(..., allow_is_causal_skip=False)), so SDPA runs masked on every layer."""


def masked(model: ModelSpec, workload: Workload, sliding: bool) -> bool:
    """An SDPA layer that gets a mask tensor: a sliding-window layer past its window (see the
    module doc), or every layer of a family that always builds the mask."""
    if kernel(model, workload) != "sdpa":
        return False
    return model.family in ALWAYS_MASKED or (
        sliding and model.sliding_window is not None and workload.seq_len >= model.sliding_window)


def repeated(model: ModelSpec, workload: Workload, sliding: bool) -> bool:
    """K and V repeated to every query head: eager always (`eager_attention_forward` calls
    repeat_kv), SDPA when use_gqa_in_sdpa says no (a mask, or head_dim > 256). One K/V head
    (Gemma-3-1B) repeats as a view: repeat_kv's expand + reshape merges a size-1 dim, no copy."""
    if model.kv_heads in (1, model.heads):
        return False
    k = kernel(model, workload)
    if k == "math":
        return False
    return k != "sdpa" or masked(model, workload, sliding) or model.head_dim > MAX_GQA_HEAD_DIM


def _qk_norm_bytes(model: ModelSpec, e: int) -> int:
    """q/k RMSNorm (Qwen3 and Gemma-3 per head, OLMo-2 over the whole projection): the fp32 copy
    of its input (4 B) and the normalized tensor (fp32 for FP32_NORM families, else e); the output
    goes into the rotary mul with cos/sin, which keeps only cos and sin."""
    if model.qk_norm == "none":
        return 0
    return (4 + (4 if model.family in FP32_NORM else e)) * (model.q_dim + model.kv_dim)


def _mla_bytes(model: ModelSpec, e: int) -> float:
    """DeepseekV2/V3Attention (deepseek_v3/modeling_deepseek_v3.py line 361): q_a_proj ->
    q_a_layernorm (fp32 input 4 + normalized e + output e, kept by q_b_proj) -> q_b_proj (its
    output is q_states after the in-place rotary slice: heads x qk_head_dim); kv_a_layernorm on
    the latent (4 + e + e per element); k_states (cat of k_nope and the shared rotary key, heads x
    qk_head_dim); v is a view of kv_b_proj's output, which it keeps whole (heads x (nope + v));
    the kernel's output (heads x v_head_dim). On CUDA SDPA picks the memory-efficient kernel (qk
    and v head dims differ, so no flash): no s x s tensor."""
    mla = model.mla
    assert mla is not None
    qk, v = model.heads * mla.qk_head_dim, model.heads * mla.v_head_dim
    norms = (4 + 2 * e) * (mla.kv_lora_rank + (mla.q_lora_rank or 0))
    return norms + e * (2 * qk + model.heads * (mla.qk_nope_head_dim + mla.v_head_dim) + v)


def _scores_bytes(model: ModelSpec, e: int, k: Kernel, s: int) -> float:
    """Per token, the s x s tensors one layer keeps (heads x s of them per token).
    eager (llama/modeling_llama.py eager_attention_forward, line 208): the fp32 softmax (4 B)
    and its cast to the query dtype kept by the matmul with V (e; none in fp32); soft-capped
    (Gemma-2's eager) also tanh's output (e). Sinks (gpt-oss, lines 252-258): the softmax runs
    in the query dtype over s + 1 columns (e), and max() keeps its int64 index per row (8 B per
    head per token). SDPA math (fp32): the fp32 softmax."""
    a = model.heads
    cast = e if e < 4 else 0
    if k == "eager":
        return (4 + cast) * a * s
    if k == "eager_softcap":
        return (4 + cast + e) * a * s
    if k == "eager_sinks":
        return e * a * (s + 1) + 8 * a
    return 4 * a * s  # math


def bytes_per_token(model: ModelSpec, workload: Workload, sliding: bool) -> float:
    """What one layer's attention keeps per token, from the q/k/v projections' outputs to the
    input of o_proj (the attention input itself is a norm's output, counted with the norms)."""
    e = 4 if workload.precision == "fp32" else 2
    s, k = workload.seq_len, kernel(model, workload)
    scores = 0.0 if k == "sdpa" else _scores_bytes(model, e, k, s)
    if model.mla is not None:
        return _mla_bytes(model, e) + scores
    q, kv = model.q_dim, model.kv_dim
    norms = _qk_norm_bytes(model, e)
    if k == "math":  # fp32 copies of q (scaled), k and v at their own head counts, the fp32
        # softmax, and o_proj's copy of the output cast back (Falcon's dense input)
        return norms + 4 * (q + 2 * kv) + e * q + scores
    rep = repeated(model, workload, sliding)
    k_width = q if rep else kv
    rope = model.position_embedding == "rope"
    if model.fused_qkv and not rope:  # q, k, v are views of the fused output (GPT-2, MPT)
        qkv = e * (q + 2 * kv) + (2 * e * q if rep else 0)
    elif model.fused_qkv:  # rotary q and k are new; v's view keeps the fused output whole
        qkv = e * (q + k_width) + e * (q if rep else q + 2 * kv)
    else:
        qkv = e * (q + 2 * k_width)
    if k == "sdpa":
        out = e * q * (2 if model.family in CAT_ROPE else 1)
        mask = e * s if masked(model, workload, sliding) else 0
        return norms + qkv + out + mask
    # eager: the matmul's output is not kept, o_proj keeps the contiguous copy (e * q)
    return norms + qkv + e * q + scores


def selective_bytes_per_token(model: ModelSpec, workload: Workload) -> float:
    """What selective recomputation keeps of one layer's attention per token: the outputs of its
    matmuls (q, k, v or the fused qkv, MLA's q_a / q_b / kv_a / kv_b, o_proj: aten.mm / addmm)
    and of the SDPA kernel (its output; eager and SDPA's math path are bmm and softmax, which are
    recomputed), as templates/bundle/advisor_ac.py's policy (`_SAVED_OPS`) keeps them."""
    e = 4 if workload.precision == "fp32" else 2
    h, a = model.hidden, model.heads
    if model.mla is not None:
        mla = model.mla
        q = (mla.q_lora_rank or 0) + a * mla.qk_head_dim
        kv = mla.kv_lora_rank + mla.qk_rope_head_dim + a * (mla.qk_nope_head_dim + mla.v_head_dim)
        out = a * mla.v_head_dim
        return e * (q + kv + h + (out if kernel(model, workload) == "sdpa" else 0))
    out = model.q_dim if kernel(model, workload) == "sdpa" else 0
    return e * (model.q_dim + 2 * model.kv_dim + h + out)
