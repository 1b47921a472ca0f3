"""Activation memory: the bytes autograd keeps for backward, per GPU, without tensor parallelism.

Derived per architecture, in the manner of Korthikanti et al. 2022 ("Reducing Activation
Recomputation in Large Transformer Models", section 4.1), whose GPT layer gives
s*b*h*(34 + 5*a*s/h) bytes with dropout and a 4h GeLU MLP. Here each saved tensor of a Hugging
Face decoder layer (transformers 5.18; modules below are under transformers/models/) is counted;
e is the bytes of a matmul output (2 in bf16 / fp16 / fp8 and under autocast, 4 in fp32), r the
bytes of the residual stream (the module's dtype: 4 for an fp32 module under autocast, as DDP
runs, else e). Per token, per layer:

  norms, per hidden element (a norm's output is kept once, by the matmuls that read it)
    eager RMSNorm     fp32 input copy (4 B) + normalized (r) + output (r) when a matmul reads it
                      (llama/modeling_llama.py LlamaRMSNorm.forward, lines 62-67: `w * x.to(dtype)`
                      keeps x in the module dtype); the normalized tensor is fp32 where the weight
                      multiplies in fp32 (attention.FP32_NORM: gemma2/modeling_gemma2.py lines 58-63,
                      olmo2, gpt_oss: `(w * x).to(dtype)`). Under autocast with an fp32 module the
                      consuming matmuls each save their own bf16 cast (autocast caches weight casts,
                      not activation casts): 2 x consumers
    LayerNorm, fused  input (r) + output (r, or 2 x consumers under autocast); two LayerNorms of
    (--compile)       one input (gpt_neox/modeling_gpt_neox.py GPTNeoXLayer, line 271) keep it once
    layouts           pre (Llama: before attention and MLP); sandwich (Gemma2DecoderLayer.forward,
                      lines 304-335: also after each, their outputs feed the residual add, not kept);
                      post (olmo2/modeling_olmo2.py Olmo2DecoderLayer, lines 315 and 321: after each,
                      so q/k/v and gate/up keep the residual stream itself, r); parallel (Falcon,
                      NeoX: one or two norms of the layer input)
  attention           advisor/core/attention.py: q, k, v as the kernel keeps them (K/V repeated to
                      every head under a mask or in eager), its output (and o_proj's copy), the
                      sliding-window mask, eager's s x s scores, q/k norms, MLA's latents
  MLP, gated          gate out, act(gate), up out, product: 4 e ffn (llama/modeling_llama.py
                      LlamaMLP.forward, line 174), + the activation's own tensors (ACTIVATION_EXTRA);
                      plain: fc1 out and act out, 2 e ffn (+ extra); GPT-2's residual dropouts keep
                      1 B masks (DROPOUT_MASKS)
  MoE (grouped_mm)    integrations/moe.py grouped_mm_experts_forward (lines 388-497), S = s * b *
                      top_k token-expert pairs: the gathered tokens (S x h), gate_up out (S x 2 f),
                      act(gate) and the product (S x f each), down out (S x h, kept by the
                      routing-weight multiply); the router's fp32 probabilities (tokens x experts:
                      mixtral/modeling_mixtral.py line 107) and int64 indices (~40 B per pair); the
                      shared experts as a dense gated MLP; the first `dense_layers` keep a dense MLP
  loss                logits_bytes: the fp32 log-softmax and its gradients; Gemma-2's final
                      soft-capping keeps tanh's output; the final norm

Checked tensor by tensor against transformers' own classes under FakeTensorMode with FSDP2
(tests/test_family_activations.py over tests/data/oracle/families.json: every family within 0.2%
per layer and at the start of backward), byte for byte against LlamaForCausalLM on real DDP /
FSDP2 / DeepSpeed runs on CPU (tests/test_real_runs.py), and against FSDPMemTracker
(tests/test_fsdp2_oracle.py). `selective` is the plan's own (templates/bundle/advisor_ac.py: the
layer input and its matmuls' and SDPA's outputs, the rest recomputed; measured for Llama and Qwen3
by tests/test_advisor_ac.py); `full` keeps each layer's input and recomputes one layer (neither is
checked per family against FSDP2 yet). Left out everywhere (under 0.1% of a
layer): the kernels' fp32 logsumexp (4 B per head per token), RMSNorm's rsqrt (4 B per token), the
rotary tables. `check_modelled` refuses what this model does not describe.
"""

