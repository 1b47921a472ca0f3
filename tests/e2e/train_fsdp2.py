"""FSDP2 end to end on CPU: build the FSDP plugin from the emitted YAML exactly as `accelerate
launch` would (tests/e2e/checks.py), apply it with Accelerate's own `fsdp2_prepare_model`
(fully_shard per wrapped unit, with the plugin's reshard_after_forward, offload and mixed
precision), train a few steps under torchrun/gloo, and write OUT_DIR/rank<N>.json.

    torchrun --nproc_per_node 2 train_fsdp2.py accelerate_config.yaml OUT_DIR STEPS

Why not `accelerate launch`: on a machine without GPUs Accelerate does not shard FSDP (each process
falls back to a non-FSDP distributed type), so the launcher path would train unsharded.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.distributed as dist
from accelerate.utils.fsdp_utils import fsdp2_prepare_model
from checks import build_plugins
from tiny import LEARNING_RATE, batches, tiny_model
from torch.distributed.fsdp import FSDPModule


def main(yaml_path: str, out_dir: Path, steps: int) -> None:
    plugins = build_plugins(yaml_path)
    plugin = plugins.fsdp
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = tiny_model()
    # What Accelerator.prepare hands fsdp2_prepare_model, minus the GPU.
    accelerator = SimpleNamespace(state=SimpleNamespace(fsdp_plugin=plugin), torch_device_mesh=None,
                                  is_main_process=rank == 0, device=torch.device("cpu"),
                                  mixed_precision=plugins.env["ACCELERATE_MIXED_PRECISION"])
    model = fsdp2_prepare_model(accelerator, model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    losses = []
    for x in batches(rank, steps, micro_batch=2):
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    params = list(model.parameters())
    units = [type(m).__name__ for m in model.modules() if isinstance(m, FSDPModule)]
    report = {"rank": rank, "world": world, "losses": losses, "fsdp_units": units,
              "full_numel": sum(p.numel() for p in params),
              "local_numel": sum(p.to_local().numel() for p in params),
              "reshard_after_forward": plugin.reshard_after_forward,
              "param_dtype": str(getattr(plugin.mixed_precision_policy, "param_dtype", None)),
              "offload": type(plugin.cpu_offload).__name__}
    (out_dir / f"rank{rank}.json").write_text(json.dumps(report))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]))
