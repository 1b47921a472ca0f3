"""Request and response schemas of the REST API, in one module.

The request bodies ARE the CLI's request models (`advisor/requests/models.py`): the subclasses here add
OpenAPI examples and one API-only bound (the pasted config.json must hold finite numbers in a
shallow tree), nothing else. Responses are the result dataclasses of `advisor/core/results.py`,
serialised by `advisor/core/schemas.py`, so `advisor ... --json` and the API print the same JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from advisor.core.jsontree import check_tree
from advisor.core.model import ModelSpec
from advisor.requests import models as inputs

MAX_HF_CONFIG_DEPTH = 16  # real config.json files nest 3-4 levels (rope_scaling, attn_config)
MAX_HF_CONFIG_ITEMS = 4096  # keys + list items; a real config.json has about 30-300

_HF_EXAMPLE = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
               "num_key_value_heads": 8, "num_hidden_layers": 32, "intermediate_size": 14336,
               "vocab_size": 128256, "max_position_embeddings": 8192}


def _check_tree(value: Any) -> None:
    """Reject NaN/Infinity (JSON parsers accept them) and trees too deep or too large."""
    check_tree(value, MAX_HF_CONFIG_DEPTH, MAX_HF_CONFIG_ITEMS)


_BOUNDS = {"gt": "exclusiveMinimum", "ge": "minimum", "lt": "exclusiveMaximum", "le": "maximum"}
# What `advisor.core.units.parse_count` reads: 13e9, 7B, 4M, 300B (K/M/B/G/T, any case).
COUNT_PATTERN = r"^\s*[0-9]*\.?[0-9]+([eE][+-]?[0-9]+)?\s*[KMBGTkmbgt]?\s*$"


def _schema_extra(examples: list[dict[str, Any]]) -> Callable[[dict[str, Any]], None]:
    """Examples, plus two repairs of the derived JSON Schema: pydantic leaves the bounds of
    the count fields (`params`, `tokens`, `global_batch_tokens`: numbers or "13B"-style strings)
    as non-standard `gt`/`le` keys; they become JSON Schema keywords and gain the string form."""

    def extra(schema: dict[str, Any]) -> None:
        schema["examples"] = examples
        for prop in schema.get("properties", {}).values():
            for arm in prop.get("anyOf", []):
                if any(key in arm for key in _BOUNDS):
                    for short, keyword in _BOUNDS.items():
                        if short in arm:
                            arm[keyword] = arm.pop(short)
                    prop["anyOf"].insert(1, {"type": "string", "pattern": COUNT_PATTERN})
                    break

    return extra


class _HFConfigBound(BaseModel):
    @field_validator("hf_config", check_fields=False)
    @classmethod
    def _bounded_hf_config(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            _check_tree(value)
        return value


class EstimateRequest(_HFConfigBound, inputs.EstimateRequest):
    """One strategy at the given settings (as `advisor estimate`)."""

    model_config = ConfigDict(title="EstimateRequest", json_schema_extra=_schema_extra([
        {"params": 13e9, "gpus": "8xA100", "strategy": "fsdp", "micro_batch": 2,
         "act_ckpt": "selective"},
        {"model": "llama-3-70b", "gpus": "4x8xH100", "strategy": "zero3", "seq_len": 8192,
         "global_batch_tokens": "4M", "tokens": "1T"},
        {"hf_config": _HF_EXAMPLE, "gpus": "8xL40S", "strategy": "zero2-offload"},
    ]))


class RecommendRequest(_HFConfigBound, inputs.RecommendRequest):
    """Every strategy at its best settings, ranked (as `advisor recommend`)."""

    model_config = ConfigDict(title="RecommendRequest", json_schema_extra=_schema_extra([
        {"params": 13e9, "gpus": "8xA100"},
        {"model": "llama-3-8b", "gpus": "2x8xH100", "seq_len": 8192,
         "global_batch_tokens": "4M", "tokens": "300B", "strategies": ["fsdp", "zero2", "zero3"]},
        {"hf_config": _HF_EXAMPLE, "gpus": "8xA100-40GB", "precision": "bf16"},
    ]))


class ConfigsRequest(RecommendRequest):
    """The job, as for /v1/recommend; the files are emitted for the recommended plan, or for
    the best plan of `strategy` when given."""

    model_config = ConfigDict(title="ConfigsRequest", json_schema_extra=_schema_extra([
        {"params": 13e9, "gpus": "8xA100"},
        {"model": "llama-3-8b", "gpus": "2x8xH100", "strategy": "zero3",
         "global_batch_tokens": "4M"},
    ]))

    strategy: inputs.StrategyName | None = None
    """Emit this strategy's best plan instead of the recommended one."""
    nvme_path: str | None = Field(default=None, min_length=1, max_length=1024)
    """Directory on a local NVMe drive of every node, for zero3-nvme (`advisor emit --nvme-path`);
    written into the files, never touched by the server."""


class FieldError(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)

    field: str
    """Dotted path of the offending field, e.g. `seq_len` or `strategies.0`."""
    message: str
    allowed: str | None = None
    """The allowed range or values."""


class ErrorResponse(BaseModel):
    """Every error the API returns, whatever its status code."""

    model_config = ConfigDict(use_attribute_docstrings=True, json_schema_extra=_schema_extra([
        {"code": "invalid_input", "message": "seq_len: Input should be less than or equal to "
         "1048576", "field": "seq_len", "allowed": "> 0 and <= 1048576", "errors": []},
    ]))

    code: str
    """invalid_input (422), unsupported_input (422: valid, but outside what the cost model can
    evaluate), infeasible (422: nothing fits), bad_request (400), unauthorized (401: a profile
    write without the right bearer token), forbidden (403: profile writes disabled), not_found (404),
    method_not_allowed (405), body_too_large (413), unsupported_media_type (415),
    not_implemented (501) or internal_error (500)."""
    message: str
    """One line for people."""
    field: str | None = None
    """The first offending field, when the error is about one."""
    allowed: str | None = None
    """What that field accepts: a range, or the valid names (GPUs, presets, strategies)."""
    errors: list[FieldError] = Field(default_factory=list)
    """Every field error, when there are several."""


class Health(BaseModel):
    status: str = "ok"
    version: str


# A preset as `advisor models --json` prints it: ModelSpec's fields plus the exact `params`.
_PRESET_FIELDS: dict[str, Any] = {
    "params": (int, ...),
    **{name: (info.annotation, info) for name, info in ModelSpec.model_fields.items()
       if name != "params_override"},
}
ModelPreset = create_model("ModelPreset", __config__=ConfigDict(extra="forbid"), **_PRESET_FIELDS)
