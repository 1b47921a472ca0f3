"""Efficiency and overhead priors (`advisor/data/priors.toml`): the model's data, not physics.

Calibration profiles override them; nothing here is a constant in a formula.
"""

from __future__ import annotations

import math
import tomllib
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# Every term has a physical range, checked here for the shipped files and for every calibration
# profile (advisor/profiles/use.py applies a profile's overrides through these models): an efficiency
# is a fraction of a peak, a time or a size is not negative, nothing is NaN or infinite.
ENGINES = ("ddp", "fsdp1", "fsdp2", "deepspeed")
HOOK_KINDS = ("ddp", "zero12", "zero3", "fsdp1", "fsdp2")
UNCERTAINTIES = ("compute_efficiency", "collective_efficiency")
MAX_OVERHEAD_BYTES = 2.0**40  # 1 TiB: beyond any device
MAX_HOOK_S = 0.1  # host seconds per hooked module per micro-batch (measured: 1e-6 to 5e-3)


def _keyed(values: dict[str, float], what: str, keys: tuple[str, ...], low: float, high: float,
           low_open: bool = False) -> dict[str, float]:
    """`values` has every key of `keys` (and no other), each within [low, high] ((low, high]
    with `low_open`); ValueError naming the first that is not."""
    missing, unknown = sorted(set(keys) - set(values)), sorted(set(values) - set(keys))
    if missing or unknown:
        raise ValueError(f"{what} needs exactly the keys {', '.join(keys)}"
                         + (f"; missing {', '.join(missing)}" if missing else "")
                         + (f"; unknown {', '.join(unknown)}" if unknown else ""))
    for key, value in values.items():
        if not (math.isfinite(value) and (value > low if low_open else value >= low) and value <= high):
            bracket = "(" if low_open else "["
            raise ValueError(f"{what}.{key} = {value!r} is outside {bracket}{low:g}, {high:g}]")
    return values


class Curve(_Strict):
    """A size-bucketed efficiency curve, interpolated linearly in log2(size), clamped."""

    x: list[float] = Field(min_length=1)
    y: list[float] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> Curve:
        if len(self.x) != len(self.y) or any(b <= a for a, b in zip(self.x, self.x[1:], strict=False)):
            raise ValueError("curve needs equal-length x and y with x strictly increasing")
        if self.x[0] <= 0:
            raise ValueError(f"curve sizes must be positive, got {self.x[0]!r}")
        bad = next((y for y in self.y if not 0 < y <= 1), None)
        if bad is not None:
            raise ValueError(f"efficiency {bad!r} is outside (0, 1]: a fraction of the peak")
        return self

    def __call__(self, size: float) -> float:
        if size <= self.x[0]:
            return self.y[0]
        if size >= self.x[-1]:
            return self.y[-1]
        t = math.log2(size)
        points = list(zip(self.x, self.y, strict=True))
        for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
            if size <= x1:
                return y0 + (y1 - y0) * (t - math.log2(x0)) / (math.log2(x1) - math.log2(x0))
        return self.y[-1]


class CollectivePriors(_Strict):
    """Alpha-beta collective model per tier (see communication.py)."""

    intra_latency_s: float = Field(ge=0, le=1)
    inter_latency_s: float = Field(ge=0, le=1)
    intra_efficiency: float = Field(gt=0, le=1.2)
    """Achieved fraction of the per-direction NVLink/PCIe bandwidth (NVLS can exceed ring's 1)."""
    inter_efficiency: float = Field(gt=0, le=1.2)
    """Achieved fraction of each GPU's share of the node's network bandwidth."""
    interference: float = Field(ge=0, le=1)
    """Fraction of overlapped collective time that still adds to the step (timing.py)."""


class ComputePriors(_Strict):
    micro_batch_half_tokens: float = Field(gt=0, le=1e7)
    compile_speedup: float = Field(gt=0, le=4)
    fp8_efficiency_ratio: float = Field(gt=0, le=1)
    flash_causal_skip: float = Field(gt=0, le=1)
    selective_recompute_fraction: float = Field(ge=0, le=1)
    hbm_efficiency: float = Field(gt=0, le=1)


