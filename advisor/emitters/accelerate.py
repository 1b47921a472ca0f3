"""accelerate_config.yaml as a tree: the head every plan has, then the engine's own emitter
(advisor/emitters/fsdp.py, deepspeed.py; DDP needs only the head), then the machine block."""

from __future__ import annotations

from advisor.core.engines import DdpConfig, FsdpConfig, ZeroConfig
from advisor.core.results import Estimate
from advisor.emitters import deepspeed, fsdp
from advisor.emitters.choices import Choice, EmitOptions, Tree, accelerate_precision, machines


def accelerate_config(est: Estimate, options: EmitOptions, ds_config_path: str | None) -> Tree:
    """The whole accelerate_config.yaml as a tree."""
    config, c = est.engine_config, est.cluster
    head: Tree = {"compute_environment": Choice("LOCAL_MACHINE")}
    if isinstance(config, ZeroConfig):
        head["distributed_type"] = Choice("DEEPSPEED", "DeepSpeed ZeRO; settings in ds_config.json")
        head["deepspeed_config"] = deepspeed.accelerate_block(config, c.nodes, ds_config_path)
    elif isinstance(config, DdpConfig):
        multi = c.num_gpus > 1
        head["distributed_type"] = Choice("MULTI_GPU" if multi else "NO",
                                          "DDP: a full replica per GPU fits" if multi else "one GPU")
        head["mixed_precision"] = accelerate_precision(est)
    elif isinstance(config, FsdpConfig):
        head["distributed_type"] = Choice("FSDP", "PyTorch FSDP")
        head["mixed_precision"] = accelerate_precision(est)
        head |= fsdp.fsdp_config(est, config)
    return head | machines(est, options)
