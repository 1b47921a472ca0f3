"""advisor_ac.py: the code changes an advisor plan needs that no config file can make.

Written by `advisor emit` into every plan folder, unchanged (the plan's own settings are in
plan.json under "advisor_ac"). Call it once, after the model is built and before
`accelerator.prepare(model)` or `Trainer(model=model, ...)`:

    import json, advisor_ac
    advisor_ac.apply(model, **json.load(open("plan.json"))["advisor_ac"])

What it does (each one exactly as the advisor's memory model counts it):

- act_ckpt="selective": every `every`-th decoder layer runs under torch's selective activation
  checkpointing (torch.utils.checkpoint with create_selective_checkpoint_contexts): the outputs of
  the matrix multiplies (aten.mm / addmm, the q/k/v/o and MLP projections) and of the attention
  kernel are kept; norms, activation functions, rotary embeddings and casts are recomputed in
  backward. Through transformers' own switch (gradient_checkpointing_enable with a context_fn),
  so FSDP and DeepSpeed see an ordinary non-reentrant checkpoint.
- act_ckpt="full": the same switch without a policy (the layer input is kept, the layer is
  recomputed). FSDP plans set Accelerate's fsdp_activation_checkpointing instead; DDP and
  DeepSpeed plans may use this or TrainingArguments(gradient_checkpointing=True).
- fused_loss=True: the language-model head and the cross-entropy become one chunked operation
  (`ChunkedLinearCrossEntropy`) that never holds the full [tokens, vocab] logits: the forward
  streams over vocabulary chunks keeping a log-sum-exp per token, the backward recomputes each
  chunk's logits and writes that chunk of the head's gradient. `model(input_ids, labels=...)`
  then returns the loss as HF's ForCausalLMLoss computes it (labels shifted, -100 ignored, mean,
  or sum / num_items_in_batch) and no logits. Without labels the head returns logits as before.

Needs torch >= 2.5 (create_selective_checkpoint_contexts) and a transformers model whose decoder
layers are GradientCheckpointingLayer (transformers >= 4.48).
"""

from __future__ import annotations

import types
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

__all__ = ["LOSS_CHUNK_ELEMENTS", "ChunkedLinearCrossEntropy", "apply", "selective_context",
           "vocab_chunk"]

LOSS_CHUNK_ELEMENTS = 2**26
"""Logits computed at once by the fused loss: tokens x vocabulary chunk (256 MiB in fp32).
The advisor's memory model uses the same number (advisor/core/activations.py)."""

_aten = torch.ops.aten
_SAVED_OPS = {_aten.mm.default, _aten.addmm.default}
for _name in ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
              "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu"):
    if hasattr(_aten, _name):
        _SAVED_OPS.add(getattr(_aten, _name).default)


def _policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    return CheckpointPolicy.MUST_SAVE if op in _SAVED_OPS else CheckpointPolicy.PREFER_RECOMPUTE


def selective_context() -> Any:
    """context_fn for torch.utils.checkpoint: keep matmul and attention outputs, recompute the rest."""
    return create_selective_checkpoint_contexts(_policy)


def _decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    from transformers.modeling_layers import GradientCheckpointingLayer
    layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    if not layers:
        raise ValueError(f"{type(model).__name__} has no transformers GradientCheckpointingLayer "
                         "decoder layers: advisor_ac supports transformers causal LMs")
    return layers


def apply(model: torch.nn.Module, act_ckpt: str = "none", every: int = 1,
          fused_loss: bool = False) -> torch.nn.Module:
    """Make `model` train as the plan assumes; returns the same model."""
    if act_ckpt not in ("none", "selective", "full"):
        raise ValueError(f"act_ckpt {act_ckpt!r}: one of none, selective, full")
    if not isinstance(every, int) or every < 1:
        raise ValueError(f"every {every!r}: a positive integer")
    if act_ckpt != "none":
        kwargs: dict[str, Any] = {"use_reentrant": False}
        if act_ckpt == "selective":
            kwargs["context_fn"] = selective_context
        layers = _decoder_layers(model)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)  # type: ignore[operator]
        for i, layer in enumerate(layers):
            layer.gradient_checkpointing = i % every == 0
    if fused_loss:
        _fuse_loss(model)
    return model


