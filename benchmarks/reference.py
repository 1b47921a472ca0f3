"""Published throughput rows (benchmarks/data/throughput.csv) as advisor inputs.

Each expressible row becomes a `Case`: cluster, model, workload, strategy and the measured
tokens/s/GPU and MFU. Assumptions for rows that leave something out are written next to them.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from advisor.core.context import Context
from advisor.core.hardware import Cluster, parse_cluster
from advisor.core.model import ModelSpec, preset
from advisor.core.protocol import Strategy, make_context
from advisor.core.workload import Workload
from advisor.strategies import get_strategy

# The published measurements, copied into the repository with their sources (data/README.md).
DATA = Path(__file__).parent / "data"
GPU = {"A100-80GB": "A100-80GB", "A100-40GB": "A100-40GB", "H100-80GB-SXM": "H100-80GB"}


@dataclass(frozen=True)
class Case:
    source: str
    label: str
    cluster: Cluster
    model: ModelSpec
    workload: Workload
    strategy: Strategy
    tokens_per_s_per_gpu: float
    mfu: float | None
    note: str = ""

    def context(self, priors) -> Context:
        return make_context(self.cluster, self.model, self.workload, priors, self.strategy)

    @property
    def gpu(self) -> str:
        return self.cluster.gpu.name

    @property
    def size_group(self) -> str:
        return self.model.name


def _notes(text: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in re.findall(r"(\w+=[^;]+)", text))


def _mpt(row: dict, notes: dict) -> ModelSpec:
    """MPT architecture (llm-foundry yamls): LayerNorm without bias, no linear biases, ALiBi,
    tied embeddings, 4h GeLU MLP; num_params from the row's notes is exact."""
    h, heads = int(row["hidden"]), int(row["heads"])
    params = int(notes.get("num_params", float(row["params_b"]) * 1e9))
    return ModelSpec(name=row["model"], layers=int(row["layers"]), hidden=h, heads=heads,
                     kv_heads=heads, ffn=4 * h, vocab=int(row["vocab"]), gated_mlp=False,
                     tied_embeddings=True, norm="layernorm", position_embedding="alibi",
                     decoder_layer_class="MPTBlock", params_override=params,
                     source="MPT yaml shape (benchmarks/data/throughput.csv)")


