"""Requests: the user's inputs as one bounded, validated pydantic model, shared by the CLI
(flags with dashes) and the REST API (the same names with underscores), and their resolution
into the model's three inputs (Cluster, ModelSpec, Workload / SearchSpace)."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from advisor.core.errors import Infeasible, InvalidInput
from advisor.core.hardware import Cluster, ClusterOverrides, parse_cluster
from advisor.core.model import MAX_PARAMS, ModelSpec, infer_from_params, preset
from advisor.core.priors import Priors
from advisor.core.units import parse_count
from advisor.core.workload import (
    ACT_CKPTS,
    MAX_GRAD_ACCUM,
    MAX_MICRO_BATCH,
    MAX_SEQ_LEN,
    ActCkpt,
    OptimizerName,
    Precision,
    Workload,
)
from advisor.search.ranking import MICRO_BATCH_LADDER, SearchSpace, check_global_batch, grad_accum_for
from advisor.strategies import FSDP_NAMES, STRATEGY_NAMES

Count = Annotated[float, BeforeValidator(lambda v: parse_count(v) if isinstance(v, str) else v)]
BatchTokens = Annotated[float, BeforeValidator(
    lambda v: parse_count(v, binary=True) if isinstance(v, str) else v)]
StrategyName = Literal[STRATEGY_NAMES]  # type: ignore[valid-type]


def _whole_count(v: Any) -> Any:
    """`4k` / `32K` / `128k` (binary: 4,096 tokens) or a plain integer, for sequence lengths."""
    if not isinstance(v, str):
        return v
    value = parse_count(v, binary=True)
    if not math.isfinite(value) or value != int(value):
        raise ValueError(f"{v!r} is not a whole number of tokens (e.g. 4096, 4k, 32K)")
    return int(value)


SeqLen = Annotated[int, BeforeValidator(_whole_count)]


def _group(name: str, **more: Any) -> dict[str, Any]:
    """Field metadata the CLI (advisor/flags.py) and the web form read: the group it is shown in."""
    return {"x-group": name, **more}


MODEL, CLUSTER, WORKLOAD = _group("model (one of)"), _group("cluster"), _group("workload")


class JobRequest(BaseModel):
    """Model, cluster and workload of one training job. Give the model one way: `params`,
    `model` (preset), `hf_config` (config.json content) or the shape fields."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    params: Count | None = Field(default=None, gt=0, le=MAX_PARAMS, json_schema_extra=MODEL)
    """Parameter count, e.g. 13e9 or 7B; alone, a standard shape is inferred."""
    model: str | None = Field(default=None, max_length=64, json_schema_extra=MODEL)
    """Preset id (see `advisor models`)."""
    hf_config: dict[str, Any] | None = Field(default=None, json_schema_extra=_group(
        "model (one of)", **{"x-cli": "path-json"}))
    """Contents of a Hugging Face config.json (on the command line: the path of a local file)."""
    layers: int | None = Field(default=None, gt=0, le=1024, json_schema_extra=MODEL)
    """Shape: decoder layers."""
    hidden: int | None = Field(default=None, gt=0, le=131072, json_schema_extra=MODEL)
    """Shape: hidden size."""
    heads: int | None = Field(default=None, gt=0, le=1024, json_schema_extra=MODEL)
    """Shape: attention heads."""
    kv_heads: int | None = Field(default=None, gt=0, le=1024, json_schema_extra=MODEL)
    """Shape: key/value heads (default: heads)."""
    ffn: int | None = Field(default=None, gt=0, le=1048576, json_schema_extra=MODEL)
    """Shape: MLP intermediate size."""
    vocab: int | None = Field(default=None, gt=0, le=4194304, json_schema_extra=MODEL)
    """Shape: vocabulary size."""
    gated_mlp: bool = Field(default=True, json_schema_extra=MODEL)
    """Shape: gated SwiGLU MLP (false: a plain 2-matrix MLP)."""
    tied_embeddings: bool = Field(default=False, json_schema_extra=MODEL)
    """Shape: the output head shares the input embedding."""
    gpus: str = Field(min_length=1, max_length=64, json_schema_extra=CLUSTER)
    """Cluster: 8xA100, 2x8xH100 (nodes x GPUs), 64xH100, 4xA100-40GB, 8xL40S."""
    gpus_per_node: int | None = Field(default=None, gt=0, le=72, json_schema_extra=CLUSTER)
    """GPUs per node (default: the GPU's typical server)."""
    inter_node_gbps: float | None = Field(default=None, ge=0.1, le=1e5, json_schema_extra=CLUSTER)
    """Network bandwidth per node, Gbit/s."""
    cpu_ram_gib: float | None = Field(default=None, ge=1, le=1e5, json_schema_extra=CLUSTER)
    """Host RAM per node, GiB."""
    nvme_gbps: float | None = Field(default=None, ge=0.1, le=1e5, json_schema_extra=CLUSTER)
    """NVMe bandwidth per node, Gbit/s."""
    seq_len: SeqLen = Field(default=4096, gt=0, le=MAX_SEQ_LEN, json_schema_extra=WORKLOAD)
    """Tokens per sample, e.g. 4096 or 4k (K = 1024 here)."""
    micro_batch: int | None = Field(default=None, gt=0, le=MAX_MICRO_BATCH, json_schema_extra=WORKLOAD)
    """Samples per GPU per forward/backward (recommend searches when unset)."""
    grad_accum: int | None = Field(default=None, gt=0, le=MAX_GRAD_ACCUM, json_schema_extra=WORKLOAD)
    """Micro-batches per optimizer step."""
    global_batch_tokens: BatchTokens | None = Field(default=None, gt=0, le=1e12, json_schema_extra=WORKLOAD)
    """Global batch in tokens, e.g. 4M (= 2^22: K/M/B are binary here); sets grad accumulation."""
    tokens: Count | None = Field(default=None, gt=0, le=1e16, json_schema_extra=WORKLOAD)
    """Tokens to train on, e.g. 300B, for the time to train."""
    precision: Precision | None = Field(default=None, json_schema_extra=WORKLOAD)
    """bf16 (default where supported, else fp16), fp16, fp32 or fp8."""
    optimizer: OptimizerName = Field(default="adamw", json_schema_extra=WORKLOAD)
    """adamw, adam8bit (bitsandbytes) or sgd."""
    master_weights: bool = Field(default=True, json_schema_extra=WORKLOAD)
    """Keep mixed precision's fp32 master weights and moments; false: pure 16-bit training (a
    bf16-loaded model without mixed precision; DDP and FSDP only)."""
    act_ckpt: ActCkpt | None = Field(default=None, json_schema_extra=WORKLOAD)
    """Activation checkpointing: none, selective, full; recommend searches all when unset,
    estimate uses none."""
    flash_attention: bool = Field(default=True, json_schema_extra=WORKLOAD)
    """Memory-efficient attention (flash / sdpa); false: eager attention keeping s x s scores."""
    compile: bool = Field(default=False, json_schema_extra=WORKLOAD)
    """torch.compile."""
    sync_each_micro_batch: bool | None = Field(default=None, json_schema_extra=WORKLOAD)
    """Reduce gradients every micro-batch, not once per step (Accelerate's sync_each_batch):
    with accumulation FSDP then keeps only sharded gradients; recommend tries both for FSDP
    when unset, estimate uses false."""
    fused_loss: bool = Field(default=False, json_schema_extra=WORKLOAD)
    """A fused cross-entropy kernel (no fp32 copy of the logits)."""
    fsdp_version: Literal[1, 2] | None = Field(default=None, json_schema_extra=WORKLOAD)
    """FSDP strategies only: 2 (fully_shard, the default) or 1."""
    profile: str | None = Field(default=None, max_length=128, json_schema_extra=CLUSTER)
    """Calibration profile name; "none" for the shipped priors; unset: the newest profile
    measured on this GPU, if any (see `advisor profiles`)."""

    @property
    def fsdp(self) -> Literal[1, 2]:
        """The FSDP version FSDP strategies use."""
        return self.fsdp_version or 2


