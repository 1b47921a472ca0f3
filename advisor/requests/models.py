"""Requests: the user's inputs as one bounded, validated pydantic model, shared by the CLI
(flags with dashes, advisor/cli/flags.py), the REST API (the same names with underscores) and
the Python API. A request is composed of the typed inputs' own fields: the model source here,
`ClusterOverrides` (advisor/core/hardware.py) and `WorkloadOptions` (advisor/core/workload.py),
plus what the search may choose (unset: searched). advisor/requests/resolve.py turns it into
the model's inputs."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar, cast

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from advisor.core.errors import InvalidInput
from advisor.core.hardware import ClusterOverrides
from advisor.core.model import MAX_PARAMS
from advisor.core.units import number_text, parse_count
from advisor.core.workload import (
    MAX_GRAD_ACCUM,
    MAX_MICRO_BATCH,
    ActCkpt,
    Precision,
    WorkloadOptions,
)
from advisor.strategies import FSDP_NAMES, STRATEGY_NAMES

Count = Annotated[float, BeforeValidator(lambda v: parse_count(v) if isinstance(v, str) else v)]
BatchTokens = Annotated[float, BeforeValidator(
    lambda v: parse_count(v, binary=True) if isinstance(v, str) else v)]
StrategyName = Literal[STRATEGY_NAMES]  # type: ignore[valid-type]
R = TypeVar("R", bound="JobRequest")


def _group(name: str, **more: Any) -> dict[str, Any]:
    """Field metadata the CLI (advisor/cli/flags.py) and the web form read: the group it is shown in."""
    return {"x-group": name, **more}


MODEL, CLUSTER, WORKLOAD = _group("model (one of)"), _group("cluster"), _group("workload")


class ModelSource(BaseModel):
    """The model, given one way: `params`, `model` (preset), `hf_config` or the shape fields."""

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


class JobRequest(WorkloadOptions, ClusterOverrides, ModelSource):
    """Model, cluster and workload of one training job. Give the model one way: `params`,
    `model` (preset), `hf_config` (config.json content) or the shape fields."""

    model_config = ConfigDict(extra="forbid", frozen=False, use_attribute_docstrings=True,
                              allow_inf_nan=False)

    gpus: str = Field(min_length=1, max_length=64, json_schema_extra=CLUSTER)
    """Cluster: 8xA100, 2x8xH100 (nodes x GPUs), 64xH100, 4xA100-40GB, 8xL40S."""
    profile: str | None = Field(default=None, max_length=128, json_schema_extra=CLUSTER)
    """Calibration profile name; "none" for the shipped priors; unset: the newest profile
    measured on this GPU, if any (see `advisor profiles`)."""
    # What the search chooses when unset (advisor/search/space.py):
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
    act_ckpt: ActCkpt | None = Field(default=None, json_schema_extra=WORKLOAD)
    """Activation checkpointing: none, selective, full; recommend searches all when unset,
    estimate uses none."""
    sync_each_micro_batch: bool | None = Field(default=None, json_schema_extra=WORKLOAD)
    """Reduce gradients every micro-batch, not once per step (Accelerate's sync_each_batch):
    with accumulation FSDP then keeps only sharded gradients; recommend tries both for FSDP
    when unset, estimate uses false."""
    fsdp_version: Literal[1, 2] | None = Field(default=None, json_schema_extra=WORKLOAD)
    """FSDP strategies only: 2 (fully_shard, the default) or 1."""

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
    code_changes: bool = Field(default=True, json_schema_extra=WORKLOAD)
    """Plans may need a change in the training script (selective checkpointing and the fused
    loss via the plan's advisor_ac.py, pure 16-bit loading); false (--no-code-changes): only
    what the config files alone realize."""

    @model_validator(mode="after")
    def _fsdp_version(self) -> RecommendRequest:
        _fsdp_version_applies(list(self.strategies or STRATEGY_NAMES), self.fsdp_version)
        return self

    @model_validator(mode="after")
    def _code_changes(self) -> RecommendRequest:
        if self.code_changes:
            return self
        asked = [flag for flag, on in (
            ("--act-ckpt selective", self.act_ckpt == "selective"), ("--fused-loss", self.fused_loss),
            ("--no-master-weights", not self.master_weights and self.precision != "fp32"),
            ("--no-flash-attention", not self.flash_attention)) if on]
        if asked:
            raise InvalidInput("code_changes", f"--no-code-changes contradicts {', '.join(asked)}, "
                               "which the training script must do", "drop one of them")
        return self


def _allowed(model_cls: type[BaseModel], field: str) -> str | None:
    info = model_cls.model_fields.get(field)
    if info is None:
        return None
    lo = hi = None
    for meta in info.metadata:
        if isinstance(meta, Gt):
            lo = f"> {number_text(cast(float, meta.gt))}"
        elif isinstance(meta, Ge):
            lo = f">= {number_text(cast(float, meta.ge))}"
        if isinstance(meta, Le):
            hi = f"<= {number_text(cast(float, meta.le))}"
        elif isinstance(meta, Lt):
            hi = f"< {number_text(cast(float, meta.lt))}"
    return " and ".join(x for x in (lo, hi) if x) or None


def validate_request(model_cls: type[R], data: dict[str, Any]) -> R:
    """Build a request, turning the first validation error into InvalidInput(field, ...)."""
    try:
        return model_cls.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "request"
        message = err["msg"].replace("Value error, ", "")
        top = str(err["loc"][0]) if err["loc"] else ""
        raise InvalidInput(field, message, _allowed(model_cls, top)) from None


