"""Calibration profiles, the data: measured overrides of the priors for one cluster, with the
fit that produced them and the raw measurements, validated to physical ranges in one place
(shared by the API, `advisor profiles import` and the calibration writer) and sealed with a
checksum. advisor/profiles/use.py stores, lists and applies them.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from advisor.core.hardware import gpu_catalog
from advisor.core.jsontree import check_tree
from advisor.core.priors import Priors, default_priors
from advisor.core.text import SafeLongText, SafeText
from advisor.profiles.store import SCHEMA_VERSION

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
TERM_PATTERN = r"^[a-z0-9_]+(\.[a-z0-9_]+)*$"
MAX_MEASUREMENT_DEPTH = 16
MAX_MEASUREMENT_ITEMS = 200_000  # a full calibration records ~5,000 numbers
MAX_PROFILE_FILE_BYTES = 16 * 2**20  # `profiles import` reads at most this much


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True,
                              allow_inf_nan=False)


class Fingerprint(_Strict):
    """What a profile's numbers depend on: the device, how many, and the software stack."""

    device: Literal["cuda", "cpu"]
    """cuda: NVIDIA/AMD GPUs through torch.cuda; cpu: the gloo test mode (no GPU)."""
    gpu_name: SafeText = Field(min_length=1)
    """torch.cuda.get_device_name(), or 'cpu: <processor>' in CPU mode."""
    gpu_memory_bytes: int = Field(ge=0, le=2**44)
    gpus_per_node: int = Field(gt=0, le=1024)
    """GPUs per node (processes per node in CPU mode)."""
    nodes: int = Field(gt=0, le=65536)
    driver: SafeText | None = None
    cuda: SafeText | None = None
    nccl: SafeText | None = None
    torch: SafeText

    def key(self) -> str:
        """Stable id of the fingerprint: sha256 of its canonical JSON, 16 hex digits."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


class FitTerm(_Strict):
    """One fitted term: where it goes in `Priors`, its value and its relative uncertainty."""

    term: str = Field(pattern=TERM_PATTERN, max_length=128)
    """Dotted path into Priors, e.g. `gemm_efficiency.hopper` or `overlap.ddp`."""
    value: float | list[float] = Field(union_mode="left_to_right")
    """The scalar, or a curve's y values."""
    sigma: float = Field(ge=0, le=100)
    """Relative 1-sigma uncertainty (0.05 = 5%)."""
    samples: int = Field(ge=0)
    how: SafeLongText
    """Which measurement and which formula produced it."""


class DeviceNode(_Strict):
    """The measured stand-in's node (NodeDefaults' layout, advisor/core/hardware.py)."""

    gpus_per_node: int = Field(gt=0, le=1024)
    inter_node_in_Gbit_per_sec: float = Field(gt=0)
    cpu_ram_in_GiB: float = Field(gt=0)
    nvme_in_Gbit_per_sec: float = Field(gt=0)
    nvme_capacity_in_TiB: float = Field(ge=0)


class DeviceSpec(_Strict):
    """CPU mode's measured stand-in for a GPU datasheet, in GPUSpec's layout (advisor/profiles/standin.py
    reads it back as a GPUSpec): every rate positive and finite."""

    name: SafeText
    vendor: SafeText
    architecture: str = Field(pattern=r"^[a-z0-9_]{1,32}$")
    """Keys the profile's own GEMM curve and attention ratio."""
    memory_in_GiB: float = Field(gt=0)
    hbm_bandwidth_in_GB_per_sec: float = Field(gt=0)
    peak_bf16_dense_in_TFLOPS: float | None = Field(default=None, gt=0)
    peak_fp16_dense_in_TFLOPS: float = Field(gt=0)
    peak_fp32_in_TFLOPS: float = Field(gt=0)
    peak_fp8_dense_in_TFLOPS: float | None = Field(default=None, gt=0)
    intra_node_link: SafeText
    intra_node_bandwidth_in_GB_per_sec: float = Field(gt=0)
    pcie_bandwidth_in_GB_per_sec: float = Field(gt=0)
    node: DeviceNode
    source: SafeLongText


