"""A plan folder read back into the request that the files describe: what a training job launched
from these files would do, not what plan.json says the advisor meant.

Read from the runnable files: the strategy (accelerate_config.yaml's distributed_type, fsdp_config,
parallelism_config; ds_config.json's ZeRO stage and offload), the machines (num_machines,
num_processes), precision (mixed_precision; ds_config's bf16 / fp16), micro-batch and accumulation
(training_args.json; ds_config.json for DeepSpeed, which wins there), checkpointing (Accelerate's
fsdp_activation_checkpointing, TrainingArguments' gradient_checkpointing, advisor_ac.apply's
arguments in plan.json["advisor_ac"]), the optimizer, torch.compile and per-micro-batch sync
(training_args.json), and the model (model_config.json). Only what no runnable file holds comes from
plan.json: the GPU type and node options the plan was made for, the sequence length (the data
pipeline's), and the code changes the script is told to make (pure 16-bit loading).

`advisor estimate --plan DIR` re-estimates a folder this way (after a user edits its files), and
tests/test_plan_readback.py checks every emitted folder gives back its own plan.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from advisor.core.errors import InvalidInput
from advisor.emitters.bundle import TRAINER_OPTIM

FIELD = "plan"
_OPTIM = {v: k for k, v in TRAINER_OPTIM.items()}


def _read(folder: Path, name: str, required: bool = True) -> Any:
    path = folder / name
    if not path.is_file():
        if required:
            raise InvalidInput(FIELD, f"{folder} has no {name}", "a folder written by advisor emit")
        return None
    try:
        text = path.read_text()
        return yaml.safe_load(text) if name.endswith(".yaml") else json.loads(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise InvalidInput(FIELD, f"cannot read {name}: {exc}".splitlines()[0],
                           "the file as advisor emit wrote it, or edited to valid syntax") from None


def _strategy(acc: dict[str, Any], ds: dict[str, Any] | None) -> tuple[str, int | None]:
    """(strategy name, FSDP version or None) from the engine's keys."""
    kind = acc.get("distributed_type")
    if kind == "DEEPSPEED":
        if ds is None:
            raise InvalidInput(FIELD, "distributed_type DEEPSPEED but no ds_config.json", "both files")
        z = ds.get("zero_optimization") or {}
        stage = z.get("stage")
        opt = (z.get("offload_optimizer") or {}).get("device", "none")
        par = (z.get("offload_param") or {}).get("device", "none")
        names: dict[tuple[Any, Any, Any], str] = {(1, "none", "none"): "zero1", (2, "none", "none"): "zero2",
                 (2, "cpu", "none"): "zero2-offload", (3, "none", "none"): "zero3",
                 (3, "cpu", "cpu"): "zero3-offload", (3, "nvme", "nvme"): "zero3-nvme"}
        name = names.get((stage, opt, par))
        if name is None:
            raise InvalidInput(FIELD, f"ds_config.json: ZeRO stage {stage} with offload_optimizer "
                               f"{opt} and offload_param {par} is no strategy the advisor models",
                               ", ".join(f"stage {s} / {o} / {p}" for s, o, p in names))
        return name, None
    if kind == "FSDP":
        f = acc.get("fsdp_config") or {}
        version = int(f.get("fsdp_version", 1))
        if f.get("fsdp_offload_params"):
            return "fsdp-offload", version
        reshard = f.get("fsdp_sharding_strategy") if version == 1 else f.get("fsdp_reshard_after_forward")
        replicate = (acc.get("parallelism_config") or {}).get("parallelism_config_dp_replicate_size", 1)
        if reshard == "HYBRID_SHARD" or (version == 2 and replicate > 1):
            return "hsdp", version
        if reshard in (False, "SHARD_GRAD_OP"):
            return "fsdp-grad-op", version
        return "fsdp", version
    if kind in ("MULTI_GPU", "NO"):
        return "ddp", None
    raise InvalidInput(FIELD, f"accelerate_config.yaml: distributed_type {kind!r}",
                       "DEEPSPEED, FSDP, MULTI_GPU or NO")


def request_from_plan(folder: str | Path) -> dict[str, Any]:
    """EstimateRequest fields for the job the folder's files describe."""
    root = Path(folder).expanduser()
    acc = _read(root, "accelerate_config.yaml")
    ds = _read(root, "ds_config.json", required=False)
    args = _read(root, "training_args.json")
    plan = _read(root, "plan.json")
    model = _read(root, "model_config.json")
    if not all(isinstance(x, dict) for x in (acc, args, plan, model)):
        raise InvalidInput(FIELD, "a plan file does not hold a mapping", "the files advisor emit wrote")
    strategy, version = _strategy(acc, ds)
    est, ac = plan.get("estimate") or {}, plan.get("advisor_ac") or {}
    cluster = est.get("cluster") or {}
    nodes, gpus = int(acc.get("num_machines", 1)), int(acc.get("num_processes", 1))
    if not cluster.get("gpu") or gpus % nodes:
        raise InvalidInput(FIELD, f"num_processes {gpus} over num_machines {nodes}, GPU "
                           f"{cluster.get('gpu')!r}", "whole nodes of one GPU type")
    deepspeed = strategy.startswith("zero")
    micro = ds.get("train_micro_batch_size_per_gpu") if deepspeed and ds else args.get(
        "per_device_train_batch_size")
    accum = ds.get("gradient_accumulation_steps") if deepspeed and ds else args.get(
        "gradient_accumulation_steps")
    if deepspeed and ds:
        precision = "bf16" if (ds.get("bf16") or {}).get("enabled") else (
            "fp16" if (ds.get("fp16") or {}).get("enabled") else "fp32")
    else:
        mixed = acc.get("mixed_precision", "no")
        precision = {"bf16": "bf16", "fp16": "fp16", "no": "fp32"}.get(mixed, "fp32")
    pure = [c for c in plan.get("code_changes") or [] if c.get("setting") == "master_weights"]
    if pure and precision == "fp32":  # mixed precision off and the model loaded in 16 bits
        precision = str(est.get("workload", {}).get("precision", "bf16"))
    fsdp_full = bool((acc.get("fsdp_config") or {}).get("fsdp_activation_checkpointing"))
    ckpt = ac.get("act_ckpt", "none")
    if fsdp_full or args.get("gradient_checkpointing"):
        ckpt = "full" if ckpt == "none" else ckpt
    sync = bool(((args.get("accelerator_config") or {}).get("gradient_accumulation_kwargs") or {})
                .get("sync_each_batch"))
    workload = est.get("workload") or {}
    request: dict[str, Any] = {
        "hf_config": model, "gpus": f"{nodes}x{gpus // nodes}x{cluster['gpu']}", "strategy": strategy,
        "micro_batch": micro, "grad_accum": accum, "precision": precision, "act_ckpt": ckpt,
        "seq_len": workload.get("seq_len"), "fused_loss": bool(ac.get("fused_loss")),
        "master_weights": not pure, "compile": bool(args.get("torch_compile")),
        "sync_each_micro_batch": sync,
        "flash_attention": not any(c.get("setting") == "flash_attention"
                                   for c in plan.get("code_changes") or []),
    }
    if version is not None:
        request["fsdp_version"] = version
    if "optim" in args:
        request["optimizer"] = _OPTIM.get(args["optim"], args["optim"])
    elif ds and "optimizer" in ds:
        request["optimizer"] = "adamw"
    request |= {k: v for k, v in (plan.get("cluster_options") or {}).items() if v is not None}
    info = est.get("model") or {}
    if info.get("inferred"):  # the shape came from the parameter count: infer it again
        del request["hf_config"]
        request["params"] = info["params"]
    return request