def llm_foundry_cases() -> list[Case]:
    """MosaicML llm-foundry rows: FSDP1 FULL_SHARD / SHARD_GRAD_OP, one row per benchmark.

    As llm-foundry runs them: Composer reduce-scatters every micro-batch under FSDP (its
    `ddp_sync_context` applies no_sync only to DDP), and MPT's default loss is flash-attn's
    fused cross-entropy (`loss_fn: fused_crossentropy`)."""
    cases = []
    with open(DATA / "throughput.csv") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        if "mosaicml" not in row["source"] or row["gpu"] not in GPU:
            continue
        notes = _notes(row["notes"])
        n = int(row["num_gpus"])
        mb, gb = int(row["micro_batch"]), int(row["global_batch"])
        workload = Workload(seq_len=int(row["seq_len"]), micro_batch=mb,
                            grad_accum=max(1, gb // (mb * n)),
                            precision="fp8" if "fp8" in row["precision"] else "bf16",
                            act_ckpt=row["act_ckpt"] or "none",
                            sync_each_micro_batch=True, fused_loss=True)
        name = "fsdp-grad-op" if "SHARD_GRAD_OP" in row["strategy"] else "fsdp"
        cases.append(Case(
            source="llm-foundry", cluster=parse_cluster(f"{n}x{GPU[row['gpu']]}"),
            model=_mpt(row, notes), workload=workload, strategy=get_strategy(name, 1),
            tokens_per_s_per_gpu=float(row["tokens_per_s_per_gpu"]),
            mfu=float(row["mfu"]) if row["mfu"] else None,
            label=(f"{row['model']} {n}x{row['gpu']} s={row['seq_len']} mb={mb} "
                   f"{row['act_ckpt']} {row['precision']}")))
    return cases


def granite_cases() -> list[Case]:
    """HF blog 'From DeepSpeed to FSDP and Back Again': Granite-7B (Llama-2-7B shape), 4 x A100,
    batch 8, bf16. Not stated, assumed: 80 GB A100s, sequence 4096 (step 10.4 s x 3158.7 tok/s
    = 32,850 tokens = 8 x 4096 per GPU), batch 8 per GPU, no accumulation, full checkpointing
    (8 x 4096 tokens of a 7B model do not fit in 80 GB without it)."""
    cluster = parse_cluster("4xA100-80GB")
    workload = Workload(seq_len=4096, micro_batch=8, act_ckpt="full")
    model = preset("granite-7b")
    return [
        Case("hf-blog", "Granite-7B 4xA100 FSDP (FSDP1)", cluster, model, workload,
             get_strategy("fsdp", 1), 3158.7, 0.41, "assumed s=4096, mb=8, full ckpt"),
        Case("hf-blog", "Granite-7B 4xA100 DeepSpeed ZeRO-3", cluster, model, workload,
             get_strategy("zero3"), 3094.5, 0.40, "assumed s=4096, mb=8, full ckpt"),
    ]


@dataclass(frozen=True)
class ReportedRun:
    """One row of a report that gives step time and memory but not the batch."""

    label: str
    strategy: Strategy
    workload: Workload
    step_s: float | None
    memory_gb: float | None
    """As reported ("GB", unit and method unspecified); None when it ran out of memory."""


FALCON_ISSUE_NOTE = ("not in the report, assumed: micro-batch 1, no accumulation, bf16, no "
                     "checkpointing, flash attention; FSDP FULL_SHARD via Accelerate (FSDP1), "
                     "shown with fp32 master weights and, as Accelerate < 0.30 kept a bf16-loaded "
                     "model, pure bf16")


def falcon_issue_runs() -> tuple[Cluster, ModelSpec, list[ReportedRun]]:
    """DeepSpeed issue #3901 (one user's report, 2023): Falcon-7B, sequence 4096, 8 x A100-40GB,
    step time and memory per GPU for FSDP and ZeRO-2/3 with and without offload. The batch is
    not stated, so only memory (at an assumed micro-batch of 1) and step-time ratios between
    strategies can be compared. "ZeRO-3 + offload params" alone is not one of advisor's plans
    and is left out; ZeRO-2 cannot offload parameters, so "ZeRO-2 offload optimizer and params"
    is zero2-offload."""
    rows = {}
    with open(DATA / "throughput.csv") as f:
        for row in csv.DictReader(f):
            if "3901" in row["source"]:
                rows[row["strategy"]] = row
    mixed = Workload(seq_len=4096, micro_batch=1)
    pure = mixed.model_copy(update={"master_weights": False})
    plans = [("FSDP (HF Accelerate)", "", get_strategy("fsdp", 1), mixed),
             ("FSDP (HF Accelerate)", ", pure bf16", get_strategy("fsdp", 1), pure),
             ("DeepSpeed ZeRO-2", "", get_strategy("zero2"), mixed),
             ("DeepSpeed ZeRO-2 + offload optimizer & params", "", get_strategy("zero2-offload"), mixed),
             ("DeepSpeed ZeRO-3", "", get_strategy("zero3"), mixed),
             ("DeepSpeed ZeRO-3 + offload optimizer & params", "", get_strategy("zero3-offload"), mixed)]
    runs = []
    for name, variant, strategy, workload in plans:
        row = rows[name]
        notes = _notes(row["notes"])
        step = float(notes["step_time_s"]) if "step_time_s" in notes else None
        memory = float(row["peak_mem_gib_per_gpu"]) if row["peak_mem_gib_per_gpu"] else None
        runs.append(ReportedRun(name + variant, strategy, workload, step, memory))
    return parse_cluster("8xA100-40GB"), preset("falcon-7b"), runs


TORCHTITAN = DATA / "torchtitan.csv"


def torchtitan_rows() -> list[dict]:
    """torchtitan's published FSDP2 runs (docs/performance.md, 64 x A100-80GB), as copied into
    benchmarks/data/torchtitan.csv with their source. Not used by the fit: held out."""
    with open(TORCHTITAN) as f:
        return list(csv.DictReader(f))


def torchtitan_cases() -> list[Case]:
    """The expressible torchtitan rows: FSDP2 FULL_SHARD, no accumulation, bf16 with fp32 shards
    (MixedPrecisionPolicy), HF-style loss (logits upcast to fp32). "selective op" maps to
    advisor's selective checkpointing; "selective layer" (every other layer) has no mapping."""
    cases = []
    for row in torchtitan_rows():
        if not row["act_ckpt"]:
            continue
        workload = Workload(seq_len=int(row["seq_len"]), micro_batch=int(row["micro_batch"]),
                            act_ckpt=row["act_ckpt"])
        cases.append(Case(
            source="torchtitan", cluster=parse_cluster(row["gpus"]), model=preset(row["model"]),
            workload=workload, strategy=get_strategy("fsdp", 2),
            tokens_per_s_per_gpu=float(row["tokens_per_s_per_gpu"]), mfu=float(row["mfu"]),
            label=(f"{row['model']} {row['gpus']} s={row['seq_len']} mb={row['micro_batch']} "
                   f"{row['act_ckpt_reported']}"), note=row["notes"]))
    return cases
