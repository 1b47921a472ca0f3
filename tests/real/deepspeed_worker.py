"""DeepSpeed ZeRO-1/2/3 training steps of the tiny Llama on 2 CPU ranks (gloo), measured.

    torchrun --nproc-per-node 2 -m tests.real.deepspeed_worker CONFIGS.json OUT.json

CONFIGS.json maps a case name to the ds_config the test built (the advisor's own emitted config).
DeepSpeed runs on its CPU accelerator, bf16 (the CPU accelerator supports it). Two things keep
start-up at seconds instead of minutes of C++ builds: a torch.optim AdamW is passed in (no
FusedAdam / CPU Adam build; `zero_allow_untested_optimizer` lets ZeRO take it), and the
shared-memory all-reduce op is not built (`build_shm_op` replaced before init_distributed;
gloo's all-reduce is used instead).

What is recorded, per case, for the last optimizer step: snapshots of the ZeRO optimizer's
buffers (calibration.measure.deepspeed_snapshot) after each micro-batch's backward and inside
the torch optimizer's step (a step pre-hook, when the fp32 gradient partition exists), their
per-kind maximum, and the saved activations of the step's first micro-batch.
"""

from __future__ import annotations

import json
import sys
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path

import deepspeed
import torch

from calibration.measure import ActivationProbe, deepspeed_snapshot
from calibration.tiny_llama import TinyLlama, TinyLlamaConfig, sample_batch
from tests.real.common import MICRO_BATCH, SEQ_LEN, STEPS, write_and_exit

sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None  # see module doc


def zero_case(cfg: TinyLlamaConfig, ds_config: dict, rank: int) -> dict:
    torch.manual_seed(0)
    opt = torch.optim.AdamW((model := TinyLlama(cfg)).parameters(), lr=1e-3, foreach=False)
    config = {**ds_config, "zero_allow_untested_optimizer": True, "steps_per_print": 10**9}
    engine, zero_opt, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
    snapshots: dict[str, dict[str, int]] = {}
    opt.register_step_pre_hook(
        lambda *_: snapshots.__setitem__("in step", deepspeed_snapshot(zero_opt, engine.module)))
    ids, labels = sample_batch(cfg, MICRO_BATCH, SEQ_LEN, seed=rank)
    probe = ActivationProbe(engine.module.layers, engine.module)
    grad_accum = config["gradient_accumulation_steps"]
    for step in range(STEPS):
        snapshots.clear()
        for micro in range(grad_accum):
            with probe if step == STEPS - 1 and micro == 0 else nullcontext():
                loss, _ = engine(ids, labels)
            engine.backward(loss)
            snapshots[f"after backward {micro}"] = deepspeed_snapshot(zero_opt, engine.module)
            engine.step()  # steps the optimizer at the accumulation boundary only
    peak = {k: max(s[k] for s in snapshots.values()) for k in next(iter(snapshots.values()))}
    return {"workload": {"micro_batch": MICRO_BATCH, "seq_len": SEQ_LEN, "grad_accum": grad_accum,
                         "precision": "bf16" if config.get("bf16", {}).get("enabled") else "fp32"},
            "optimizer_class": type(zero_opt).__name__, "snapshots": snapshots, "peak": peak,
            "activations": asdict(probe.result), "loss": loss.item()}


def main(configs: Path, out: Path) -> None:
    deepspeed.init_distributed(dist_backend="gloo")  # joins torchrun's group, as init() would
    rank = torch.distributed.get_rank()
    cfg = TinyLlamaConfig()
    results = {"tiny": asdict(cfg)}
    for name, ds_config in json.loads(configs.read_text()).items():
        results[name] = zero_case(cfg, ds_config, rank)
    write_and_exit(results, out)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
