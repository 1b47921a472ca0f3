"""The FSDP emitter: Accelerate's `fsdp_config` (and `parallelism_config` for FSDP2
HYBRID_SHARD) from the estimate's FsdpConfig."""

from __future__ import annotations

from advisor.core.engines import FsdpConfig
from advisor.core.results import Estimate
from advisor.emitters.choices import Choice, Tree, checkpointing_why

_RESHARD_WHY = {
    "FULL_SHARD": "FULL_SHARD: parameters resharded after forward, gathered again in backward",
    "SHARD_GRAD_OP": "SHARD_GRAD_OP: gathered parameters kept from forward to backward "
                     "(one all-gather fewer per micro-batch, more memory)",
    "HYBRID_SHARD": "HYBRID_SHARD: shard inside a node, replicate across nodes",
}


def fsdp_config(est: Estimate, config: FsdpConfig) -> Tree:
    name, version = config.sharding, config.version
    cfg: Tree = {"fsdp_version": Choice(version, "FSDP2 (fully_shard, per-parameter DTensor shards)"
                                        if version == 2 else "FSDP1, as asked (--fsdp-version 1)")}
    if version == 2:
        cfg["fsdp_reshard_after_forward"] = Choice(config.reshard_after_forward, _RESHARD_WHY[name])
    else:  # the FSDP1 plugin reads fsdp_sharding_strategy; keep both keys equal
        cfg["fsdp_reshard_after_forward"] = Choice(name, _RESHARD_WHY[name])
        cfg["fsdp_sharding_strategy"] = Choice(name, "the key Accelerate's FSDP1 plugin reads")
    offload = config.cpu_offload
    cfg |= {
        "fsdp_offload_params": Choice(offload, "parameters, gradients and the optimizer step on the CPU:"
                                      " the GPU-resident plans do not fit" if offload else
                                      "no CPU offload: the sharded state fits on the GPUs"),
        "fsdp_auto_wrap_policy": Choice("TRANSFORMER_BASED_WRAP",
                                        "one FSDP unit per decoder layer, as the memory model assumes"),
        "fsdp_transformer_layer_cls_to_wrap": Choice(est.model.decoder_layer_class,
                                                     f"the decoder layer class of {est.model.name}"),
        "fsdp_state_dict_type": Choice("SHARDED_STATE_DICT", "each rank writes its own shard: no "
                                       "full-model gather at save (merge later, see PLAN.md)"),
        "fsdp_cpu_ram_efficient_loading": Choice(True, "only rank 0 reads pretrained weights; the "
                                                 "others receive them: less host RAM at load"),
        "fsdp_sync_module_states": Choice(True, "required with cpu_ram_efficient_loading"),
        "fsdp_activation_checkpointing": Choice(est.workload.act_ckpt == "full",
                                                checkpointing_why(est.workload.act_ckpt)),
    }
    if version == 1:
        cfg["fsdp_backward_prefetch"] = Choice("BACKWARD_PRE", "prefetch the next unit in backward")
        cfg["fsdp_forward_prefetch"] = Choice(False)
        cfg["fsdp_use_orig_params"] = Choice(True, "keeps parameter names for optimizer groups and "
                                             "torch.compile")
    tree: Tree = {"fsdp_config": cfg}
    if name == "HYBRID_SHARD" and version == 2:
        tree["parallelism_config"] = {
            "parallelism_config_dp_replicate_size": Choice(config.replicas, "HYBRID_SHARD: one replica "
                                                           "per shard group"),
            "parallelism_config_dp_shard_size": Choice(config.shard_size, "shard over the GPUs of a "
                                                       "shard group"),
        }
    return tree
