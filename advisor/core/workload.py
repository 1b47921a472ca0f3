"""Workload: what one training step does (batch, sequence, precision, optimizer, checkpointing).

Byte counts per parameter for each precision and optimizer live here, once, with their source.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Precision = Literal["bf16", "fp16", "fp32", "fp8"]
OptimizerName = Literal["adamw", "adam8bit", "sgd"]
ActCkpt = Literal["none", "selective", "full"]

PRECISIONS: tuple[Precision, ...] = ("bf16", "fp16", "fp32", "fp8")
OPTIMIZERS: tuple[OptimizerName, ...] = ("adamw", "adam8bit", "sgd")
ACT_CKPTS: tuple[ActCkpt, ...] = ("none", "selective", "full")
MAX_SEQ_LEN = 1_048_576
MAX_MICRO_BATCH = 4096
MAX_GRAD_ACCUM = 65536


class Workload(BaseModel):
    """One concrete training step per GPU: every field decided (the search fills the open ones)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    seq_len: int = Field(default=4096, gt=0, le=MAX_SEQ_LEN)
    """Tokens per sample."""
    micro_batch: int = Field(default=1, gt=0, le=MAX_MICRO_BATCH)
    """Samples per GPU per forward/backward."""
    grad_accum: int = Field(default=1, gt=0, le=MAX_GRAD_ACCUM)
    """Micro-batches per optimizer step."""
    precision: Precision = "bf16"
    """Compute precision. bf16/fp16/fp8 keep fp32 master weights (mixed precision); fp32 is pure."""
    master_weights: bool = True
    """Mixed precision's fp32 copies: master weights, fp32 gradients for the step and fp32
    optimizer moments. False: everything stays in the 16-bit dtype (a model loaded in bf16 and
    trained without mixed precision, e.g. Accelerate FSDP before 0.30 with a bf16 checkpoint, the
    HF blog "From DeepSpeed to FSDP and Back Again"'s memory-constrained mode): 2 + 2 + 4 B per
    parameter with AdamW instead of 16, at a numerical cost. DeepSpeed always keeps fp32 copies."""
    optimizer: OptimizerName = "adamw"
    act_ckpt: ActCkpt = "none"
    """Activation checkpointing: none, selective (recompute norms, activations and attention
    internals; keep matmul inputs), or full (keep each layer's input only)."""
    flash_attention: bool = True
    """Memory-efficient attention (no s x s scores kept, causal blocks skipped)."""
    compile: bool = False
    """torch.compile: fused norms and pointwise ops (less activation memory, higher efficiency)."""
    sync_each_micro_batch: bool = False
    """Reduce gradients after every micro-batch instead of once per optimizer step (Accelerate's
    `GradientAccumulationPlugin(sync_each_batch=True)`; what Composer / llm-foundry FSDP always
    does). With accumulation, FSDP then keeps only its sharded gradients (no unsharded buffer)
    and reduce-scatters every micro-batch; DDP all-reduces every micro-batch. DeepSpeed ZeRO
    reduces every micro-batch either way."""
    fused_loss: bool = False
    """A fused cross-entropy kernel that reads the 16-bit logits without an fp32 copy
    (flash-attn's `CrossEntropyLoss`, llm-foundry's default): the loss holds the logits and
    their gradient, 2 elements, instead of HF's fp32 upcast (see activations.logits_bytes)."""

    def tokens_per_step(self, data_parallel: int) -> int:
        """Global batch in tokens: micro_batch x seq_len x grad_accum x data-parallel ranks."""
        return self.micro_batch * self.seq_len * self.grad_accum * data_parallel


@dataclass(frozen=True, slots=True)
class ParamBytes:
    """Bytes per parameter of each copy a mixed-precision trainer keeps.

    Mixed precision (Micikevicius et al. 2018; ZeRO paper section 3.1): a 16-bit working copy of
    the weights and gradients, an fp32 master copy inside the optimizer. fp8 training
    (Transformer Engine) keeps the same bf16 weights and fp32 master; fp8 casts are transient.
    Pure fp32 has no separate master copy; neither has pure 16-bit training (no master weights).
    """

    compute: int
    """Working copy of the weights used in forward/backward."""
    grad: int
    """Gradient of the working copy."""
    master: int
    """fp32 master weights held by the optimizer (0 when the working copy is the only one)."""

    @property
    def optimizer_element(self) -> int:
        """Bytes per element of what the optimizer steps: the fp32 master copy, or the working
        copy when it is the only one (pure fp32, pure 16-bit); its moments and step gradient
        are kept in the same dtype. Also what DDP's module and FSDP's shards hold."""
        return self.master or self.compute


@cache
def param_bytes(precision: Precision, master_weights: bool = True) -> ParamBytes:
    if precision == "fp32":
        return ParamBytes(compute=4, grad=4, master=0)
    return ParamBytes(compute=2, grad=2, master=4 if master_weights else 0)


def optimizer_state_bytes(optimizer: OptimizerName, element: int = 4) -> int:
    """Optimizer state bytes per parameter, excluding the master weights, for moments of
    `element` bytes (torch keeps them in the parameters' dtype: 2 in pure 16-bit training).

    AdamW: first and second moments, 8 B in fp32 (Kingma & Ba; the ZeRO paper's K=12 is these
    8 plus the 4-byte master copy). 8-bit Adam (bitsandbytes, Dettmers et al. 2022): two 1-byte
    moments, block-wise scales are <1% and ignored. SGD with momentum: one buffer, 4 B in fp32.
    """
    return {"adamw": 2 * element, "adam8bit": 2, "sgd": element}[optimizer]


def optimizer_step_bytes_per_param(precision: Precision, optimizer: OptimizerName,
                                   master_weights: bool = True) -> int:
    """HBM bytes read + written per parameter by one optimizer step (memory-bound kernel).

    Read the stepped weights, states and gradient; write weights and states; with a master
    copy, write the 16-bit working copy too. AdamW mixed: 4+8+4 read, 4+8 write, 2 write = 30 B.
    Pure bf16: 2+4+2 read, 2+4 write = 14 B.
    """
    pb = param_bytes(precision, master_weights)
    e = pb.optimizer_element
    states = optimizer_state_bytes(optimizer, e)
    return (e + states + e) + (e + states) + (pb.compute if pb.master else 0)
