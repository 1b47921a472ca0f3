"""The DeepSpeed emitter: ds_config.json and Accelerate's deepspeed_config block, from the
estimate's ZeroConfig (its buckets are the sizes the memory estimate counts)."""

from __future__ import annotations

from advisor.core.engines import NVME_PARAM_BUFFER_COUNT, ZeroConfig
from advisor.core.results import Estimate
from advisor.emitters.choices import Choice, EmitOptions, Tree, precision_why
from advisor.strategies import get_strategy


def accelerate_block(config: ZeroConfig, nodes: int, ds_config_path: str | None) -> Tree:
    """Accelerate's deepspeed_config: where the JSON is, ZeRO-3 init, the multi-node launcher.
    (No mixed_precision key: with deepspeed_config_file Accelerate takes it from the JSON and
    refuses a second source.)"""
    ds: Tree = {"deepspeed_config_file": Choice(
        ds_config_path, "absolute path at emit time; launch.sh passes the folder's current path")}
    if config.stage == 3:
        ds["zero3_init_flag"] = Choice(True, "build the model partitioned (deepspeed.zero.Init in "
                                       "from_pretrained): no rank holds the full model")
    if nodes > 1:
        ds["deepspeed_multinode_launcher"] = Choice(
            "standard", "torchrun-style: launch.sh runs on every node (no pdsh / hostfile)")
    return ds


def _offload(device: str, options: EmitOptions, extra: Tree) -> Tree:
    tree: Tree = {"device": Choice(device, "offload to host memory" if device == "cpu" else
                                   "ZeRO-Infinity: offload to NVMe")}
    if device == "nvme":
        tree["nvme_path"] = Choice(options.nvme_path, "local NVMe directory you gave (--nvme-path)")
    tree["pin_memory"] = Choice(True, "page-locked host buffers: full-speed PCIe copies")
    return tree | extra


def _zero_optimization(est: Estimate, config: ZeroConfig, options: EmitOptions) -> Tree:
    b, h = config.buckets, est.model.hidden
    z: Tree = {
        "stage": Choice(config.stage, get_strategy(est.strategy).description),
        "overlap_comm": Choice(True, "overlap gradient reduction with backward, as the step time assumes"),
        "contiguous_gradients": Choice(True, "copy gradients into one buffer as produced: no fragmentation"),
        "reduce_bucket_size": Choice(b.reduce_bucket_size, f"hidden^2 = {h}^2 elements (DeepSpeed's "
                                     "default 5e8 is wrong for this model); counted in the estimate"),
    }
    if config.stage < 3:
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
        z["sub_group_size"] = Choice(b.sub_group_size, "optimizer step in groups of 1e9 elements "
                                     "(DeepSpeed's default, counted for NVMe swap)")
        z["stage3_gather_16bit_weights_on_model_save"] = Choice(
            True, "accelerator.save_model writes one consolidated 16-bit safetensors model")
    if config.offload_optimizer:
        z["offload_optimizer"] = _offload(config.offload_optimizer, options, {})
    if config.offload_params:
        extra: Tree = {}
        if config.offload_params == "nvme":
            extra = {"buffer_count": Choice(NVME_PARAM_BUFFER_COUNT, "DeepSpeed's default"),
                     "buffer_size": Choice(config.nvme_buffer_elements,
                                           "elements per swap buffer: at least the largest "
                                           "per-GPU parameter partition")}
        z["offload_param"] = _offload(config.offload_params, options, extra)
    return z


def ds_config(est: Estimate, config: ZeroConfig, options: EmitOptions) -> Tree:
    """The whole ds_config.json as a tree."""
    w, dp = est.workload, est.layout.dp
    tree: Tree = {
        "train_batch_size": Choice(w.micro_batch * w.grad_accum * dp,
                                   f"micro-batch {w.micro_batch} x grad-accum {w.grad_accum} x "
                                   f"{dp} GPUs (sequences of {w.seq_len} tokens)"),
        "train_micro_batch_size_per_gpu": Choice(w.micro_batch, "the micro-batch the estimate fits"),
        "gradient_accumulation_steps": Choice(w.grad_accum, "gives the global batch"),
        "gradient_clipping": Choice(1.0, "clip the global gradient norm at 1.0, the usual LLM setting"),
    }
    if w.precision == "bf16":
        tree["bf16"] = {"enabled": Choice(True, precision_why(est))}
    elif w.precision == "fp16":
        tree["fp16"] = {"enabled": Choice(True, precision_why(est)),
                        "loss_scale": Choice(0, "0 = dynamic loss scaling"),
                        "initial_scale_power": Choice(16, "start at 2^16"),
                        "loss_scale_window": Choice(1000), "hysteresis": Choice(2),
                        "min_loss_scale": Choice(1)}
    tree["zero_optimization"] = _zero_optimization(est, config, options)
    if config.offload_optimizer:
        if w.optimizer == "adamw":
            tree["optimizer"] = {
                "type": Choice("AdamW", "DeepSpeed's CPU Adam runs the offloaded step (the rate the "
                               "estimate assumes); create accelerate.utils.DummyOptim in the script"),
                "params": {"lr": Choice("auto", "filled by Accelerate from DummyOptim(lr=...)"),
                           "weight_decay": Choice("auto", "filled from DummyOptim(weight_decay=...)")}}
        else:
            tree["zero_force_ds_cpu_optimizer"] = Choice(False, f"DeepSpeed has no CPU {w.optimizer}: "
                                                         "your torch optimizer steps on the CPU")
    return tree