class Profile(_Strict):
    schema_version: int = SCHEMA_VERSION
    name: str = Field(pattern=NAME_PATTERN)
    created_at: str = Field(max_length=64)
    """ISO-8601 with a time zone (calibration writes UTC)."""
    fingerprint: Fingerprint
    catalog_gpu: str | None
    """The advisor's GPU catalog id the device matched (None in CPU mode: never auto-matched)."""
    device_spec: dict[str, Any] | None = None
    """CPU mode only: the measured stand-in for a GPU datasheet, in GPUSpec's field layout."""
    quick: bool
    command: SafeLongText
    """The command that produced it."""
    overrides: dict[str, Any]
    """Replacements for `Priors` fields, in its layout (curves as {x, y})."""
    fit: list[FitTerm] = Field(max_length=256)
    measurements: dict[str, Any]
    """Raw probe and strategy-run results (layout: calibration/probes.py, strategy_runs.py)."""
    notes: list[SafeLongText] = Field(default=[], max_length=64)
    checksum: str | None = Field(default=None, pattern=r"^sha256:[0-9a-f]{64}$")
    """sha256 of the profile's canonical JSON without this field (`content_checksum`): written
    by `seal` when the profile is saved or exported; an import whose content does not match it
    (edited after export, cut short) is refused."""

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        if v != SCHEMA_VERSION:
            raise ValueError(f"profile schema_version {v}; this advisor reads {SCHEMA_VERSION}")
        return v

    @field_validator("overrides")
    @classmethod
    def _overrides_apply(cls, v: dict[str, Any]) -> dict[str, Any]:
        check_tree(v, MAX_MEASUREMENT_DEPTH, MAX_MEASUREMENT_ITEMS)
        # Priors holds every term to its physical range: raises ValueError naming the bad term.
        apply_overrides(default_priors(), v, "check")
        return v

    @field_validator("measurements")
    @classmethod
    def _finite_measurements(cls, v: dict[str, Any]) -> dict[str, Any]:
        check_tree(v, MAX_MEASUREMENT_DEPTH, MAX_MEASUREMENT_ITEMS)
        return v

    @field_validator("created_at")
    @classmethod
    def _timestamp(cls, v: str) -> str:
        try:
            when = datetime.fromisoformat(v)
        except ValueError:
            raise ValueError(f"{v!r} is not an ISO-8601 timestamp (e.g. 2026-11-30T03:54:03+00:00)") from None
        if when.tzinfo is None:
            raise ValueError(f"{v!r} has no time zone (e.g. +00:00)")
        return v

    @field_validator("catalog_gpu")
    @classmethod
    def _known_gpu(cls, v: str | None) -> str | None:
        if v is not None and v not in gpu_catalog():
            raise ValueError(f"{v!r} is not in the GPU catalog (see `advisor gpus`)")
        return v

    @field_validator("device_spec")
    @classmethod
    def _stand_in(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is not None:
            DeviceSpec.model_validate(v)
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Profile:
        if self.catalog_gpu is not None and self.device_spec is not None:
            raise ValueError("a profile of a catalog GPU carries no device_spec (CPU mode only)")
        if self.checksum is not None and self.checksum != content_checksum(self):
            raise ValueError("checksum does not match the profile's content (edited or cut "
                             "short after it was exported)")
        return self


def content_checksum(profile: Profile) -> str:
    """sha256 of the profile's canonical JSON (sorted keys, no spaces), `checksum` left out."""
    data = profile.model_dump(mode="json", exclude={"checksum"})
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def seal(profile: Profile) -> Profile:
    """The profile with its checksum set."""
    return profile.model_copy(update={"checksum": content_checksum(profile)})


class ProfileSummary(_Strict):
    """One stored profile version, as `advisor profiles` and `GET /v1/calibrations` list it."""

    name: str
    version: int
    """Store row id: increases with every save."""
    created_at: str
    device: str
    gpu_name: str
    catalog_gpu: str | None
    gpus_per_node: int
    nodes: int
    fingerprint_key: str
    quick: bool
    terms: list[str]
    missing_terms: list[str]
    """Required terms the profile does not fit (empty: complete)."""


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        curve = isinstance(value, dict) and set(value) == {"x", "y"}
        nested = isinstance(value, dict) and isinstance(base.get(key), dict) and not curve
        out[key] = _merge(base[key], value) if nested else value
    return out


def apply_overrides(priors: Priors, overrides: dict[str, Any], name: str) -> Priors:
    """`priors` with a profile's overrides (Priors' layout) laid over it, validated."""
    merged = _merge(priors.model_dump(), overrides)
    merged["source"] = f"{priors.source} + profile {name}"
    try:
        return Priors.model_validate(merged)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ValueError(f"override {'.'.join(map(str, err['loc']))}: {err['msg']}") from None


def with_stand_in(priors: Priors, arch: str) -> Priors:
    """`priors` with values for an architecture the shipped priors lack (CPU mode's measured
    stand-in device): the 'ampere' GEMM curve and attention ratio, until calibration fits them."""
    if arch in priors.gemm_efficiency:
        return priors
    return apply_overrides(priors, {"gemm_efficiency": {arch: priors.gemm_efficiency["ampere"].model_dump()},
                                    "attention_efficiency": {arch: priors.attention_efficiency["ampere"]}},
                           "stand-in")


def architecture_of(profile: Profile) -> str:
    """Key of the GEMM-efficiency curve this profile fits: the GPU architecture, or that of the
    measured stand-in device ('cpu' in CPU mode)."""
    return _architecture(profile.catalog_gpu, profile.device_spec)


def _architecture(catalog_gpu: str | None, device_spec: dict[str, Any] | None) -> str:
    if catalog_gpu is None:
        return (device_spec or {}).get("architecture", "cpu")
    return gpu_catalog()[catalog_gpu].architecture


def required_terms(profile: Profile) -> list[str]:
    """Terms a complete profile fits (inter-node bandwidth only when it spans nodes)."""
    arch = architecture_of(profile)
    terms = [f"gemm_efficiency.{arch}", f"attention_efficiency.{arch}",
             "compute.hbm_efficiency", "collective.intra_efficiency", "collective.intra_latency_s",
             "offload.pcie_efficiency", "offload.torch_cpu_adam_params_per_s_per_node",
             "overhead.cuda_context_bytes", "overhead.nccl_bytes_per_tier",
             "overhead.fragmentation.ddp", "overhead.fragmentation.fsdp2",
             "overhead.fragmentation.deepspeed", "collective.interference", "overlap.fsdp2",
             "overlap.deepspeed",
             "framework_overhead_s_per_module.zero12", "framework_overhead_s_per_module.zero3",
             "framework_overhead_s_per_module.fsdp2", "uncertainty.compute_efficiency",
             "uncertainty.collective_efficiency"]
    if profile.fingerprint.nodes > 1:
        terms += ["collective.inter_efficiency", "collective.inter_latency_s"]
    return terms


def missing_terms(profile: Profile) -> list[str]:
    fitted = {t.term for t in profile.fit}
    return [t for t in required_terms(profile) if t not in fitted]
