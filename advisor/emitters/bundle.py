"""What a plan folder holds besides the engine's configs, and where each decided setting goes.

- training_args.json: transformers' TrainingArguments for a Trainer script (the names are
  TrainingArguments fields, transformers 5.x): per-device micro-batch, accumulation, precision,
  checkpointing, torch.compile, the optimizer, gradients synced every micro-batch.
- advisor_ac.py (templates/bundle/, copied unchanged) and its arguments, plan.json["advisor_ac"]:
  what no config file can set (selective checkpointing, the fused loss).
- model_config.json: the model's transformers config.json (advisor/emitters/model_config.py), so
  the dry run and a from-scratch run build the architecture the plan was made for.
- plan.json: the estimate (the same JSON `advisor estimate --json` prints), every setting with
  the file and key that realizes it (`realized_by`), the code changes, and the files.

A setting is a *code change* when no file in the folder realizes it for a Trainer script:
`CODE_CHANGE` lists them; `advisor recommend --no-code-changes` searches without them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from advisor.core.engines import FsdpConfig
from advisor.core.results import Estimate
from advisor.core.units import GiB, TiB
from advisor.core.workload import Workload

HELPER = "advisor_ac.py"
FILE_ROLES = {
    "PLAN.md": "this plan, in words",
    "plan.json": "the estimate and, for every setting, the file and key that set it",
    "accelerate_config.yaml": "`accelerate launch --config_file`: engine, sharding, precision, machines",
    "ds_config.json": "DeepSpeed: ZeRO stage, buckets, offload, batch",
    "training_args.json": "TrainingArguments for a Trainer script: batch, accumulation, precision, "
                          "checkpointing, optimizer",
    "model_config.json": "the model's transformers config.json: the architecture the plan was made for",
    HELPER: "the code changes no config file can make: `advisor_ac.apply(model, ...)`",
    "launch.sh": "the launch command on each node",
}
APPLY = 'advisor_ac.apply(model, **json.load(open("plan.json"))["advisor_ac"])'
TRAINER_OPTIM = {"adamw": "adamw_torch", "adam8bit": "adamw_bnb_8bit", "sgd": "sgd"}
"""Workload optimizer -> TrainingArguments.optim."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One decided setting of the plan and what realizes it."""

    name: str
    """The Workload field (or `engine` / `strategy`)."""
    value: Any
    where: tuple[str, ...]
    """`file: key` for each file that carries it, or the call that makes it."""
    code_change: bool = False
    """True when the training script must do it (no file in the folder can)."""


def code_changes(w: Workload) -> list[tuple[str, Any, str]]:
    """(setting, value, what the script must do) for the settings no file realizes."""
    out: list[tuple[str, Any, str]] = []
    if w.act_ckpt == "selective":
        out.append(("act_ckpt", "selective", f"{APPLY}: selective checkpointing of every decoder "
                    "layer (torch's create_selective_checkpoint_contexts: matmul and attention "
                    "outputs kept, the rest recomputed)"))
    if w.fused_loss:
        out.append(("fused_loss", True, f"{APPLY}: the head and cross-entropy as one chunked "
                    "operation (advisor_ac.ChunkedLinearCrossEntropy), no [tokens, vocab] logits"))
    if not w.master_weights and w.precision in ("bf16", "fp16"):
        dtype = "bfloat16" if w.precision == "bf16" else "float16"
        out.append(("master_weights", False, f"load the model in {w.precision} "
                    f"(`from_pretrained(..., dtype=torch.{dtype})`) and train without mixed "
                    "precision: no fp32 master weights"))
    if not w.flash_attention:
        out.append(("flash_attention", False, 'load the model with attn_implementation="eager"'))
    return out


CODE_CHANGE = ("act_ckpt=selective", "fused_loss", "master_weights=false", "flash_attention=false")
"""The settings `code_changes` reports, as the search restricts them (`--no-code-changes`)."""


def advisor_ac_kwargs(est: Estimate) -> dict[str, Any]:
    """advisor_ac.apply's arguments for this plan. Full checkpointing of an FSDP plan is
    Accelerate's switch (fsdp_activation_checkpointing), so apply leaves it alone there."""
    w = est.workload
    full_by_accelerate = isinstance(est.engine_config, FsdpConfig) and w.act_ckpt == "full"
    return {"act_ckpt": "none" if full_by_accelerate else w.act_ckpt, "every": 1,
            "fused_loss": w.fused_loss}


