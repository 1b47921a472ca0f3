"""FSDP2 at scale without GPUs: FSDPMemTracker's per-rank peak for Llama-shaped models.

    python -m tests.real.fsdp2_oracle CASES.json OUT.json

Each case ({"name", "model", "layers", "world", "micro_batch", "seq_len"}) builds the advisor
preset `model` cut to `layers` decoder layers as a TinyLlama under FakeTensorMode (no memory
is allocated), shards it with fully_shard per decoder layer + root over the fake process group
of `world` ranks (device "cpu": a fake "cuda" does not work on the CPU build), with
MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=bf16), and runs two training steps under
FSDPMemTracker; the second step's peak is recorded (optimizer state exists by then). AdamW is
built with foreach=False: the foreach kernels' temporaries would inflate the optimizer peak.
The loop mirrors HF Trainer: the outputs are dropped before backward, zero_grad sets None.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.testing._internal.distributed.fake_pg import FakeStore

from advisor.core.model import preset
from calibration.tiny_llama import TinyLlama, config_from_spec, sample_batch


def peak_snapshot(case: dict) -> dict[str, int]:
    """The tracker's per-rank peak by category ("Sharded Param", ..., "Total"), bytes."""
    spec = preset(case["model"]).model_copy(update={"layers": case["layers"]})
    cfg = config_from_spec(spec)
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=case["world"])
    try:
        mesh = init_device_mesh("cpu", (case["world"],))
        with FakeTensorMode():
            model = TinyLlama(cfg)
            mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
            for layer in model.layers:
                fully_shard(layer, mesh=mesh, mp_policy=mp)
            fully_shard(model, mesh=mesh, mp_policy=mp)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
            ids, labels = sample_batch(cfg, case["micro_batch"], case["seq_len"])
            tracker = FSDPMemTracker(model, opt)
            tracker.track_inputs((ids, labels))
            with tracker:
                for step in range(2):
                    loss = model(ids, labels)[0]  # logits dropped before backward
                    loss.backward()
                    opt.step()
                    opt.zero_grad()
                    if step == 0:
                        tracker.reset_mod_stats()
            snap = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]
    finally:
        dist.destroy_process_group()
    return {str(getattr(k, "value", k)): int(v) for k, v in snap.items()}


def main(cases: Path, out: Path) -> None:
    results = {case["name"]: peak_snapshot(case) for case in json.loads(cases.read_text())}
    out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