class OffloadPriors(_Strict):
    pcie_efficiency: float = Field(gt=0, le=1)
    deepspeed_cpu_adam_params_per_s_per_node: float = Field(gt=0, le=1e13)
    torch_cpu_adam_params_per_s_per_node: float = Field(gt=0, le=1e13)
    nvme_efficiency: float = Field(gt=0, le=1)
    host_buffer_factor: float = Field(ge=1, le=10)
    host_ram_usable_fraction: float = Field(gt=0, le=1)


class OverheadPriors(_Strict):
    cuda_context_bytes: float = Field(ge=0, le=MAX_OVERHEAD_BYTES)
    nccl_bytes_per_tier: float = Field(ge=0, le=MAX_OVERHEAD_BYTES)
    fragmentation: dict[str, float]
    """Caching-allocator fragmentation by engine (ddp, fsdp1, fsdp2, deepspeed), a fraction of
    the other allocated bytes."""
    memory_safety_fraction: float = Field(ge=0, lt=1)

    @model_validator(mode="after")
    def _engines(self) -> OverheadPriors:
        _keyed(self.fragmentation, "overhead.fragmentation", ENGINES, 0, 1)
        return self


class Priors(_Strict):
    """All priors. `engine` keys are ddp, fsdp1, fsdp2, deepspeed."""

    gemm_efficiency: dict[str, Curve]
    """By GPU architecture: efficiency vs hidden size."""
    attention_efficiency: dict[str, float]
    """By GPU architecture: the attention kernel's achieved efficiency as a fraction of the
    GEMM efficiency (compute.py). Every architecture with a GEMM curve has one."""
    collective: CollectivePriors
    overlap: dict[str, float]
    framework_overhead_s_per_module: dict[str, float]
    """By hook kind (ddp, zero12, zero3, fsdp1, fsdp2): host seconds per module per micro-batch."""
    compute: ComputePriors
    offload: OffloadPriors
    overhead: OverheadPriors
    uncertainty: dict[str, float]
    source: str = "advisor/data/priors.toml"

    @model_validator(mode="after")
    def _attention_for_every_arch(self) -> Priors:
        missing = sorted(set(self.gemm_efficiency) - set(self.attention_efficiency))
        if missing:
            raise ValueError(f"attention_efficiency has no value for {', '.join(missing)}")
        for arch, value in self.attention_efficiency.items():
            if not (math.isfinite(value) and 0 < value <= 2):
                raise ValueError(f"attention_efficiency.{arch} = {value!r} is outside (0, 2]")
        _keyed(self.overlap, "overlap", ENGINES, 0, 1)
        _keyed(self.framework_overhead_s_per_module, "framework_overhead_s_per_module",
               HOOK_KINDS, 0, MAX_HOOK_S)
        _keyed(self.uncertainty, "uncertainty", UNCERTAINTIES, 0, 5)
        return self


def priors_from_toml(raw: dict, source: str) -> Priors:
    """Map the TOML layout (unit-named keys) onto `Priors`."""
    return Priors(
        gemm_efficiency={arch: Curve(x=c["hidden"], y=c["efficiency"])
                         for arch, c in raw["gemm_efficiency"].items()},
        attention_efficiency=raw["attention_efficiency"],
        collective=CollectivePriors(**raw["collective"]),
        overlap=raw["overlap"],
        framework_overhead_s_per_module=raw["framework_overhead_s_per_module"],
        compute=ComputePriors(**raw["compute"]),
        offload=OffloadPriors(**raw["offload"]),
        overhead=OverheadPriors(**raw["overhead"]),
        uncertainty=raw["uncertainty"],
        source=source,
    )


def _merge(base: dict, over: dict) -> dict:
    """Table-wise override: keys of `over` replace those of `base`, recursively for tables."""
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(base[key], value) if isinstance(value, dict) and key in base else value
    return out


@cache
def default_priors(fitted: bool = True) -> Priors:
    """The shipped priors, read on first use (no import-time I/O): the hand-set
    `priors.toml`, overridden by `fitted_priors.toml` (written by benchmarks/fit_priors.py)."""
    data = resources.files("advisor.data")
    raw = tomllib.loads(data.joinpath("priors.toml").read_text())
    source = "advisor/data/priors.toml"
    fitted_file = data.joinpath("fitted_priors.toml")
    if fitted and fitted_file.is_file():
        raw = _merge(raw, tomllib.loads(fitted_file.read_text()))
        source += " + fitted_priors.toml"
    return priors_from_toml(raw, source)
