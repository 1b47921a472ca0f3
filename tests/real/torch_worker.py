"""DDP and FSDP2 training steps of the tiny Llama on 2 CPU ranks (gloo), measured.

    torchrun --nproc-per-node 2 -m tests.real.torch_worker OUT.json

Cases (keys of the result):
  ddp-bf16    DDP around the fp32 module, forward under torch.autocast(bf16): Accelerate's
              MULTI_GPU with mixed_precision=bf16. Gradient accumulation 1.
  ddp-fp32    the same without autocast (pure fp32).
  fsdp2-bf16  fully_shard per decoder layer + root, MixedPrecisionPolicy(param_dtype=bf16,
              reduce_dtype=bf16) as Accelerate sets it; sharded parameters stay fp32. Gradient
              accumulation 2 with set_requires_gradient_sync(False) on the first micro-batch.
  fsdp2-bf16-sync-each
              the same, gradients reduce-scattered every micro-batch (Accelerate's
              sync_each_batch=True: the sync is never turned off).
FSDP2 cases record the gradients a rank holds when the last micro-batch's backward starts
(after its forward): the sharded .grad (local shards) and the unsharded gradients no_sync keeps.
"""

from __future__ import annotations

import sys
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path

import torch
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.nn.parallel import DistributedDataParallel

from calibration.measure import (
    ActivationProbe,
    ddp_bucket_bytes,
    fsdp2_unsharded_grad_bytes,
    module_states,
    storage_bytes,
)
from calibration.tiny_llama import TinyLlama, TinyLlamaConfig, sample_batch
from tests.real.common import MICRO_BATCH, SEQ_LEN, STEPS, init, write_and_exit


def _workload(precision: str, grad_accum: int) -> dict:
    return {"micro_batch": MICRO_BATCH, "seq_len": SEQ_LEN, "grad_accum": grad_accum,
            "precision": precision}


def ddp_case(cfg: TinyLlamaConfig, precision: str, rank: int) -> dict:
    torch.manual_seed(0)
    ddp = DistributedDataParallel(TinyLlama(cfg))
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3, foreach=False)
    ids, labels = sample_batch(cfg, MICRO_BATCH, SEQ_LEN, seed=rank)
    probe = ActivationProbe(ddp.module.layers, ddp.module)
    for step in range(STEPS):
        measured = step == STEPS - 1
        with (probe if measured else nullcontext()), torch.autocast(
                "cpu", torch.bfloat16, enabled=precision == "bf16"):
            loss, _ = ddp(ids, labels)
        loss.backward()
        states = module_states(ddp.module, opt)  # grads present, optimizer state from step 1
        opt.step()
        opt.zero_grad()
    return {"workload": _workload(precision, 1), "states": asdict(states),
            "buffers": {"buckets": ddp_bucket_bytes(ddp),
                        "autocast_weight_copies": probe.result.weight_copy_bytes},
            "activations": asdict(probe.result), "loss": loss.item()}


def _fsdp2_sharded_grad_bytes(model: torch.nn.Module) -> int:
    """The sharded parameters' .grad (local shards), from FSDP2's own parameter records: while a
    unit is gathered (the root after forward) model.parameters() yields its unsharded copies."""
    grads = [fsdp_param.sharded_param.grad for module in model.modules()
             if isinstance(module, FSDPModule)
             for fsdp_param in module._get_fsdp_state()._fsdp_param_group.fsdp_params]
    return storage_bytes(grads)


def fsdp2_case(cfg: TinyLlamaConfig, rank: int, sync_each_micro_batch: bool,
               grad_accum: int = 2) -> dict:
    torch.manual_seed(0)
    model = TinyLlama(cfg)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
    for layer in model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    ids, labels = sample_batch(cfg, MICRO_BATCH, SEQ_LEN, seed=rank)
    probe = ActivationProbe(model.layers, model)
    for step in range(STEPS):
        for micro in range(grad_accum):
            model.set_requires_gradient_sync(sync_each_micro_batch or micro == grad_accum - 1)
            measured = step == STEPS - 1 and micro == 0
            with probe if measured else nullcontext():
                loss, _ = model(ids, labels)
            if micro == grad_accum - 1:  # what the last backward starts with
                backward_start = {"sharded_grads": _fsdp2_sharded_grad_bytes(model),
                                  "unsharded_grads": fsdp2_unsharded_grad_bytes(model)}
            (loss / grad_accum).backward()
        states = module_states(model, opt)
        opt.step()
        opt.zero_grad()
    workload = {**_workload("bf16", grad_accum), "sync_each_micro_batch": sync_each_micro_batch}
    return {"workload": workload, "states": asdict(states), "backward_start": backward_start,
            "activations": asdict(probe.result), "loss": loss.item()}


def main(out: Path) -> None:
    rank = init()
    cfg = TinyLlamaConfig()
    results = {"tiny": asdict(cfg),
               "ddp-bf16": ddp_case(cfg, "bf16", rank),
               "ddp-fp32": ddp_case(cfg, "fp32", rank),
               "fsdp2-bf16": fsdp2_case(cfg, rank, sync_each_micro_batch=False),
               "fsdp2-bf16-sync-each": fsdp2_case(cfg, rank, sync_each_micro_batch=True)}
    write_and_exit(results, out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
