"""What `advisor emit` writes, as data: one estimate -> the Accelerate config, the DeepSpeed config
and the reason for every value the advisor decided.

Values are plain Python; `advisor/emit.py` serialises them with yaml.safe_dump / json.dumps and
puts each reason next to its value (a YAML comment, or a row of PLAN.md for the JSON). Sources:
accelerate 1.15 `commands/config/cluster.py` (the keys `accelerate config` writes) and
`utils/launch.py` (how `accelerate launch` turns them into FSDP_* / ACCELERATE_DEEPSPEED_*
variables); DeepSpeed's config-json reference and `runtime/zero/offload_config.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from advisor.core.errors import InvalidInput
from advisor.core.hardware import gpu_catalog
from advisor.core.model import ModelSpec
from advisor.core.results import Estimate
from advisor.core.text import absolute_path
from advisor.strategies import get_strategy
from advisor.strategies.zero import (
    NVME_OPTIMIZER_SUBGROUP_ELEMENTS,
    NVME_PARAM_BUFFER_COUNT,
    DeepSpeedBuckets,
    nvme_param_buffer_elements,
)

ACCELERATE_PRECISION = {"bf16": "bf16", "fp16": "fp16", "fp32": "no"}


@dataclass(frozen=True, slots=True)
class Choice:
    """One value in an emitted file and why the advisor chose it ("" for boilerplate)."""

    value: Any
    why: str = ""


Tree = dict[str, Any]
"""Nested mapping whose leaves are `Choice`s."""


def plain(tree: Tree) -> dict[str, Any]:
    """The tree without reasons: what the file holds."""
    return {k: plain(v) if isinstance(v, dict) else v.value for k, v in tree.items()}


def reasons(tree: Tree, prefix: str = "") -> list[tuple[str, Any, str]]:
    """(dotted key, value, why) for every value the advisor decided, in file order."""
    out = []
    for key, node in tree.items():
        if isinstance(node, dict):
            out += reasons(node, f"{prefix}{key}.")
        elif node.why:
            out.append((f"{prefix}{key}", node.value, node.why))
    return out


@dataclass(frozen=True, slots=True)
class EmitOptions:
    """What the user adds to an estimate to get runnable files."""

    nvme_path: str | None = None
    """Directory on a local NVMe drive of every node (ZeRO-Infinity)."""
    main_process_port: int = 29500
    """Rendezvous port on node 0 (multi-node)."""

    def __post_init__(self) -> None:
        if self.nvme_path is not None:
            absolute_path(self.nvme_path, "nvme_path")
        if not 1 <= self.main_process_port <= 65535:
            raise InvalidInput("main_process_port", f"{self.main_process_port} is not a TCP port",
                               "1 to 65535")


@dataclass(frozen=True, slots=True)
class Plan:
    """One plan, ready to render: the estimate, both configs and the reasons."""

    estimate: Estimate
    accelerate: Tree
    deepspeed: Tree | None
    """ds_config.json for DeepSpeed strategies, else None."""
    why: list[str]
    """Why this plan (the recommender's summary)."""
    script: list[str] = field(default_factory=list)
    """What the training script must do (DummyOptim, checkpointing code...)."""
    notes: list[str] = field(default_factory=list)
    """How inputs were resolved (inferred shape, default global batch...)."""


def _precision_why(est: Estimate) -> str:
    p, gpu = est.settings.precision, est.cluster.gpu
    if p != "fp32" and not est.settings.master_weights:
        return (f"pure {p}: no mixed precision, the model itself is loaded in {p} (no fp32 master "
                "weights or moments, as the estimate assumes)")
    if p == "bf16":
        return f"bf16 mixed precision (fp32 master weights): {gpu} supports it and it needs no loss scaling"
    if p == "fp16":
        lacks = "" if gpu_catalog()[gpu].supports("bf16") else f" ({gpu} has no bf16)"
        return f"fp16 mixed precision with dynamic loss scaling{lacks}"
    return "fp32 training, as asked: no mixed precision"


def _machines(est: Estimate, options: EmitOptions) -> Tree:
    c = est.cluster
    tree: Tree = {
        "num_machines": Choice(c.nodes, f"{c.nodes} node(s) of {c.gpus_per_node} x {c.gpu}"),
        "num_processes": Choice(c.num_gpus, "one process per GPU, all nodes together"),
        "machine_rank": Choice(0, "launch.sh passes --machine_rank $NODE_RANK on each node"
                               if c.nodes > 1 else ""),
    }
    if c.nodes > 1:
        tree["main_process_ip"] = Choice(None, "node 0's address: launch.sh passes "
                                         "--main_process_ip $MAIN_PROCESS_IP")
        # (no same_network: the launcher's own --same_network default overrides it)
        tree["rdzv_backend"] = Choice("static", "fixed node ranks (NODE_RANK), node 0 hosts the rendezvous")
    tree["main_process_port"] = Choice(options.main_process_port)
    tree["use_cpu"] = Choice(False)
    return tree


def _checkpointing_why(act_ckpt: str) -> str:
    return {"full": "full activation checkpointing: the estimate needs it to fit this micro-batch",
            "selective": "selective checkpointing was chosen; Accelerate's switch is full-layer only, "
                         "so apply it in the model code (PLAN.md)",
            "none": "no activation checkpointing: activations fit without recompute"}[act_ckpt]


def fsdp_config(est: Estimate, model: ModelSpec) -> Tree:
    """Accelerate's fsdp_config (+ parallelism_config for FSDP2 HYBRID_SHARD)."""
    strategy = get_strategy(est.strategy, est.settings.fsdp_version or 2)
    version = est.settings.fsdp_version or 2
    name = "HYBRID_SHARD" if strategy.hybrid else (
        "FULL_SHARD" if strategy.reshard_after_forward else "SHARD_GRAD_OP")
    reshard_why = {
        "FULL_SHARD": "FULL_SHARD: parameters resharded after forward, gathered again in backward",
        "SHARD_GRAD_OP": "SHARD_GRAD_OP: gathered parameters kept from forward to backward "
                         "(one all-gather fewer per micro-batch, more memory)",
        "HYBRID_SHARD": "HYBRID_SHARD: shard inside a node, replicate across nodes",
    }[name]
    cfg: Tree = {"fsdp_version": Choice(version, "FSDP2 (fully_shard, per-parameter DTensor shards)"
                                        if version == 2 else "FSDP1, as asked (--fsdp-version 1)")}
    if version == 2:
        cfg["fsdp_reshard_after_forward"] = Choice(strategy.reshard_after_forward, reshard_why)
    else:  # the FSDP1 plugin reads fsdp_sharding_strategy; keep both keys equal
        cfg["fsdp_reshard_after_forward"] = Choice(name, reshard_why)
        cfg["fsdp_sharding_strategy"] = Choice(name, "the key Accelerate's FSDP1 plugin reads")
    offload = strategy.cpu_offload
    cfg |= {
        "fsdp_offload_params": Choice(offload, "parameters, gradients and the optimizer step on the CPU:"
                                      " the GPU-resident plans do not fit" if offload else
                                      "no CPU offload: the sharded state fits on the GPUs"),
        "fsdp_auto_wrap_policy": Choice("TRANSFORMER_BASED_WRAP",
                                        "one FSDP unit per decoder layer, as the memory model assumes"),
        "fsdp_transformer_layer_cls_to_wrap": Choice(model.decoder_layer_class,
                                                     f"the decoder layer class of {model.name}"),
        "fsdp_state_dict_type": Choice("SHARDED_STATE_DICT", "each rank writes its own shard: no "
                                       "full-model gather at save (merge later, see PLAN.md)"),
        "fsdp_cpu_ram_efficient_loading": Choice(True, "only rank 0 reads pretrained weights; the "
                                                 "others receive them: less host RAM at load"),
        "fsdp_sync_module_states": Choice(True, "required with cpu_ram_efficient_loading"),
        "fsdp_activation_checkpointing": Choice(est.settings.act_ckpt == "full",
                                                _checkpointing_why(est.settings.act_ckpt)),
    }
    if version == 1:
        cfg["fsdp_backward_prefetch"] = Choice("BACKWARD_PRE", "prefetch the next unit in backward")
        cfg["fsdp_forward_prefetch"] = Choice(False)
        cfg["fsdp_use_orig_params"] = Choice(True, "keeps parameter names for optimizer groups and "
                                             "torch.compile")
    tree: Tree = {"fsdp_config": cfg}
    if strategy.hybrid and version == 2:
        c = est.cluster
        tree["parallelism_config"] = {
            "parallelism_config_dp_replicate_size": Choice(c.nodes, "HYBRID_SHARD: one replica per node"),
            "parallelism_config_dp_shard_size": Choice(c.gpus_per_node, "shard over the GPUs of a node"),
        }
    return tree


def accelerate_config(est: Estimate, model: ModelSpec, options: EmitOptions,
                      ds_config_path: str | None) -> Tree:
    """The whole accelerate_config.yaml as a tree."""
    s, c = est.settings, est.cluster
    head: Tree = {"compute_environment": Choice("LOCAL_MACHINE")}
    if est.engine == "deepspeed":
        head["distributed_type"] = Choice("DEEPSPEED", "DeepSpeed ZeRO; settings in ds_config.json")
        ds: Tree = {"deepspeed_config_file": Choice(
            ds_config_path, "absolute path at emit time; launch.sh passes the folder's current path")}
        if get_strategy(est.strategy).stage == 3:
            ds["zero3_init_flag"] = Choice(True, "build the model partitioned (deepspeed.zero.Init in "
                                           "from_pretrained): no rank holds the full model")
        if c.nodes > 1:
            ds["deepspeed_multinode_launcher"] = Choice(
                "standard", "torchrun-style: launch.sh runs on every node (no pdsh / hostfile)")
        head["deepspeed_config"] = ds
        # No mixed_precision key: with deepspeed_config_file Accelerate takes it from the JSON and
        # refuses a second source.
        return head | _machines(est, options)
    if est.engine == "ddp":
        multi = c.num_gpus > 1
        head["distributed_type"] = Choice("MULTI_GPU" if multi else "NO",
                                          "DDP: a full replica per GPU fits" if multi else "one GPU")
    else:
        head["distributed_type"] = Choice("FSDP", "PyTorch FSDP")
    accelerate_precision = ACCELERATE_PRECISION[s.precision] if s.master_weights else "no"
    head["mixed_precision"] = Choice(accelerate_precision, _precision_why(est))
    if est.engine != "ddp":
        head |= fsdp_config(est, model)
    return head | _machines(est, options)


def _offload(device: str, options: EmitOptions, extra: Tree) -> Tree:
    tree: Tree = {"device": Choice(device, "offload to host memory" if device == "cpu" else
                                   "ZeRO-Infinity: offload to NVMe")}
    if device == "nvme":
        tree["nvme_path"] = Choice(options.nvme_path, "local NVMe directory you gave (--nvme-path)")
    tree["pin_memory"] = Choice(True, "page-locked host buffers: full-speed PCIe copies")
    return tree | extra


def ds_config(est: Estimate, model: ModelSpec, options: EmitOptions) -> Tree:
    """The whole ds_config.json as a tree. Buckets come from DeepSpeedBuckets.for_model, the
    sizes the memory estimate counts."""
    s, world = est.settings, est.cluster.num_gpus
    strategy = get_strategy(est.strategy)
    b = DeepSpeedBuckets.for_model(model)
    h = model.hidden
    z: Tree = {
        "stage": Choice(strategy.stage, strategy.description),
        "overlap_comm": Choice(True, "overlap gradient reduction with backward, as the step time assumes"),
        "contiguous_gradients": Choice(True, "copy gradients into one buffer as produced: no fragmentation"),
        "reduce_bucket_size": Choice(b.reduce_bucket_size, f"hidden^2 = {h}^2 elements (DeepSpeed's "
                                     "default 5e8 is wrong for this model); counted in the estimate"),
    }
    if strategy.stage < 3:
        z["allgather_partitions"] = Choice(True)
        z["allgather_bucket_size"] = Choice(b.allgather_bucket_size, f"hidden^2 = {h}^2 elements")
        z["reduce_scatter"] = Choice(True, "reduce-scatter gradients instead of all-reduce")
    else:
        z["stage3_prefetch_bucket_size"] = Choice(b.stage3_prefetch_bucket_size,
                                                  f"0.9 x hidden^2 = 0.9 x {h}^2 elements")
        z["stage3_param_persistence_threshold"] = Choice(
            b.stage3_param_persistence_threshold, f"10 x hidden = 10 x {h}: norms stay whole per GPU")
        z["stage3_max_live_parameters"] = Choice(b.stage3_max_live_parameters, "DeepSpeed's default")
        z["stage3_max_reuse_distance"] = Choice(b.stage3_max_live_parameters, "DeepSpeed's default")
        z["sub_group_size"] = Choice(int(NVME_OPTIMIZER_SUBGROUP_ELEMENTS), "optimizer step in groups "
                                     "of 1e9 elements (DeepSpeed's default, counted for NVMe swap)")
        z["stage3_gather_16bit_weights_on_model_save"] = Choice(
            True, "accelerator.save_model writes one consolidated 16-bit safetensors model")
    if strategy.offload_optimizer:
        z["offload_optimizer"] = _offload(strategy.offload_optimizer, options, {})
    if strategy.offload_params:
        extra: Tree = {}
        if strategy.offload_params == "nvme":
            extra = {"buffer_count": Choice(NVME_PARAM_BUFFER_COUNT, "DeepSpeed's default"),
                     "buffer_size": Choice(nvme_param_buffer_elements(model, world),
                                           "elements per swap buffer: at least the largest "
                                           "per-GPU parameter partition")}
        z["offload_param"] = _offload(strategy.offload_params, options, extra)
    tree: Tree = {
        "train_batch_size": Choice(s.micro_batch * s.grad_accum * world,
                                   f"micro-batch {s.micro_batch} x grad-accum {s.grad_accum} x "
                                   f"{world} GPUs (sequences of {s.seq_len} tokens)"),
        "train_micro_batch_size_per_gpu": Choice(s.micro_batch, "the micro-batch the estimate fits"),
        "gradient_accumulation_steps": Choice(s.grad_accum, "gives the global batch"),
        "gradient_clipping": Choice(1.0, "clip the global gradient norm at 1.0, the usual LLM setting"),
    }
    if s.precision == "bf16":
        tree["bf16"] = {"enabled": Choice(True, _precision_why(est))}
    elif s.precision == "fp16":
        tree["fp16"] = {"enabled": Choice(True, _precision_why(est)),
                        "loss_scale": Choice(0, "0 = dynamic loss scaling"),
                        "initial_scale_power": Choice(16, "start at 2^16"),
                        "loss_scale_window": Choice(1000), "hysteresis": Choice(2),
                        "min_loss_scale": Choice(1)}
    tree["zero_optimization"] = z
    if strategy.offload_optimizer:
        if s.optimizer == "adamw":
            tree["optimizer"] = {
                "type": Choice("AdamW", "DeepSpeed's CPU Adam runs the offloaded step (the rate the "
                               "estimate assumes); create accelerate.utils.DummyOptim in the script"),
                "params": {"lr": Choice("auto", "filled by Accelerate from DummyOptim(lr=...)"),
                           "weight_decay": Choice("auto", "filled from DummyOptim(weight_decay=...)")}}
        else:
            tree["zero_force_ds_cpu_optimizer"] = Choice(False, f"DeepSpeed has no CPU {s.optimizer}: "
                                                         "your torch optimizer steps on the CPU")
    return tree
