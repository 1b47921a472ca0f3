"""Activation memory: the bytes autograd keeps for backward, per GPU, without tensor parallelism.

Derived per architecture, in the manner of Korthikanti et al. 2022 ("Reducing Activation
Recomputation in Large Transformer Models", section 4.1), whose GPT layer gives
s*b*h*(34 + 5*a*s/h) bytes with dropout and a 4h GeLU MLP. Here each saved tensor of a
Hugging Face decoder layer is counted (bf16, 2 bytes per element), with no dropout:

    attention block: norm tensors, q (h), k and v (kv_dim each), attention output (h)
    MLP, gated:      gate out, silu(gate), up out, product (ffn each) = 4 x ffn
    MLP, plain:      fc1 out, activation out (ffn each) = 2 x ffn
    norms:           eager HF RMSNorm keeps its fp32 input upcast (4 B) and the normalized
                     bf16 tensor (2 B) plus its output; LayerNorm and fused/compiled norms keep
                     the input (2 B) and the output (2 B)
    eager attention: softmax in fp32 (4 B) plus its bf16 copy (2 B): 6 * a * s^2 per sample

`selective` keeps matmul inputs and attention q/k/v/out, recomputing norms and pointwise ops;
`full` keeps only each layer's input (2*s*b*h) and recomputes one layer during backward.
"""

from __future__ import annotations

from advisor.model import ModelSpec
from advisor.workload import Workload

BF16 = 2  # bytes per saved activation element


def _norm_elem_bytes(model: ModelSpec, workload: Workload) -> int:
    """Bytes per element a norm keeps for backward, besides its output (see module doc)."""
    if model.norm == "rmsnorm" and not workload.compile:
        return 4 + 2  # fp32 upcast of the input, normalized bf16 tensor before the weight
    return 2


def layer_bytes(model: ModelSpec, workload: Workload) -> float:
    """Bytes one decoder layer keeps for backward with no checkpointing, per micro-batch."""
    s, b, h = workload.seq_len, workload.micro_batch, model.hidden
    norms = 1 if model.parallel_block else 2
    norm_elems = norms * (_norm_elem_bytes(model, workload) + BF16) * h  # input side + output
    attention = BF16 * (h + 2 * model.kv_dim + h)  # q, k, v, attention output
    mlp = BF16 * (4 if model.gated_mlp else 2) * model.ffn
    per_token = norm_elems + attention + mlp
    scores = 0.0 if workload.flash_attention else 6.0 * model.heads * s * s * b
    return s * b * per_token + scores


def selective_layer_bytes(model: ModelSpec, workload: Workload) -> float:
    """Bytes one layer keeps with selective recomputation: the layer input, each norm's output
    (matmul inputs), q, k, v, attention output and the MLP matmul outputs feeding the
    pointwise op (2 x ffn gated, 1 x ffn plain)."""
    s, b, h = workload.seq_len, workload.micro_batch, model.hidden
    norms = 1 if model.parallel_block else 2
    kept = h + norms * h + (h + 2 * model.kv_dim + h) + (2 if model.gated_mlp else 1) * model.ffn
    return BF16 * s * b * kept


def checkpoint_input_bytes(model: ModelSpec, workload: Workload) -> float:
    """The layer input a full checkpoint keeps: s * b * h in bf16."""
    return BF16 * workload.seq_len * workload.micro_batch * model.hidden


def stack_bytes(model: ModelSpec, workload: Workload) -> float:
    """Activations of all layers alive at the end of the forward pass, plus the recompute
    working set of one layer during backward for `full` checkpointing."""
    if workload.act_ckpt == "full":
        return model.layers * checkpoint_input_bytes(model, workload) + layer_bytes(model, workload)
    if workload.act_ckpt == "selective":
        return model.layers * selective_layer_bytes(model, workload)
    return model.layers * layer_bytes(model, workload)


def logits_bytes(model: ModelSpec, workload: Workload) -> float:
    """Output head and loss: bf16 logits (2 B), their fp32 upcast for the loss (4 B) and the
    fp32 log-softmax output kept for backward (4 B): 10 * s * b * V bytes at the loss, the
    peak of the forward pass for large vocabularies (HF `ForCausalLMLoss`). Plus the final
    norm's saved input and output."""
    s, b = workload.seq_len, workload.micro_batch
    final_norm = (_norm_elem_bytes(model, workload) + BF16) * s * b * model.hidden
    return 10.0 * s * b * model.vocab + final_norm
