"""Compute time: FLOPs through size-dependent efficiency data, and the optimizer step.

    t = dense FLOPs / (peak(precision) * efficiency * fp8_ratio (if fp8))
        + attention FLOPs * causal_skip / (peak(attention precision) * efficiency
                                           * attention_efficiency[arch])
    efficiency = gemm_efficiency[arch](hidden) * t_mb / (t_mb + half_tokens)
                 * compile_speedup (if compiled)
    attention precision = bf16 under fp8 (Transformer Engine casts the linear layers only)

Dense FLOPs are the weight matmuls the GPU executes (`ModelSpec.dense_flops_per_token`);
attention (`attention_flops_per_token`) runs in its own kernel at its own efficiency (flash
attention forward + backward reaches a lower fraction of peak than large GEMMs; Dao 2023) and,
with flash attention, skips the masked half of the causal square. Forward is one third of
forward + backward (Kaplan et al. 2020, 2 vs 4 FLOPs per weight).
Full checkpointing re-runs the forward inside backward; selective re-runs norms and pointwise
ops (a prior fraction of forward).
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.core.context import Context
from advisor.core.workload import Precision, optimizer_step_bytes_per_param


@dataclass(frozen=True, slots=True)
class MicroBatchTime:
    forward_s: float
    backward_s: float
    """Includes recomputation."""


def _kernel_efficiency(ctx: Context) -> float:
    """Achieved fraction of the peak of the precision a kernel runs in, fp8 ratio excluded."""
    cp = ctx.priors.compute
    w = ctx.workload
    arch = ctx.cluster.gpu.architecture
    eff = ctx.priors.gemm_efficiency[arch](ctx.model.hidden)
    tokens = w.micro_batch * w.seq_len
    eff *= tokens / (tokens + cp.micro_batch_half_tokens)
    if w.compile:
        eff *= cp.compile_speedup
    return min(eff, 0.95)


def _fp8_factor(ctx: Context) -> float:
    """fp8 GEMMs reach a lower fraction of their (higher) peak than bf16 ones."""
    return ctx.priors.compute.fp8_efficiency_ratio if ctx.workload.precision == "fp8" else 1.0


def efficiency(kernel: float, ctx: Context) -> float:
    """Achieved fraction of the dense peak of the weight matmuls: the kernel efficiency, times
    the fp8 ratio under fp8."""
    return kernel * _fp8_factor(ctx)


def dense_efficiency(ctx: Context) -> float:
    """Achieved fraction of the dense peak for this model, micro-batch and precision."""
    return efficiency(_kernel_efficiency(ctx), ctx)


def attention_precision(precision: Precision) -> Precision:
    """The precision attention runs in: fp8 recipes (Transformer Engine's default) cast only
    the linear layers' GEMMs to fp8; flash attention stays in bf16."""
    return "bf16" if precision == "fp8" else precision


def micro_batch_time(ctx: Context) -> MicroBatchTime:
    """Forward and backward seconds for one micro-batch on one GPU."""
    w = ctx.workload
    cp = ctx.priors.compute
    gpu = ctx.cluster.gpu
    skip = cp.flash_causal_skip if w.flash_attention else 1.0
    tokens = w.micro_batch * w.seq_len
    kernel = _kernel_efficiency(ctx)
    dense_rate = gpu.peak_flops(w.precision) * efficiency(kernel, ctx)
    attention_rate = (gpu.peak_flops(attention_precision(w.precision)) * kernel
                      * ctx.priors.attention_efficiency[gpu.architecture])
    seconds = (ctx.model.dense_flops_per_token() * tokens / dense_rate
               + ctx.model.attention_flops_per_token(w.seq_len) * skip * tokens / attention_rate)
    forward = seconds / 3
    recompute = {"none": 0.0, "selective": cp.selective_recompute_fraction, "full": 1.0}[w.act_ckpt]
    return MicroBatchTime(forward_s=forward, backward_s=2 * forward + recompute * forward)


def hardware_flops_per_token(ctx: Context) -> float:
    """MFU FLOPs plus the recomputed forward (full checkpointing: 2P + 4*L*h*s more), for HFU."""
    m, s = ctx.model, ctx.workload.seq_len
    mfu = m.mfu_flops_per_token(s)
    if ctx.workload.act_ckpt == "full":
        return mfu + mfu / 3
    return mfu


def optimizer_step_s(ctx: Context, params: float) -> float:
    """Memory-bound optimizer step over `params` parameters on one GPU."""
    if params <= 0:
        return 0.0
    w = ctx.workload
    per_param = optimizer_step_bytes_per_param(w.precision, w.optimizer, w.master_weights)
    return params * per_param / (ctx.cluster.hbm_bytes_per_s * ctx.priors.compute.hbm_efficiency)