def training_args(est: Estimate) -> dict[str, Any]:
    """TrainingArguments(**json.load(open("training_args.json"))) for a Trainer script."""
    w = est.workload
    mixed = w.master_weights and w.precision in ("bf16", "fp16")
    trainer_ckpt = w.act_ckpt == "full" and not isinstance(est.engine_config, FsdpConfig)
    args: dict[str, Any] = {
        "per_device_train_batch_size": w.micro_batch,
        "gradient_accumulation_steps": w.grad_accum,
        "bf16": mixed and w.precision == "bf16",
        "fp16": mixed and w.precision == "fp16",
        "gradient_checkpointing": trainer_ckpt,
    }
    if trainer_ckpt:
        args["gradient_checkpointing_kwargs"] = {"use_reentrant": False}
    if not (est.engine == "deepspeed" and "optimizer" in _ds_keys(est)):
        args["optim"] = TRAINER_OPTIM[w.optimizer]
    if w.compile:
        args["torch_compile"] = True
    if w.sync_each_micro_batch and w.grad_accum > 1:
        args["accelerator_config"] = {"gradient_accumulation_kwargs": {"sync_each_batch": True}}
    return args


def _ds_keys(est: Estimate) -> set[str]:
    """Top-level ds_config.json keys that decide the Trainer's optimizer (DeepSpeed builds it)."""
    config = est.engine_config
    offload = getattr(config, "offload_optimizer", None)
    return {"optimizer"} if offload and est.workload.optimizer == "adamw" else set()


def settings(est: Estimate) -> list[Setting]:
    """Every setting the search decided or the user fixed, with what realizes it."""
    w, fsdp = est.workload, isinstance(est.engine_config, FsdpConfig)
    ds = est.engine == "deepspeed"
    out = [
        Setting("strategy", est.strategy, ("accelerate_config.yaml: distributed_type",
                                          *(("ds_config.json: zero_optimization",) if ds else ()))),
        Setting("micro_batch", w.micro_batch, ("training_args.json: per_device_train_batch_size",
                                              *(("ds_config.json: train_micro_batch_size_per_gpu",)
                                                if ds else ()))),
        Setting("grad_accum", w.grad_accum, ("training_args.json: gradient_accumulation_steps",
                                            *(("ds_config.json: gradient_accumulation_steps",)
                                              if ds else ()))),
        Setting("seq_len", w.seq_len, ("your data pipeline: pack or truncate samples to "
                                      f"{w.seq_len} tokens",)),
        Setting("precision", w.precision, ("ds_config.json: bf16 / fp16" if ds else
                                          "accelerate_config.yaml: mixed_precision",
                                          "training_args.json: bf16 / fp16")),
    ]
    ckpt: tuple[str, ...] = {
        "none": ("nothing to do",),
        "full": ("accelerate_config.yaml: fsdp_activation_checkpointing",) if fsdp else
                ("training_args.json: gradient_checkpointing", f"or {APPLY}"),
        "selective": (APPLY,)}[w.act_ckpt]
    out.append(Setting("act_ckpt", w.act_ckpt, ckpt, code_change=w.act_ckpt == "selective"))
    out.append(Setting("optimizer", w.optimizer, ("ds_config.json: optimizer",) if _ds_keys(est)
                       else ("training_args.json: optim",)))
    if w.fused_loss:
        out.append(Setting("fused_loss", True, (APPLY,), code_change=True))
    if not w.master_weights:
        out.append(Setting("master_weights", False, ("load the model in the 16-bit dtype",),
                           code_change=w.precision != "fp32"))
    if w.compile:
        out.append(Setting("compile", True, ("training_args.json: torch_compile",)))
    if w.sync_each_micro_batch and w.grad_accum > 1:
        out.append(Setting("sync_each_micro_batch", True,
                           ("training_args.json: accelerator_config.gradient_accumulation_kwargs",)))
    if not w.flash_attention:
        out.append(Setting("flash_attention", False, ('attn_implementation="eager"',), code_change=True))
    return out


def plan_json(est: Estimate, estimate_json: str, files: list[str]) -> str:
    """plan.json: the estimate and how the folder realizes it."""
    doc = {
        "plan_format": 1,
        "files": files,
        "settings": [{"name": s.name, "value": s.value, "where": list(s.where),
                      "code_change": s.code_change} for s in settings(est)],
        "code_changes": [{"setting": n, "value": v, "what": what} for n, v, what in
                         code_changes(est.workload)],
        "advisor_ac": advisor_ac_kwargs(est),
        "cluster_options": cluster_options(est),
        "estimate": json.loads(estimate_json),
    }
    return json.dumps(doc, indent=2) + "\n"


def cluster_options(est: Estimate) -> dict[str, float]:
    """The node resources the plan was made for, as the request options that set them (no
    runnable file holds them; `advisor estimate --plan` reads them back)."""
    c, m = est.cluster, est.memory
    return {"cpu_ram_gib": m.cpu_capacity_per_node_bytes / GiB,
            "nvme_tib": m.nvme_capacity_per_node_bytes / TiB,
            "nvme_gbps": c.nvme_bytes_per_s_per_node * 8 / 1e9,
            "inter_node_gbps": c.inter_node_bytes_per_s * 8 / 1e9}
