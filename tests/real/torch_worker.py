"""DDP and FSDP2 training steps of the tiny Llama on 2 CPU ranks (gloo), measured.

    torchrun --nproc-per-node 2 -m tests.real.torch_worker OUT.json

Cases (keys of the result):
  ddp-bf16    DDP around the fp32 module, forward under torch.autocast(bf16): Accelerate's
              MULTI_GPU with mixed_precision=bf16. Gradient accumulation 1.
  ddp-fp32    the same without autocast (pure fp32).
  ddp-pure-bf16
              DDP around the module converted to bf16 (model.to(bfloat16)), no autocast: pure
              16-bit training (Workload.master_weights=False). AdamW's moments are bf16.
  fsdp2-bf16  fully_shard per decoder layer + root, MixedPrecisionPolicy(param_dtype=bf16,
              reduce_dtype=bf16) as Accelerate sets it; sharded parameters stay fp32. Gradient
              accumulation 2 with set_requires_gradient_sync(False) on the first micro-batch.
  fsdp2-bf16-sync-each
              the same, gradients reduce-scattered every micro-batch (Accelerate's
              sync_each_batch=True: the sync is never turned off).
  fsdp2-pure-bf16
              the module converted to bf16 before fully_shard, no MixedPrecisionPolicy: bf16
              shards, gradients and AdamW moments (Workload.master_weights=False). Gradient
              accumulation 2 with the sync skipped on the first micro-batch, as fsdp2-bf16.
FSDP2 cases record the gradients a rank holds when the last micro-batch's backward starts
(after its forward): the sharded .grad (local shards) and the unsharded gradients no_sync keeps.
Every case records its loss at each optimizer step (`losses`; the same batch every step, so it
falls when the run trains) and the measured step's (`loss`).
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


def _workload(precision: str, grad_accum: int, master_weights: bool = True) -> dict:
    return {"micro_batch": MICRO_BATCH, "seq_len": SEQ_LEN, "grad_accum": grad_accum,
            "precision": precision, "master_weights": master_weights}


def _tiny(cfg: TinyLlamaConfig, master_weights: bool) -> TinyLlama:
    """The module in fp32, or converted to bf16 for pure 16-bit training (no master weights)."""
    torch.manual_seed(0)
    model = TinyLlama(cfg)
    return model if master_weights else model.to(torch.bfloat16)


def ddp_case(cfg: TinyLlamaConfig, precision: str, rank: int, master_weights: bool = True) -> dict:
    """precision bf16: autocast over the fp32 module, or with master_weights=False the bf16
    module without autocast (nothing to cast)."""
    ddp = DistributedDataParallel(_tiny(cfg, master_weights))
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3, foreach=False)
    ids, labels = sample_batch(cfg, MICRO_BATCH, SEQ_LEN, seed=rank)
    probe = ActivationProbe(ddp.module.layers, ddp.module)
    losses = []
    for step in range(STEPS):
        measured = step == STEPS - 1
        with (probe if measured else nullcontext()), torch.autocast(
                "cpu", torch.bfloat16, enabled=precision == "bf16" and master_weights):
            loss, _ = ddp(ids, labels)
        losses.append(loss.item())
        loss.backward()
        states = module_states(ddp.module, opt)  # grads present, optimizer state from step 1
        opt.step()
        opt.zero_grad()
    return {"workload": _workload(precision, 1, master_weights), "states": asdict(states),
            "buffers": {"buckets": ddp_bucket_bytes(ddp),
                        "autocast_weight_copies": probe.result.weight_copy_bytes},
            "activations": asdict(probe.result), "loss": losses[-1], "losses": losses}


def _fsdp2_sharded_grad_bytes(model: torch.nn.Module) -> int:
    """The sharded parameters' .grad (local shards), from FSDP2's own parameter records: while a
    unit is gathered (the root after forward) model.parameters() yields its unsharded copies."""
    grads = [fsdp_param.sharded_param.grad for module in model.modules()
             if isinstance(module, FSDPModule)
             for fsdp_param in module._get_fsdp_state()._fsdp_param_group.fsdp_params]
    return storage_bytes(grads)


def fsdp2_case(cfg: TinyLlamaConfig, rank: int, sync_each_micro_batch: bool,
               grad_accum: int = 2, master_weights: bool = True) -> dict:
    """bf16 compute: MixedPrecisionPolicy over the fp32 module, or with master_weights=False
    the bf16 module sharded as it is (the default policy keeps the parameters' dtype)."""
    model = _tiny(cfg, master_weights)
    mp = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
          if master_weights else MixedPrecisionPolicy())
    for layer in model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    ids, labels = sample_batch(cfg, MICRO_BATCH, SEQ_LEN, seed=rank)
    probe = ActivationProbe(model.layers, model)
    losses = []
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
        losses.append(loss.item())  # the last micro-batch's
        states = module_states(model, opt)
        opt.step()
        opt.zero_grad()
    workload = {**_workload("bf16", grad_accum, master_weights),
                "sync_each_micro_batch": sync_each_micro_batch}
    return {"workload": workload, "states": asdict(states), "backward_start": backward_start,
            "activations": asdict(probe.result), "loss": losses[-1], "losses": losses}


def main(out: Path) -> None:
    rank = init()
    cfg = TinyLlamaConfig()
    results = {"tiny": asdict(cfg),
               "ddp-bf16": ddp_case(cfg, "bf16", rank),
               "ddp-fp32": ddp_case(cfg, "fp32", rank),
               "fsdp2-bf16": fsdp2_case(cfg, rank, sync_each_micro_batch=False),
               "fsdp2-bf16-sync-each": fsdp2_case(cfg, rank, sync_each_micro_batch=True),
               "ddp-pure-bf16": ddp_case(cfg, "bf16", rank, master_weights=False),
               "fsdp2-pure-bf16": fsdp2_case(cfg, rank, sync_each_micro_batch=False,
                                             master_weights=False)}
    write_and_exit(results, out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
