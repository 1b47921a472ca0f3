"""Calibration profiles: measured overrides of the priors, stored per hardware fingerprint.

A profile is what `python -m calibration run` (`advisor calibrate`) measured on one cluster and
what `calibration/fit.py` made of it: `overrides` in the field layout of `Priors` (they replace
the shipped priors term by term), each fitted term with its 1-sigma uncertainty, and the raw
measurements. They are stored in advisor/profile_store.py's SQLite file; the store is
append-only, a name means its newest version, so two calibrations saved under one name lose
nothing. `priors_for` is what estimate / recommend call; `create_calibration` and
`list_calibrations` are what the API's /v1/calibrations endpoints call.

stdlib + pydantic only: the CLI reads this on every estimate.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from advisor import profile_store as store
from advisor.errors import InvalidInput
from advisor.priors import Priors, default_priors
from advisor.profile_store import SCHEMA_VERSION

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Fingerprint(_Strict):
    """What a profile's numbers depend on: the device, how many, and the software stack."""

    device: Literal["cuda", "cpu"]
    """cuda: NVIDIA/AMD GPUs through torch.cuda; cpu: the gloo test mode (no GPU)."""
    gpu_name: str = Field(min_length=1, max_length=128)
    """torch.cuda.get_device_name(), or 'cpu: <processor>' in CPU mode."""
    gpu_memory_bytes: int = Field(ge=0)
    gpus_per_node: int = Field(gt=0)
    """GPUs per node (processes per node in CPU mode)."""
    nodes: int = Field(gt=0)
    driver: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    torch: str

    def key(self) -> str:
        """Stable id of the fingerprint: sha256 of its canonical JSON, 16 hex digits."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


class FitTerm(_Strict):
    """One fitted term: where it goes in `Priors`, its value and its relative uncertainty."""

    term: str
    """Dotted path into Priors, e.g. `gemm_efficiency.hopper` or `overlap.ddp`."""
    value: float | list[float]
    """The scalar, or a curve's y values."""
    sigma: float = Field(ge=0)
    """Relative 1-sigma uncertainty (0.05 = 5%)."""
    samples: int = Field(ge=0)
    how: str
    """Which measurement and which formula produced it."""


class Profile(_Strict):
    schema_version: int = SCHEMA_VERSION
    name: str = Field(pattern=NAME_PATTERN)
    created_at: str
    """ISO-8601 UTC."""
    fingerprint: Fingerprint
    catalog_gpu: str | None
    """The advisor's GPU catalog id the device matched (None in CPU mode: never auto-matched)."""
    device_spec: dict[str, Any] | None = None
    """CPU mode only: the measured stand-in for a GPU datasheet, in GPUSpec's field layout."""
    quick: bool
    command: str
    """The command that produced it."""
    overrides: dict[str, Any]
    """Replacements for `Priors` fields, in its layout (curves as {x, y})."""
    fit: list[FitTerm]
    measurements: dict[str, Any]
    """Raw probe and strategy-run results (layout: calibration/probes.py, strategy_runs.py)."""
    notes: list[str] = []

    @model_validator(mode="before")
    @classmethod
    def _rename_legacy_terms(cls, data: Any) -> Any:
        """Profiles saved before the attention ratio became per-architecture carry it as
        `compute.attention_efficiency_ratio`; read it as `attention_efficiency.<arch>`."""
        if not isinstance(data, dict):
            return data
        compute = (data.get("overrides") or {}).get("compute") or {}
        if "attention_efficiency_ratio" not in compute:
            return data
        arch = _architecture(data.get("catalog_gpu"), data.get("device_spec"))
        overrides = {**data["overrides"], "compute": {k: v for k, v in compute.items()
                                                      if k != "attention_efficiency_ratio"}}
        overrides.setdefault("attention_efficiency", {})[arch] = compute["attention_efficiency_ratio"]
        fit = [{**t, "term": f"attention_efficiency.{arch}"}
               if isinstance(t, dict) and t.get("term") == "compute.attention_efficiency_ratio" else t
               for t in data.get("fit", [])]
        return {**data, "overrides": overrides, "fit": fit}

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        if v != SCHEMA_VERSION:
            raise ValueError(f"profile schema_version {v}; this advisor reads {SCHEMA_VERSION}")
        return v

    @field_validator("overrides")
    @classmethod
    def _overrides_apply(cls, v: dict[str, Any]) -> dict[str, Any]:
        apply_overrides(default_priors(), v, "check")  # raises ValueError naming the bad term
        return v


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
    from advisor.hardware import gpu_catalog

    return gpu_catalog()[catalog_gpu].architecture


