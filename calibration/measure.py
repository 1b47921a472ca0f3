"""Byte counters for real runs: what one rank holds in parameters, gradients, optimizer state and
communication buffers, and what autograd keeps for backward.

Every count is in bytes of *storage*, each storage counted once (views of one flat buffer, as
DeepSpeed and FSDP2 keep them, are one allocation). DTensors count their local shard.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

# -- storages ---------------------------------------------------------------------------------


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def tensors_in(obj: Any) -> list[torch.Tensor]:
    """Tensors inside nested lists, tuples and dicts (None and other objects skipped)."""
    if torch.is_tensor(obj):
        return [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, list | tuple):
        return [t for item in obj for t in tensors_in(item)]
    return []


def storage_bytes(tensors: Iterable[torch.Tensor | None]) -> int:
    """Bytes of the distinct storages behind `tensors` (None skipped)."""
    seen: dict[int, int] = {}
    for t in tensors:
        if t is not None:
            st = _local(t).untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


@dataclass(frozen=True, slots=True)
class StateBytes:
    """Per-rank model states as the engine holds them, bytes."""

    params: int
    grads: int
    optimizer: int


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """The optimizer's own state (AdamW: exp_avg, exp_avg_sq and a scalar step per tensor)."""
    return storage_bytes(tensors_in(list(optimizer.state.values())))


def module_states(module: nn.Module, optimizer: torch.optim.Optimizer) -> StateBytes:
    """Parameters, their .grad and the optimizer state: DDP's replica or FSDP2's local shards."""
    params = list(module.parameters())
    return StateBytes(params=storage_bytes(params), grads=storage_bytes(p.grad for p in params),
                      optimizer=optimizer_state_bytes(optimizer))


def ddp_bucket_bytes(ddp: nn.parallel.DistributedDataParallel) -> int:
    """Bytes of DDP's flat gradient buckets, from the reducer's own logging data."""
    sizes = ddp._get_ddp_logging_data()["bucket_sizes"]
    return sum(int(s) for s in str(sizes).split(","))


def fsdp2_unsharded_grad_bytes(model: nn.Module) -> int:
    """Unsharded gradients FSDP2 keeps while gradient sync is off (set_requires_gradient_sync
    (False)): the unsharded parameters' .grad, or their accumulated copy in reduce_dtype."""
    from torch.distributed.fsdp import FSDPModule

    grads = []
    for module in model.modules():
        group = module._get_fsdp_state()._fsdp_param_group if isinstance(module, FSDPModule) else None
        for fsdp_param in group.fsdp_params if group else ():
            unsharded = getattr(fsdp_param, "_unsharded_param", None)
            grads += [fsdp_param.unsharded_accumulated_grad,
                      None if unsharded is None else unsharded.grad]
    return storage_bytes(grads)


# DeepSpeed's ZeRO optimizers keep their state under these attributes (deepspeed/runtime/zero/
# stage_1_and_2.py: DeepSpeedZeroOptimizer; stage3.py: DeepSpeedZeroOptimizer_Stage3). Stage 3's
# 16-bit partitions are the parameters' `ds_tensor`s, views of fp16_partitioned_groups_flat.
_DS_ATTRS = {
    "params16": ("bit16_groups_flat", "fp16_partitioned_groups_flat"),
    "master32": ("single_partition_of_fp32_groups", "fp32_partitioned_groups_flat"),
    "grads16": ("averaged_gradients", "all_grad_tensors", "grads_in_partition",
                "grad_partitions_flat_buffer"),
}


def deepspeed_snapshot(zero_optimizer: Any, module: nn.Module) -> dict[str, int]:
    """What a DeepSpeed ZeRO optimizer holds right now, bytes by kind.

    params16: 16-bit parameters (stages 1-2 the whole flat model, stage 3 this rank's partition);
    persistent16: stage 3 parameters kept whole (below stage3_param_persistence_threshold);
    master32: fp32 master partition; moments: the torch optimizer's state;
    grads16: gradient buffers in the accumulation dtype (param.grad, partitions, accumulators);
    grads32: the fp32 gradient partition the optimizer steps on (exists during step());
    buckets: the reduce (ipg) bucket buffers.
    """
    def attrs(names: Sequence[str]) -> list[torch.Tensor]:
        return [t for n in names for t in tensors_in(getattr(zero_optimizer, n, None))]

    params = list(module.parameters())
    master = attrs(_DS_ATTRS["master32"])
    persistent = [p.data for p in params if getattr(p, "ds_persist", False)]
    buckets = [t for b in getattr(zero_optimizer, "ipg_buckets", {}).values()
               for t in tensors_in(getattr(b, "buffer", None))]
    return {
        "params16": storage_bytes(attrs(_DS_ATTRS["params16"])),
        "persistent16": storage_bytes(persistent),
        "master32": storage_bytes(master),
        "moments": optimizer_state_bytes(zero_optimizer.optimizer),
        "grads16": storage_bytes(attrs(_DS_ATTRS["grads16"]) + [p.grad for p in params]),
        "grads32": storage_bytes(m.grad for m in master),
        "buckets": storage_bytes(buckets),
    }