def _fsdp_version_applies(strategies: list[str], version: int | None) -> None:
    """InvalidInput, not ValueError: it passes through pydantic and names its field."""
    if version is not None and not any(s in FSDP_NAMES for s in strategies):
        raise InvalidInput("fsdp_version", f"applies to the FSDP strategies only, not "
                           f"{', '.join(strategies)}", ", ".join(FSDP_NAMES))


class EstimateRequest(JobRequest):
    strategy: StrategyName = Field(default="fsdp", json_schema_extra=_group("strategy"))
    """The strategy to estimate."""

    @model_validator(mode="after")
    def _fsdp_version(self) -> EstimateRequest:
        _fsdp_version_applies([self.strategy], self.fsdp_version)
        return self


class RecommendRequest(JobRequest):
    strategies: list[StrategyName] | None = Field(
        default=None, min_length=1, max_length=len(STRATEGY_NAMES),
        json_schema_extra=_group("strategy", **{"x-cli": "comma-list"}))
    """Strategies to consider (default: all)."""

    @model_validator(mode="after")
    def _fsdp_version(self) -> RecommendRequest:
        _fsdp_version_applies(list(self.strategies or STRATEGY_NAMES), self.fsdp_version)
        return self


def _allowed(model_cls: type[BaseModel], field: str) -> str | None:
    info = model_cls.model_fields.get(field)
    if info is None:
        return None
    lo = hi = None
    for meta in info.metadata:
        if isinstance(meta, Gt | Ge):
            lo = f"{'>' if isinstance(meta, Gt) else '>='} {meta.gt if isinstance(meta, Gt) else meta.ge:g}"
        if isinstance(meta, Le | Lt):
            hi = f"{'<=' if isinstance(meta, Le) else '<'} {meta.le if isinstance(meta, Le) else meta.lt:g}"
    return " and ".join(x for x in (lo, hi) if x) or None