from __future__ import annotations

from advisor.core import attention
from advisor.core.errors import InvalidInput
from advisor.core.model import ModelSpec
from advisor.core.workload import Workload

DEFAULT_ACTIVATION = {"gpt2": "gelu_new", "gpt_neox": "gelu", "falcon": "gelu", "mpt": "gelu",
                      "gemma2": "gelu_pytorch_tanh", "gemma3_text": "gelu_pytorch_tanh"}
"""The MLP activation of each family's config class when the config does not name one (GPT2Config
activation_function, GPTNeoXConfig hidden_act, FalconConfig activation, MptMLP's nn.GELU,
Gemma2/3 hidden_activation); every other family: silu."""
ACTIVATION_EXTRA = {"silu": 0, "swish": 0, "gelu": 0, "gelu_pytorch_tanh": 0, "relu": 0,
                    "gelu_new": 3, "gelu_fast": 6, "gelu_python": 3}
"""Intermediate-size tensors an activation keeps besides its input (transformers/activations.py):
the kernels (silu, F.gelu, relu) keep only their input; NewGELUActivation (line 66) keeps
0.5 x, tanh's output and 1 + tanh (torch.pow keeps x); FastGELUActivation (line 113) keeps six."""
GPT_OSS_EXPERT_EXTRA = 3
"""gpt-oss' clamped SwiGLU (modeling_gpt_oss.GptOssExperts._apply_gate): it keeps clamp(gate),
gate * alpha's sigmoid, their product and clamp(up) + 1 where silu(gate) * up keeps act(gate):
three expert-size tensors more per token-expert pair."""
FP32_ROUTER = frozenset({"deepseek_v2", "deepseek_v3"})
"""Routers that run in fp32 (modeling_deepseek_v3.DeepseekV3TopkRouter.forward: F.linear of
hidden_states.float() and weight.float()): an fp32 copy of the input (4 h B per token) and of the
weight (4 experts h B per layer)."""
DROPOUT_MASKS = {"gpt2": 2}
"""Residual dropouts per layer that stay on in training with the config class's defaults
(GPT2Config resid_pdrop 0.1: attn.resid_dropout, mlp.dropout); CUDA's fused dropout keeps a
bool mask, 1 B per element. Attention dropout runs inside flash attention (an RNG state)."""


LOSS_CHUNK_ELEMENTS = 2**26
"""Logits the plan's fused loss computes at once, tokens x a vocabulary chunk
(templates/bundle/advisor_ac.py LOSS_CHUNK_ELEMENTS and vocab_chunk: the same figure)."""