# -- activations -------------------------------------------------------------------------------

_VIEWS = {"TBackward0", "ToCopyBackward0", "ViewBackward0", "TransposeBackward0", "PermuteBackward0",
          "ExpandBackward0", "UnsafeViewBackward0", "AliasBackward0"}


def _weight_kind(t: torch.Tensor) -> str | None:
    """'param' for a parameter or a view of one, 'copy' for a cast of one (autocast's bf16
    weight), None for an activation: follow single-input view/cast nodes to an AccumulateGrad."""
    if t.grad_fn is None:
        return "param" if t.requires_grad else None
    fn, cast = t.grad_fn, False
    while fn is not None and fn.name() in _VIEWS:
        cast = cast or fn.name() == "ToCopyBackward0"
        inputs = [f for f, _ in fn.next_functions if f is not None]
        if len(inputs) != 1:
            return None
        fn = inputs[0]
    if fn is None or "AccumulateGrad" not in fn.name():
        return None
    return "copy" if cast else "param"


class _LiveBytes(TorchDispatchMode):
    """Peak bytes of the storages that ops allocate while `active()` and that are alive at once.

    Not counted: an output sharing an input's storage (a view); a cast of a parameter (autocast's
    weight copy, a buffer in the model, not an activation); and while it backs a parameter, a
    storage the engine allocated to gather one (ZeRO-3 fetches the head's weight in its hook).
    """

    def __init__(self, active: Callable[[], bool], params: Callable[[], Iterable[torch.Tensor]]):
        super().__init__()
        self.active, self.params = active, params
        self.peak = 0
        self._live: dict[int, tuple[int, weakref.ref]] = {}  # storage address -> (bytes, ref)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not self.active():
            return out
        inputs = tensors_in([*args, *(kwargs or {}).values()])
        if func is torch.ops.aten._to_copy.default and _weight_kind(inputs[0]) == "param":
            return out
        seen = {t.untyped_storage().data_ptr() for t in inputs}
        for t in tensors_in(out if isinstance(out, list | tuple) else [out]):
            st = t.untyped_storage()
            ptr = st.data_ptr()
            if ptr in self._live or ptr in seen or st.nbytes() == 0:
                continue
            self._live[ptr] = (st.nbytes(), weakref.ref(st, lambda _, p=ptr: self._live.pop(p, None)))
        params = {_local(p).untyped_storage().data_ptr() for p in self.params()}
        self.peak = max(self.peak, sum(n for ptr, (n, _) in self._live.items() if ptr not in params))
        return out


@dataclass
class SavedActivations:
    """Bytes autograd saves for backward during one forward, by scope, storages deduplicated.

    Scopes: "embed" (before the first layer), "layers.<i>", "head" (after the last layer: final
    norm, lm_head, loss). A storage is charged to the scope that saves it first. Parameters and
    casts of parameters (autocast's bf16 weight copies) are kept apart from activations.
    `head_peak_bytes` is the peak of what the head's ops allocate and keep alive at once:
    saved tensors plus transients such as the logits' fp32 upcast.
    """

    activation_bytes: dict[str, int] = field(default_factory=dict)
    weight_copy_bytes: int = 0
    head_peak_bytes: int = 0


class ActivationProbe:
    """Context manager around one forward (and its loss): fills a `SavedActivations`.

        probe = ActivationProbe(model.layers, model)
        with probe:
            loss, logits = model(ids, labels)
        probe.result.activation_bytes["layers.1"]
    """

    def __init__(self, layers: Sequence[nn.Module], model: nn.Module):
        self.layers = list(layers)
        self.model = model
        self.result = SavedActivations()
        self._scope = "embed"
        self._seen: set[int] = set()
        self._handles: list[Any] = []

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        # Parameters are skipped before dedup: FSDP2 and ZeRO-3 free a gathered parameter's
        # storage after the layer, and the allocator hands its address to a later activation.
        kind = _weight_kind(t)
        st = t.untyped_storage()
        if kind != "param" and st.data_ptr() not in self._seen and st.nbytes() > 0:
            self._seen.add(st.data_ptr())
            if kind is None:
                saved = self.result.activation_bytes
                saved[self._scope] = saved.get(self._scope, 0) + st.nbytes()
            else:
                self.result.weight_copy_bytes += st.nbytes()
        return t

    def _set_scope(self, name: str):
        def hook(*_):
            self._scope = name
        return hook

    def __enter__(self) -> ActivationProbe:
        for i, layer in enumerate(self.layers):
            self._handles.append(layer.register_forward_pre_hook(self._set_scope(f"layers.{i}")))
        self._handles.append(self.layers[-1].register_forward_hook(self._set_scope("head")))
        self._saved = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._live = _LiveBytes(lambda: self._scope == "head", self.model.parameters)
        self._saved.__enter__()
        self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._live.__exit__(*exc)
        self._saved.__exit__(*exc)
        for h in self._handles:
            h.remove()
        self.result.head_peak_bytes = self._live.peak