def validate_request(model_cls: type[JobRequest], data: dict[str, Any]) -> JobRequest:
    """Build a request, turning the first validation error into InvalidInput(field, ...)."""
    try:
        return model_cls.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "request"
        message = err["msg"].replace("Value error, ", "")
        top = str(err["loc"][0]) if err["loc"] else ""
        raise InvalidInput(field, message, _allowed(model_cls, top)) from None


def resolve_model(req: JobRequest) -> ModelSpec:
    from advisor.core.hf_config import from_hf_config

    shape = {k: getattr(req, k) for k in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab")}
    given = [name for name, present in (("params", req.params is not None), ("model", req.model),
                                        ("hf_config", req.hf_config is not None),
                                        ("layers", any(v is not None for v in shape.values())))
             if present]
    if len(given) != 1:
        raise InvalidInput("model", "give the model exactly one way" + (
            f", not {' and '.join(given)}" if given else ""), "--params, --model, --hf-config, "
            "or the shape flags --layers --hidden --heads --ffn --vocab [--kv-heads]")
    if "model" in given:
        spec = preset(req.model)
    elif "hf_config" in given:
        spec = from_hf_config(req.hf_config, source="hf_config")
    elif "layers" in given:
        missing = [k for k, v in shape.items() if v is None and k != "kv_heads"]
        if missing:
            raise InvalidInput(missing[0], "required with the shape flags",
                               "--layers --hidden --heads --ffn --vocab")
        try:
            spec = ModelSpec(name="custom", **{**shape, "kv_heads": shape["kv_heads"] or shape["heads"]},
                             gated_mlp=req.gated_mlp, tied_embeddings=req.tied_embeddings,
                             source="shape flags")
        except ValidationError as exc:
            raise InvalidInput("heads", exc.errors()[0]["msg"].replace("Value error, ", ""),
                               "heads dividing hidden, kv_heads dividing heads") from None
    else:
        spec = infer_from_params(req.params)
    return spec


def resolve_priors(req: JobRequest, cluster: Cluster) -> tuple[Priors, Cluster]:
    """The shipped priors, or a calibration profile's (named, or matched to the cluster's GPU),
    and the cluster with a note saying which profile was used."""
    from advisor.profiles.use import priors_for

    priors, note = priors_for(req.profile, cluster.gpu.name, cluster.gpus_per_node, cluster.nodes)
    return priors, (cluster.with_note(note) if note else cluster)


def resolve_cluster(req: JobRequest) -> Cluster:
    return parse_cluster(req.gpus, ClusterOverrides(
        gpus_per_node=req.gpus_per_node, inter_node_gbps=req.inter_node_gbps,
        cpu_ram_gib=req.cpu_ram_gib, nvme_gbps=req.nvme_gbps))


def base_workload(req: JobRequest, cluster: Cluster, model: ModelSpec) -> tuple[Workload, Cluster]:
    """The workload with precision resolved (bf16 where supported, else fp16), and the cluster
    with a note when the default fell back to fp16."""
    precision = req.precision or ("bf16" if cluster.gpu.supports("bf16") else "fp16")
    if req.precision is None and precision == "fp16":
        cluster = cluster.with_note(f"{cluster.gpu.name} has no bf16: using fp16 mixed precision")
    if not cluster.gpu.supports(precision):
        cluster.gpu.peak_flops(precision)  # raises InvalidInput naming the supported ones
    if model.position_embedding == "learned" and req.seq_len > model.max_position_embeddings:
        raise InvalidInput("seq_len", f"{model.name} has learned positions up to "
                           f"{model.max_position_embeddings}", f"1 to {model.max_position_embeddings}")
    workload = Workload(seq_len=req.seq_len, micro_batch=req.micro_batch or 1,
                        grad_accum=req.grad_accum or 1, precision=precision, optimizer=req.optimizer,
                        master_weights=req.master_weights,
                        act_ckpt=req.act_ckpt or "none", flash_attention=req.flash_attention,
                        compile=req.compile, sync_each_micro_batch=bool(req.sync_each_micro_batch),
                        fused_loss=req.fused_loss)
    return workload, cluster


def resolve_estimate(req: EstimateRequest) -> tuple[Cluster, ModelSpec, Workload]:
    cluster, model = resolve_cluster(req), resolve_model(req)
    workload, cluster = base_workload(req, cluster, model)
    if req.global_batch_tokens is not None:
        space = search_space(req, workload)
        ga = _grad_accum(space, workload.micro_batch, cluster.num_gpus)
        workload = workload.model_copy(update={"grad_accum": ga})
    return cluster, model, workload


def _grad_accum(space: SearchSpace, micro_batch: int, world: int) -> int:
    check_global_batch(space, world)
    try:
        return grad_accum_for(space, micro_batch, world)
    except Infeasible as exc:
        raise InvalidInput("global_batch_tokens", exc.reason,
                           "a multiple of micro_batch x seq_len x GPUs") from None


def search_space(req: JobRequest, workload: Workload) -> SearchSpace:
    if req.grad_accum is not None and req.global_batch_tokens is not None:
        raise InvalidInput("grad_accum", "give --grad-accum or --global-batch-tokens, not both")
    if req.global_batch_tokens is not None and req.global_batch_tokens != int(req.global_batch_tokens):
        raise InvalidInput("global_batch_tokens", f"{req.global_batch_tokens} is not a whole number "
                           "of tokens", "a positive integer, e.g. 4194304 or 4M")
    strategies = tuple(getattr(req, "strategies", None) or STRATEGY_NAMES)
    return SearchSpace(
        base=workload,
        micro_batches=(req.micro_batch,) if req.micro_batch else MICRO_BATCH_LADDER,
        act_ckpts=(req.act_ckpt,) if req.act_ckpt else ACT_CKPTS,
        sync_options=((req.sync_each_micro_batch,) if req.sync_each_micro_batch is not None
                      else (False, True)),
        grad_accum=req.grad_accum,
        global_batch_tokens=int(req.global_batch_tokens) if req.global_batch_tokens else None,
        strategies=strategies, fsdp_version=req.fsdp, tokens_to_train=req.tokens)
