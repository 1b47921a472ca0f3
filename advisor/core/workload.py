"""Workload: what one training step does (batch, sequence, precision, optimizer, checkpointing).

Byte counts per parameter for each precision and optimizer live here, once, with their source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from advisor.core.units import parse_count

Precision = Literal["bf16", "fp16", "fp32", "fp8"]
OptimizerName = Literal["adamw", "adam8bit", "sgd"]
ActCkpt = Literal["none", "selective", "full"]

PRECISIONS: tuple[Precision, ...] = ("bf16", "fp16", "fp32", "fp8")
OPTIMIZERS: tuple[OptimizerName, ...] = ("adamw", "adam8bit", "sgd")
ACT_CKPTS: tuple[ActCkpt, ...] = ("none", "selective", "full")
MAX_SEQ_LEN = 1_048_576
MAX_MICRO_BATCH = 4096
MAX_GRAD_ACCUM = 65536


def _whole_count(v: Any) -> Any:
    """`4k` / `32K` / `128k` (binary: 4,096 tokens) or a plain integer, for sequence lengths."""
    if not isinstance(v, str):
        return v
    value = parse_count(v, binary=True)
    if not math.isfinite(value) or value != int(value):
        raise ValueError(f"{v!r} is not a whole number of tokens (e.g. 4096, 4k, 32K)")
    return int(value)


SeqLen = Annotated[int, BeforeValidator(_whole_count)]
_WORKLOAD: dict[str, Any] = {"x-group": "workload"}  # where the CLI and the form show the field


class WorkloadOptions(BaseModel):
    """The workload's fixed inputs: the request takes them as they are (a field added here is a
    request field, a CLI flag and a form field with no other edit)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True,
                              allow_inf_nan=False)

    seq_len: SeqLen = Field(default=4096, gt=0, le=MAX_SEQ_LEN, json_schema_extra=_WORKLOAD)
    """Tokens per sample, e.g. 4096 or 4k (K = 1024 here)."""
    optimizer: OptimizerName = Field(default="adamw", json_schema_extra=_WORKLOAD)
    """adamw, adam8bit (bitsandbytes) or sgd."""
    master_weights: bool = Field(default=True, json_schema_extra=_WORKLOAD)
    """Keep mixed precision's fp32 master weights, gradients and moments; false: pure 16-bit
    training, everything in the 16-bit dtype (a model loaded in bf16 and trained without mixed
    precision, e.g. Accelerate FSDP before 0.30 with a bf16 checkpoint, the HF blog "From
    DeepSpeed to FSDP and Back Again"'s memory-constrained mode): 2 + 2 + 4 B per parameter
    with AdamW instead of 16, at a numerical cost. DDP and FSDP only (DeepSpeed keeps fp32)."""
    flash_attention: bool = Field(default=True, json_schema_extra=_WORKLOAD)
    """Memory-efficient attention (flash / sdpa: no s x s scores kept, causal blocks skipped);
    false: eager attention."""
    compile: bool = Field(default=False, json_schema_extra=_WORKLOAD)
    """torch.compile: fused norms and pointwise ops (less activation memory, higher efficiency)."""
    fused_loss: bool = Field(default=False, json_schema_extra=_WORKLOAD)
    """A fused cross-entropy kernel that reads the 16-bit logits without an fp32 copy
    (flash-attn's `CrossEntropyLoss`, Liger Kernel's, llm-foundry's default): the loss holds the
    logits and their gradient, 2 elements, instead of HF's fp32 upcast (activations.logits_bytes)."""


class Workload(WorkloadOptions):
    """One concrete training step per GPU: every field decided (the search fills the open ones)."""

    micro_batch: int = Field(default=1, gt=0, le=MAX_MICRO_BATCH)
    """Samples per GPU per forward/backward."""
    grad_accum: int = Field(default=1, gt=0, le=MAX_GRAD_ACCUM)
    """Micro-batches per optimizer step."""
    precision: Precision = "bf16"
    """Compute precision. bf16/fp16/fp8 keep fp32 master weights (mixed precision); fp32 is pure."""
    act_ckpt: ActCkpt = "none"
    """Activation checkpointing: none, selective (recompute norms, activations and attention
    internals; keep matmul inputs), or full (keep each layer's input only)."""
    sync_each_micro_batch: bool = False
    """Reduce gradients after every micro-batch instead of once per optimizer step (Accelerate's
    `GradientAccumulationPlugin(sync_each_batch=True)`; what Composer / llm-foundry FSDP always
    does). With accumulation, FSDP then keeps only its sharded gradients (no unsharded buffer)
    and reduce-scatters every micro-batch; DDP all-reduces every micro-batch. DeepSpeed ZeRO
    reduces every micro-batch either way."""

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