def vocab_chunk(tokens: int, vocab: int) -> int:
    """Vocabulary entries per chunk of the fused loss for `tokens` rows (a multiple of 128)."""
    return min(vocab, max(128, LOSS_CHUNK_ELEMENTS // max(tokens, 1) // 128 * 128))


class ChunkedLinearCrossEntropy(torch.autograd.Function):
    """loss = cross_entropy(hidden @ weight.T, labels), never holding the [N, V] logits.

    forward(hidden [N, H], weight [V, H], labels [N] (-100: ignored), divisor, softcap) -> loss.
    Logits are computed in the matmul's dtype and taken to fp32 per chunk, as HF's loss does.
    Saved for backward: hidden, weight, labels and one fp32 log-sum-exp per row. Working set: one
    chunk's fp32 logits (plus its 16-bit matmul output while it is converted, and with soft-capping
    the tanh kept for its derivative) and, in backward, the fp32 gradient of `hidden`."""

    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor,
                divisor: float, softcap: float | None) -> torch.Tensor:
        n, vocab = hidden.shape[0], weight.shape[0]
        step = vocab_chunk(n, vocab)
        run_max = torch.full((n,), float("-inf"), device=hidden.device)
        run_sum = torch.zeros(n, device=hidden.device)
        target = torch.zeros(n, device=hidden.device)
        valid = labels != -100
        for start in range(0, vocab, step):
            logits = _chunk_logits(hidden, weight[start:start + step], softcap)
            inside = valid & (labels >= start) & (labels < start + logits.shape[1])
            rows = inside.nonzero().squeeze(1)
            target[rows] = logits[rows, labels[rows] - start]
            new_max = torch.maximum(run_max, logits.max(dim=1).values)
            run_sum = run_sum * torch.exp(run_max - new_max) + logits.sub_(new_max[:, None]).exp_().sum(1)
            run_max = new_max
            del logits
        lse = run_max + torch.log(run_sum)
        ctx.save_for_backward(hidden, weight, labels, lse)
        ctx.divisor, ctx.softcap, ctx.step = divisor, softcap, step
        return ((lse - target) * valid).sum() / divisor

    @staticmethod
    def backward(ctx: Any, grad_loss: torch.Tensor) -> tuple[Any, ...]:
        hidden, weight, labels, lse = ctx.saved_tensors
        valid = labels != -100
        scale = (grad_loss / ctx.divisor) * valid  # [N]
        grad_hidden = torch.zeros(hidden.shape, dtype=torch.float32, device=hidden.device)
        grad_weight = torch.empty_like(weight) if ctx.needs_input_grad[1] else None
        for start in range(0, weight.shape[0], ctx.step):
            w = weight[start:start + ctx.step]
            probs = _chunk_logits(hidden, w, None)  # raw logits, fp32
            tanh = None
            if ctx.softcap is not None:  # capped = cap * tanh(raw / cap)
                tanh = probs.div_(ctx.softcap).tanh_()
                probs = tanh * ctx.softcap
            probs.sub_(lse[:, None]).exp_()  # softmax; d loss / d logits = softmax - onehot
            inside = valid & (labels >= start) & (labels < start + w.shape[0])
            rows = inside.nonzero().squeeze(1)
            probs[rows, labels[rows] - start] -= 1.0
            probs.mul_(scale[:, None])
            if tanh is not None:
                probs.mul_(tanh.square_().neg_().add_(1.0))
                del tanh
            grad = probs.to(hidden.dtype)  # the matmuls run in the forward's dtype
            del probs
            grad_hidden += grad @ w.to(hidden.dtype)
            if grad_weight is not None:
                grad_weight[start:start + w.shape[0]] = grad.t() @ hidden
            del grad
        return grad_hidden.to(hidden.dtype), grad_weight, None, None, None


def _chunk_logits(hidden: torch.Tensor, w: torch.Tensor, softcap: float | None) -> torch.Tensor:
    logits = F.linear(hidden, w.to(hidden.dtype)).float()
    return logits if softcap is None else logits.div_(softcap).tanh_().mul_(softcap)


class FusedLMHead(torch.nn.Module):
    """The model's lm_head (same Parameter, same name) that computes the loss when given labels."""

    def __init__(self, head: torch.nn.Linear, softcap: float | None) -> None:
        super().__init__()
        if head.bias is not None:
            raise ValueError("fused_loss: an lm_head with a bias is not supported")
        self.weight = head.weight
        self.in_features, self.out_features = head.in_features, head.out_features
        self.softcap = softcap

    def forward(self, hidden: torch.Tensor, labels: torch.Tensor | None = None,
                num_items_in_batch: Any = None) -> torch.Tensor:
        if labels is None:
            logits = F.linear(hidden, self.weight)
            return logits if self.softcap is None else torch.tanh(logits / self.softcap) * self.softcap
        shifted = F.pad(labels, (0, 1), value=-100)[..., 1:].reshape(-1).to(hidden.device)
        if num_items_in_batch is None:
            divisor = float((shifted != -100).sum().clamp(min=1))
        else:
            divisor = float(num_items_in_batch)
        flat = hidden.reshape(-1, hidden.shape[-1])
        if torch.is_autocast_enabled(flat.device.type):
            flat = flat.to(torch.get_autocast_dtype(flat.device.type))
        return ChunkedLinearCrossEntropy.apply(flat, self.weight, shifted, divisor, self.softcap)


def _fuse_loss(model: torch.nn.Module) -> None:
    from transformers.modeling_outputs import CausalLMOutputWithPast
    head = getattr(model, "lm_head", None)
    base = getattr(model, "model", None)
    if not isinstance(head, torch.nn.Linear) or base is None:
        raise ValueError(f"fused_loss: {type(model).__name__} has no `model` + `lm_head` pair "
                         "(a transformers *ForCausalLM)")
    softcap = getattr(model.config, "final_logit_softcapping", None)
    model.lm_head = FusedLMHead(head, softcap)

    def forward(self: Any, input_ids: Any = None, labels: Any = None, num_items_in_batch: Any = None,
                logits_to_keep: int = 0, **kwargs: Any) -> Any:
        kwargs.setdefault("use_cache", False)
        out = self.model(input_ids=input_ids, **kwargs)
        hidden = out.last_hidden_state
        if labels is None:
            keep = slice(-logits_to_keep, None) if logits_to_keep else slice(None)
            return CausalLMOutputWithPast(logits=self.lm_head(hidden[:, keep]),
                                          past_key_values=out.past_key_values)
        loss = self.lm_head(hidden, labels=labels, num_items_in_batch=num_items_in_batch)
        return CausalLMOutputWithPast(loss=loss, logits=None, past_key_values=out.past_key_values)

    model.forward = types.MethodType(forward, model)