def vocab_chunk(tokens: int, vocab: int) -> int:
    """Vocabulary entries per chunk of the plan's fused loss for `tokens` rows (a multiple of 128)."""
    return min(vocab, max(128, LOSS_CHUNK_ELEMENTS // max(tokens, 1) // 128 * 128))


def element_bytes(workload: Workload) -> int:
    """e: bytes of a saved matmul output."""
    return 4 if workload.precision == "fp32" else 2


def activation(model: ModelSpec) -> str:
    """The MLP's activation: ModelSpec.activation when a reader sets it, else the family's."""
    named = getattr(model, "activation", None)  # the config's hidden_act / hidden_activation
    return str(named) if named else DEFAULT_ACTIVATION.get(model.family, "silu")


def check_modelled(model: ModelSpec, workload: Workload) -> None:
    """Refuse what this activation model does not describe (InvalidInput naming the field):
    an activation function whose saved tensors are not counted; Falcon with ALiBi (FalconModel
    folds the bias into its causal mask, one heads x s x s tensor in the module dtype that every
    layer's SDPA keeps: falcon/modeling_falcon.py lines 770-785, not modelled); and MPT past its
    ALiBi table (MptModel builds the bias for max_seq_len positions; a longer sequence does not
    run)."""
    act = "custom" if model.family == "gpt_oss" else activation(model)
    if act != "custom" and act not in ACTIVATION_EXTRA:
        raise InvalidInput("model", f"the activation {act!r} of {model.name} is not modelled "
                           "(its saved tensors are not counted)", ", ".join(sorted(ACTIVATION_EXTRA)))
    if model.family == "falcon" and model.position_embedding == "alibi":
        raise InvalidInput("model", f"{model.name}: Falcon with ALiBi keeps its bias as a heads x s x s "
                           "mask, which the activation model does not describe", "Falcon with rotary "
                           "embeddings (alibi: false)")
    if model.family == "mpt" and model.position_embedding == "alibi" \
            and workload.seq_len > model.max_position_embeddings:
        positions = model.max_position_embeddings
        raise InvalidInput("seq_len", f"{model.name} builds its ALiBi bias for {positions} positions",
                           f"1 to {positions}")


def _norm_bytes(model: ModelSpec, workload: Workload, residual: int, consumers: int) -> int:
    """Bytes per hidden element one norm keeps (input side, normalized, and its output for
    `consumers` matmuls; 0 consumers: its output feeds a residual add and is not kept)."""
    e = element_bytes(workload)
    autocast = residual > e
    output = _norm_output_bytes(workload, residual, consumers) if consumers else 0
    if model.norm == "rmsnorm" and not workload.compile:
        normalized = 4 if autocast or model.family in attention.FP32_NORM else residual
        return 4 + normalized + output
    return residual + output


def _norm_output_bytes(workload: Workload, residual: int, consumers: int) -> int:
    """What the matmuls reading a tensor keep of it: the tensor (r), or under autocast their own
    bf16 casts (2 B each)."""
    return 2 * consumers if residual > element_bytes(workload) else residual


def _consumers(model: ModelSpec, moe: bool) -> tuple[int, int]:
    """Matmuls reading the attention input (q, k, v; one fused qkv; MLA's q and kv_a) and the MLP
    input (gate and up, one fused gate_up or fc1; an MoE's router and experts, + shared gate, up)."""
    attn = 2 if model.mla is not None else 1 if model.fused_qkv else 3
    if moe:
        return attn, 2 + (2 if model.moe and model.moe.shared_ffn else 0)
    return attn, 1 if model.fused_gate_up or not model.gated_mlp else 2


def _norms(model: ModelSpec, workload: Workload, residual: int, moe: bool) -> int:
    """Bytes per hidden element of one layer's norms (and, with norms after the blocks only, the
    residual stream its matmuls keep)."""
    ca, cm = _consumers(model, moe)

    def nb(c: int) -> int:
        return _norm_bytes(model, workload, residual, c)

    if model.parallel_block:
        if model.norms_per_layer == 1:
            return nb(ca + cm)
        fused = model.norm == "layernorm" or workload.compile
        return nb(ca) + nb(cm) - (residual if fused else 0)
    if model.norm_position == "post":  # Olmo2DecoderLayer: q/k/v and gate/up read the stream
        return 2 * nb(0) + _norm_output_bytes(workload, residual, ca) + _norm_output_bytes(
            workload, residual, cm)
    return nb(ca) + nb(cm) + (2 * nb(0) if model.norm_position == "sandwich" else 0)


def _activation_extra(model: ModelSpec) -> int:
    return ACTIVATION_EXTRA.get(activation(model), 0)


def _dense_mlp(model: ModelSpec, e: int, ffn: int) -> int:
    """Per token: gate out, act(gate), up out, product (gated) or fc1 out, act out (plain),
    + the activation's own tensors. A fused gate_up output is one tensor of 2 ffn: the same."""
    return e * ffn * ((4 if model.gated_mlp else 2) + _activation_extra(model))


def _moe_mlp(model: ModelSpec, workload: Workload, residual: int) -> float:
    """Per token of one MoE layer (see the module docstring)."""
    moe, e, h = model.moe, element_bytes(workload), model.hidden
    assert moe is not None
    k, f = moe.top_k, moe.expert_ffn
    extra = GPT_OSS_EXPERT_EXTRA if model.family == "gpt_oss" else _activation_extra(model)
    experts = k * (residual * h + e * h + e * f * (4 + extra))
    # router: probabilities over all experts (fp32 softmax / sigmoid; gpt-oss: softmax of the
    # top-k logits in the module dtype) and ~40 B of int64 / fp32 indices and weights per pair
    router = (e * k if model.family == "gpt_oss" else 4 * moe.experts) + 40 * k
    router += 4 * h if model.family in FP32_ROUTER else 0
    shared = _dense_mlp(model, e, moe.shared_ffn) if moe.shared_ffn else 0
    shared += e * (h + 1) if moe.shared_gate else 0  # sigmoid(gate(x)) * shared_out keeps both
    return experts + router + shared


def _layer_kinds(model: ModelSpec) -> tuple[list[tuple[int, bool]], list[tuple[int, bool]]]:
    """(count, moe) of the MLP kinds and (count, sliding) of the attention kinds."""
    mlps = [(n, m) for n, m in ((model.dense_layers, False), (model.moe_layers, True)) if n]
    attns = [(n, sl) for n, sl in ((model.layers - model.sliding_layers, False),
                                   (model.sliding_layers, True)) if n]
    return mlps, attns


def _mlp_part(model: ModelSpec, workload: Workload, residual: int, moe: bool) -> float:
    """One layer's norms + MLP, per micro-batch."""
    s, b, e, h = workload.seq_len, workload.micro_batch, element_bytes(workload), model.hidden
    per_token: float = _norms(model, workload, residual, moe) * h + h * DROPOUT_MASKS.get(model.family, 0)
    if moe:
        per_token += _moe_mlp(model, workload, residual)
        router_weight = 4 * model.moe.experts * h if model.moe and model.family in FP32_ROUTER else 0
        return s * b * per_token + router_weight
    return s * b * (per_token + _dense_mlp(model, e, model.ffn))


def _attention_part(model: ModelSpec, workload: Workload, sliding: bool) -> float:
    s, b = workload.seq_len, workload.micro_batch
    return s * b * attention.bytes_per_token(model, workload, sliding)


def layer_bytes(model: ModelSpec, workload: Workload, residual: int, *, moe: bool | None = None,
                sliding: bool | None = None) -> float:
    """Bytes one decoder layer keeps for backward with no checkpointing, per micro-batch: a MoE
    or dense one, with or without a sliding window; None: the largest kind the model has."""
    mlps, attns = _layer_kinds(model)
    mlp = max(_mlp_part(model, workload, residual, m) for _, m in mlps if moe in (None, m))
    attn = max(_attention_part(model, workload, sl) for _, sl in attns if sliding in (None, sl))
    return mlp + attn


def _selective(model: ModelSpec, workload: Workload, residual: int, moe: bool) -> float:
    """Per token, what selective recomputation keeps of one layer: the layer's input (the
    checkpoint's), and the outputs of its matmuls and attention kernel, as the plan's
    templates/bundle/advisor_ac.py runs it (torch.utils.checkpoint with
    create_selective_checkpoint_contexts: MUST_SAVE aten.mm / addmm and the SDPA kernels, every
    other op recomputed in backward): attention.selective_bytes_per_token; the MLP's gate and up
    (or fc1, or the fused gate_up) and down outputs; an MoE's router logits (fp32 for
    FP32_ROUTER) and shared experts' projections (the routed experts' grouped_mm is recomputed).
    Norms, activations, rotary embeddings, masks, casts and eager's s x s scores are recomputed."""
    e, h = element_bytes(workload), model.hidden
    kept = residual * h + attention.selective_bytes_per_token(model, workload)
    if not moe or model.moe is None:
        return kept + e * ((2 if model.gated_mlp else 1) * model.ffn + h)
    router = (4 if model.family in FP32_ROUTER else e) * model.moe.experts
    shared = e * (2 * model.moe.shared_ffn + h) if model.moe.shared_ffn else 0
    return kept + router + shared + (e if model.moe.shared_gate else 0)


def selective_layer_bytes(model: ModelSpec, workload: Workload, residual: int, *,
                          moe: bool | None = None) -> float:
    """Bytes one layer keeps with selective recomputation (_selective), per micro-batch; a MoE
    or dense one, None: the larger the model has."""
    s, b = workload.seq_len, workload.micro_batch
    mlps, _ = _layer_kinds(model)
    return s * b * max(_selective(model, workload, residual, m) for _, m in mlps if moe in (None, m))


def checkpoint_input_bytes(model: ModelSpec, workload: Workload, residual: int) -> float:
    """The layer input a full checkpoint keeps: s * b * h in the residual dtype."""
    return residual * workload.seq_len * workload.micro_batch * model.hidden


def _all_layers(model: ModelSpec, workload: Workload, residual: int) -> float:
    """Every layer's bytes with no checkpointing: the MLP kinds (dense first, then MoE) and the
    attention kinds (global, sliding) add up independently, so their counts are enough."""
    mlps, attns = _layer_kinds(model)
    return (sum(n * _mlp_part(model, workload, residual, m) for n, m in mlps)
            + sum(n * _attention_part(model, workload, sl) for n, sl in attns))


def stack_bytes(model: ModelSpec, workload: Workload, residual: int) -> float:
    """Activations of all layers alive at the end of the forward pass, plus the recompute
    working set of one (the largest) layer during backward for `full` checkpointing."""
    if workload.act_ckpt == "full":
        return (model.layers * checkpoint_input_bytes(model, workload, residual)
                + layer_bytes(model, workload, residual))
    if workload.act_ckpt == "selective":
        s, b = workload.seq_len, workload.micro_batch
        mlps, _ = _layer_kinds(model)
        return s * b * sum(n * _selective(model, workload, residual, m) for n, m in mlps)
    return _all_layers(model, workload, residual)


def final_norm_bytes(model: ModelSpec, workload: Workload, residual: int) -> float:
    """The final norm's saved tensors (its output read by the head), per micro-batch."""
    s, b = workload.seq_len, workload.micro_batch
    return _norm_bytes(model, workload, residual, consumers=1) * s * b * model.hidden


def logits_bytes(model: ModelSpec, workload: Workload, residual: int) -> float:
    """Output head and loss at the start of backward, the peak for large vocabularies, plus the
    final norm's saved tensors.
    HF `ForCausalLMLoss` (logits.float() then cross-entropy): the saved fp32 log-softmax (4 B)
    and the two fp32 gradients backward makes from it (4 + 4 B): 12 * s * b * V. (In forward,
    bf16 logits + fp32 upcast + log-softmax are 10 B, less.) Final-logit soft-capping (Gemma-2,
    modeling_gemma2.Gemma2ForCausalLM.forward lines 527-530: tanh(logits / cap) * cap) keeps
    tanh's output (e) through the loss backward: 12 + e.
    The fused loss (`workload.fused_loss`): the plan's chunked linear cross-entropy
    (chunked_loss_bytes)."""
    s, b = workload.seq_len, workload.micro_batch
    final_norm = final_norm_bytes(model, workload, residual)
    if workload.fused_loss:
        return chunked_loss_bytes(model, workload, residual) + final_norm
    per_logit = 12.0 + (element_bytes(workload) if model.logit_softcap else 0)
    return per_logit * s * b * model.vocab + final_norm


def chunked_loss_bytes(model: ModelSpec, workload: Workload, residual: int) -> float:
    """The peak of the plan's fused loss (templates/bundle/advisor_ac.py ChunkedLinearCrossEntropy,
    working in place on each chunk), the head's gradient aside (a `grads` term), per micro-batch,
    T = s x b tokens, C = vocab_chunk(T, V):
        one chunk's fp32 logits (4 B) and their 16-bit cast for the matmuls (e), plus tanh's
        output (4 B) kept for its derivative under final-logit soft-capping: (4 + e [+ 4]) T C;
        the fp32 gradient of the hidden states it accumulates: 4 T h;
        its 16-bit copy of the hidden states when the module is wider than the matmuls
        (autocast over an fp32 module): e T h;
        the fp32 log-sum-exp, the shifted int64 labels and the row scales and masks: 20 T.
    Measured with MemTracker (tests/test_advisor_ac.py test_fused_loss_peak)."""
    tokens = workload.seq_len * workload.micro_batch
    e = element_bytes(workload)
    per_chunk = 4 + e + (4 if model.logit_softcap else 0)
    cast = e if residual > e else 0
    return (per_chunk * tokens * vocab_chunk(tokens, model.vocab)
            + (4 + cast) * tokens * model.hidden + 20.0 * tokens)