def required_terms(profile: Profile) -> list[str]:
    """Terms a complete profile fits (inter-node bandwidth only when it spans nodes)."""
    arch = architecture_of(profile)
    terms = [f"gemm_efficiency.{arch}", f"attention_efficiency.{arch}",
             "compute.hbm_efficiency", "collective.intra_efficiency", "collective.intra_latency_s",
             "offload.pcie_efficiency", "offload.torch_cpu_adam_params_per_s_per_node",
             "overhead.cuda_context_bytes", "overhead.nccl_bytes_per_tier",
             "overhead.fragmentation_ddp", "overhead.fragmentation_fsdp2",
             "overhead.fragmentation_deepspeed", "collective.interference", "overlap.fsdp2",
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


# -- stored profiles ---------------------------------------------------------------------------

def save_profile(profile: Profile) -> int:
    """Append `profile` to the store; returns its version."""
    return store.insert(profile.name, profile.fingerprint.key(), profile.catalog_gpu,
                        profile.created_at, profile.model_dump_json())


def get_profile(name: str) -> Profile:
    """The newest version of the profile called `name`."""
    rows = store.bodies(name=name, newest_only=True)
    if not rows:
        known = sorted({s.name for s in list_profiles()})
        raise InvalidInput("profile", f"no profile named {name!r} in {store.store_path()}",
                           ", ".join(known) or "none stored yet: run `advisor calibrate`")
    return Profile.model_validate_json(rows[0][1])


def list_profiles(all_versions: bool = False) -> list[ProfileSummary]:
    """Stored profiles, newest first: the newest version of each name, or every version."""
    out, seen = [], set()
    for version, body in store.bodies():
        p = Profile.model_validate_json(body)
        if all_versions or p.name not in seen:
            seen.add(p.name)
            out.append(summary(p, version))
    return out


def summary(profile: Profile, version: int) -> ProfileSummary:
    fp = profile.fingerprint
    return ProfileSummary(name=profile.name, version=version, created_at=profile.created_at,
                          device=fp.device, gpu_name=fp.gpu_name, catalog_gpu=profile.catalog_gpu,
                          gpus_per_node=fp.gpus_per_node, nodes=fp.nodes, fingerprint_key=fp.key(),
                          quick=profile.quick, terms=[t.term for t in profile.fit],
                          missing_terms=missing_terms(profile))


def match_profile(gpu_name: str, gpus_per_node: int | None = None,
                  nodes: int | None = None) -> Profile | None:
    """Newest profile measured on `gpu_name` (catalog id), preferring the same node shape."""
    profiles = [Profile.model_validate_json(body) for _, body in store.bodies(catalog_gpu=gpu_name)]

    def rank(p: Profile) -> int:
        return ((p.fingerprint.gpus_per_node == gpus_per_node) + (p.fingerprint.nodes == nodes))

    return max(profiles, key=rank, default=None)  # max keeps the first (newest) among equals


# -- using a profile ---------------------------------------------------------------------------

def priors_for(profile: str | None, gpu_name: str, gpus_per_node: int | None = None,
               nodes: int | None = None) -> tuple[Priors, str | None]:
    """The priors an estimate on `gpu_name` (catalog id) should use, and a note naming the profile.

    `profile`: a stored name (must have been measured on `gpu_name`), None to match the newest
    profile of that GPU automatically (preferring the same GPUs per node and nodes), or "none"
    for the shipped priors. Returns the shipped priors and no note when nothing matches.
    """
    base = default_priors()
    if profile == "none":
        return base, None
    if profile is None:
        chosen = match_profile(gpu_name, gpus_per_node, nodes)
        if chosen is None:
            return base, None
    else:
        chosen = get_profile(profile)
        if chosen.catalog_gpu != gpu_name:
            measured = chosen.catalog_gpu or chosen.fingerprint.gpu_name
            raise InvalidInput("profile", f"{profile!r} was measured on {measured}, not {gpu_name}",
                               "a profile of the same GPU (see `advisor profiles`), or none")
    fp = chosen.fingerprint
    note = (f"calibrated priors from profile '{chosen.name}' ({fp.gpu_name}, {fp.nodes} x "
            f"{fp.gpus_per_node}, {chosen.created_at[:10]}{', quick' if chosen.quick else ''})")
    if (gpus_per_node, nodes) != (None, None) and (fp.gpus_per_node, fp.nodes) != (gpus_per_node, nodes):
        note += f"; measured on {fp.nodes} x {fp.gpus_per_node}, collective terms may differ here"
    return apply_overrides(base, chosen.overrides, chosen.name), note


# -- JSON export / import and the API's calls --------------------------------------------------

def export_profile(name: str) -> str:
    return get_profile(name).model_dump_json(indent=2)


def parse_profile(data: str | bytes | dict) -> Profile:
    """Validate profile JSON (a file's text or a decoded body); InvalidInput names the field."""
    try:
        if isinstance(data, dict):
            return Profile.model_validate(data)
        return Profile.model_validate_json(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "profile"
        raise InvalidInput(field, err["msg"].replace("Value error, ", "")) from None


def import_profile(path: Path, rename: str | None = None) -> tuple[Profile, int]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise InvalidInput("path", f"cannot read {path}: {exc.strerror}") from None
    profile = parse_profile(text)
    if rename:
        if not re.match(NAME_PATTERN, rename):
            raise InvalidInput("name", f"{rename!r} is not a profile name", NAME_PATTERN)
        profile = profile.model_copy(update={"name": rename})
    return profile, save_profile(profile)


def create_calibration(body: dict) -> ProfileSummary:
    """POST /v1/calibrations: validate an uploaded profile, store it, return its summary."""
    profile = parse_profile(body)
    return summary(profile, save_profile(profile))


def list_calibrations(gpu: str | None = None) -> list[ProfileSummary]:
    """GET /v1/calibrations[?gpu=H200]: newest version of each stored profile."""
    return [s for s in list_profiles() if gpu is None or s.catalog_gpu == gpu]
