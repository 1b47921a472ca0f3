"""Train the tiny model for a few optimizer steps under `accelerate launch --config_file <emitted>`
and write what the engine really did to OUT_DIR/rank<N>.json.

    accelerate launch --config_file accelerate_config.yaml train_accelerate.py OUT_DIR STEPS

A user's script in miniature: Accelerator(), DummyOptim when ds_config.json names the optimizer
(else torch AdamW), accelerator.accumulate / backward / step. Nothing here reads the emitted files
except through Accelerate.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# Test machine only: DeepSpeed builds a shared-memory C++ op when its communication backend
# starts (deepspeed/comm/torch.py), which takes minutes on CPU; gloo does not need it.
import deepspeed.comm.torch  # noqa: F401  (registers the module to patch)

sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from accelerate import Accelerator  # noqa: E402
from accelerate.utils import DummyOptim  # noqa: E402
from tiny import LEARNING_RATE, batches, tiny_model  # noqa: E402


def _deepspeed_report(engine) -> dict:
    """Stage, offload and how much of the sharded state this rank holds."""
    opt = engine.optimizer
    report = {"engine": type(engine).__name__, "stage": engine.zero_optimization_stage(),
              "bf16": engine.bfloat16_enabled(), "offload_optimizer": engine.zero_cpu_offload(),
              "zero_optimizer": type(opt).__name__, "train_batch_size": engine.train_batch_size()}
    params = [p for p in engine.module.parameters()]
    if report["stage"] == 3:
        report["full_numel"] = sum(p.ds_numel for p in params)
        report["local_numel"] = sum(p.ds_tensor.numel() for p in params)
        report["offload_param"] = engine.zero_offload_param() is not None
    else:
        report["full_numel"] = sum(p.numel() for p in params)
        report["local_numel"] = sum(t.numel() for t in opt.single_partition_of_fp32_groups)
    return report


def main(out_dir: Path, steps: int) -> None:
    accelerator = Accelerator()
    model = tiny_model()
    plugin = accelerator.state.deepspeed_plugin
    ds = plugin.deepspeed_config if plugin is not None else {}
    if "optimizer" in ds:
        optimizer = DummyOptim(model.parameters(), lr=LEARNING_RATE, weight_decay=0.0)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    model, optimizer = accelerator.prepare(model, optimizer)
    rank, world = dist.get_rank(), dist.get_world_size()
    micro_batch = ds.get("train_micro_batch_size_per_gpu", 2)
    accum = ds.get("gradient_accumulation_steps", 1)
    losses, window = [], []
    for x in batches(rank, steps * accum, micro_batch):
        with accelerator.accumulate(model):
            loss = model(input_ids=x, labels=x).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        window.append(loss.item())
        if len(window) == accum:
            losses.append(sum(window) / accum)
            window = []
    report = {"rank": rank, "world": world, "distributed_type": str(accelerator.distributed_type),
              "losses": losses, "model_class": type(model).__name__}
    if plugin is not None:
        report |= _deepspeed_report(model)
    else:
        inner = getattr(model, "module", model)
        report["local_numel"] = report["full_numel"] = sum(p.numel() for p in inner.parameters())
        report["param_checksum"] = float(sum(p.detach().double().sum() for p in inner.parameters()))
    accelerator.end_training()
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    (out_dir / f"rank{rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
    # The report is written after the process group is torn down, so the run is complete here.
    # Skip interpreter finalization: on CPU a C++ thread left joinable by the DeepSpeed/gloo stack
    # sometimes aborts it ("terminate called without an active exception", ~1 run in 5 here).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
