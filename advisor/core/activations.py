"""Activation memory: the bytes autograd keeps for backward, per GPU, without tensor parallelism.

Derived per architecture, in the manner of Korthikanti et al. 2022 ("Reducing Activation
Recomputation in Large Transformer Models", section 4.1), whose GPT layer gives
s*b*h*(34 + 5*a*s/h) bytes with dropout and a 4h GeLU MLP. Here each saved tensor of a Hugging
Face decoder layer is counted, with no dropout; e is the bytes of a matmul output (2 in bf16 /
fp16 / fp8 and under autocast, 4 in fp32), r the bytes of the residual stream (the module's
dtype: 4 for an fp32 module under autocast, as DDP runs, else e):

    attention:       q (h), k and v (kv_dim each), attention output (h): e each
    MLP, gated:      gate out, silu(gate), up out, product (ffn each): 4 e ffn
    MLP, plain:      fc1 out, activation out: 2 e ffn
    eager RMSNorm:   fp32 input (4 B) + normalized tensor (r) + output (r), shared by its
                     consumers: 4 + 2r. Under autocast with an fp32 module the normalized and
                     output tensors stay fp32 and each consuming matmul saves its own bf16 cast
                     (autocast caches weight casts, not activation casts): 8 + 2 x consumers
    fused norm / LayerNorm (and --compile): input (r) + output (r), or 4 + 2 x consumers
    eager attention: fp32 softmax (4 B) and its copy (e, none in fp32): (4 + e) * a * s^2

Checked byte for byte against transformers' LlamaForCausalLM (sdpa) and real DDP / FSDP2 /
DeepSpeed runs on CPU (tests/test_real_runs.py), and against FSDPMemTracker
(tests/test_fsdp2_oracle.py). `selective` keeps matmul inputs and attention q/k/v/out,
recomputing norms and pointwise ops; `full` keeps each layer's input and recomputes one layer.
"""

from __future__ import annotations

from advisor.core.model import ModelSpec
from advisor.core.workload import Workload


def element_bytes(workload: Workload) -> int:
    """e: bytes of a saved matmul output."""
    return 4 if workload.precision == "fp32" else 2


def _norm_bytes(model: ModelSpec, workload: Workload, residual: int, consumers: int) -> int:
    """Bytes per hidden element one norm keeps (input side and output) for `consumers`."""
    e = element_bytes(workload)
    autocast = residual > e
    if model.norm == "rmsnorm" and not workload.compile:
        return 8 + 2 * consumers if autocast else 4 + 2 * residual
    return residual + (2 * consumers if autocast else residual)


def _norm_output_bytes(workload: Workload, residual: int, consumers: int) -> int:
    """What the matmuls after a norm keep of its output (selective recomputation)."""
    return 2 * consumers if residual > element_bytes(workload) else residual


def _consumers(model: ModelSpec) -> tuple[int, ...]:
    """Matmuls reading each norm's output: q, k, v; gate and up (or fc1); one norm if parallel."""
    mlp = 2 if model.gated_mlp else 1
    return (3 + mlp,) if model.parallel_block and model.norms_per_layer == 1 else (3, mlp)


def layer_bytes(model: ModelSpec, workload: Workload, residual: int) -> float:
    """Bytes one decoder layer keeps for backward with no checkpointing, per micro-batch."""
    s, b, h, e = workload.seq_len, workload.micro_batch, model.hidden, element_bytes(workload)
    norms = sum(_norm_bytes(model, workload, residual, c) for c in _consumers(model)) * h
    attention = e * (h + 2 * model.kv_dim + h)
    mlp = e * (4 if model.gated_mlp else 2) * model.ffn
    scores = 0.0 if workload.flash_attention else (4 + (e if e < 4 else 0)) * model.heads * s * s * b
    return s * b * (norms + attention + mlp) + scores


def selective_layer_bytes(model: ModelSpec, workload: Workload, residual: int) -> float:
    """Bytes one layer keeps with selective recomputation: the layer input, what the matmuls
    keep of each norm's output, q, k, v, attention output, and the MLP matmul outputs feeding
    the pointwise op (2 x ffn gated, 1 x ffn plain)."""
    s, b, h, e = workload.seq_len, workload.micro_batch, model.hidden, element_bytes(workload)
    norm_outputs = sum(_norm_output_bytes(workload, residual, c) for c in _consumers(model)) * h
    kept = (residual * h + norm_outputs + e * (2 * h + 2 * model.kv_dim)
            + e * (2 if model.gated_mlp else 1) * model.ffn)
    return s * b * kept


def checkpoint_input_bytes(model: ModelSpec, workload: Workload, residual: int) -> float:
    """The layer input a full checkpoint keeps: s * b * h in the residual dtype."""
    return residual * workload.seq_len * workload.micro_batch * model.hidden


def stack_bytes(model: ModelSpec, workload: Workload, residual: int) -> float:
    """Activations of all layers alive at the end of the forward pass, plus the recompute
    working set of one layer during backward for `full` checkpointing."""
    if workload.act_ckpt == "full":
        return (model.layers * checkpoint_input_bytes(model, workload, residual)
                + layer_bytes(model, workload, residual))
    if workload.act_ckpt == "selective":
        return model.layers * selective_layer_bytes(model, workload, residual)
    return model.layers * layer_bytes(model, workload, residual)


def logits_bytes(model: ModelSpec, workload: Workload, residual: int) -> float:
    """Output head and loss at the start of backward, the peak for large vocabularies, plus the
    final norm's saved tensors.
    HF `ForCausalLMLoss` (logits.float() then cross-entropy): the saved fp32 log-softmax (4 B)
    and the two fp32 gradients backward makes from it (4 + 4 B): 12 * s * b * V. (In forward,
    bf16 logits + fp32 upcast + log-softmax are 10 B, less.)
    A fused cross-entropy (`workload.fused_loss`; flash-attn's CrossEntropyLoss keeps the logits
    and a per-row fp32 log-sum-exp, and writes the logits' gradient): 2 elements of the compute
    dtype, 4 * s * b * V in bf16."""
    s, b = workload.seq_len, workload.micro_batch
    final_norm = _norm_bytes(model, workload, residual, consumers=1) * s * b * model.hidden
    per_logit = 2.0 * element_bytes(workload) if workload.fused_loss else 12.0
    return per_logit * s * b * model.vocab + final_norm
