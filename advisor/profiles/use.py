"""Stored calibration profiles: save, list, match to a GPU, apply to the priors, import and
export. A profile is what `python -m calibration run` (`advisor calibrate`) measured on one
cluster and what advisor/profiles/fit.py made of it (advisor/profiles/schema.py); the store is
advisor/profiles/store.py's SQLite file, append-only, a name meaning its newest valid version.
`priors_for` is what estimate / recommend call; `create_calibration`, `listing` and
`delete_calibration` are what the API's /v1/calibrations endpoints call.

stdlib + pydantic only: the CLI reads this on every estimate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from advisor.core.errors import InvalidInput
from advisor.core.priors import Priors, default_priors
from advisor.profiles import store
from advisor.profiles.schema import (
    MAX_PROFILE_FILE_BYTES,
    NAME_PATTERN,
    Profile,
    ProfileSummary,
    apply_overrides,
    missing_terms,
    seal,
)

# -- stored profiles ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Skipped:
    """A stored row that cannot be used: it is left out of every answer and reported."""

    version: int
    reason: str


def save_profile(profile: Profile) -> int:
    """Append `profile` (sealed with its checksum) to the store; returns its version."""
    profile = seal(profile)
    return store.insert(profile.name, profile.fingerprint.key(), profile.catalog_gpu,
                        profile.created_at, profile.model_dump_json())


def _load(rows: list[tuple[int, str]], corrupt: list[tuple[int, str]]
          ) -> tuple[list[tuple[int, Profile]], list[Skipped]]:
    """Validate stored bodies; a row that fails (a bad checksum, written by an older version,
    edited on disk) is skipped with its reason, never raised."""
    good, skipped = [], [Skipped(v, why) for v, why in corrupt]
    for version, body in rows:
        try:
            good.append((version, Profile.model_validate_json(body)))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "profile"
            skipped.append(Skipped(version, f"{where}: {err['msg'].removeprefix('Value error, ')}"))
    return good, skipped


def _stored(**where: Any) -> tuple[list[tuple[int, Profile]], list[Skipped]]:
    return _load(*store.bodies(**where))


def skipped_note(skipped: list[Skipped]) -> str | None:
    if not skipped:
        return None
    versions = ", ".join(str(s.version) for s in skipped[:5]) + (" ..." if len(skipped) > 5 else "")
    return (f"ignored {len(skipped)} stored profile row(s) that fail validation (version "
            f"{versions}; `advisor profiles` says why)")


def get_profile(name: str) -> Profile:
    """The newest valid version of the profile called `name`."""
    found, _ = _stored(name=name)
    if not found:
        known = sorted({s.name for s in list_profiles()})
        raise InvalidInput("profile", f"no valid profile named {name!r} in the profile store",
                           ", ".join(known) or "none stored yet: run `advisor calibrate`")
    return found[0][1]


@dataclass(frozen=True, slots=True)
class Listing:
    items: list[ProfileSummary]
    skipped: list[Skipped]


def listing(all_versions: bool = False, catalog_gpu: str | None = None) -> Listing:
    """Stored profiles, newest first (the newest version of each name, or every version), and
    the rows skipped because they fail validation."""
    found, skipped = _stored(catalog_gpu=catalog_gpu)
    out, seen = [], set()
    for version, p in found:
        if all_versions or p.name not in seen:
            seen.add(p.name)
            out.append(summary(p, version))
    return Listing(out, skipped)


def list_profiles(all_versions: bool = False) -> list[ProfileSummary]:
    """Stored profiles, newest first: the newest version of each name, or every version."""
    return listing(all_versions).items


def summary(profile: Profile, version: int) -> ProfileSummary:
    fp = profile.fingerprint
    return ProfileSummary(name=profile.name, version=version, created_at=profile.created_at,
                          device=fp.device, gpu_name=fp.gpu_name, catalog_gpu=profile.catalog_gpu,
                          gpus_per_node=fp.gpus_per_node, nodes=fp.nodes, fingerprint_key=fp.key(),
                          quick=profile.quick, terms=[t.term for t in profile.fit],
                          missing_terms=missing_terms(profile))


def match_profile(gpu_name: str, gpus_per_node: int | None = None,
                  nodes: int | None = None) -> tuple[Profile | None, list[Skipped]]:
    """Newest valid profile measured on `gpu_name` (catalog id), preferring the same node shape;
    and the rows of that GPU skipped as invalid."""
    found, skipped = _stored(catalog_gpu=gpu_name)

    def rank(p: Profile) -> int:
        return ((p.fingerprint.gpus_per_node == gpus_per_node) + (p.fingerprint.nodes == nodes))

    # max keeps the first (newest) among equals
    return max((p for _, p in found), key=rank, default=None), skipped


# -- using a profile ---------------------------------------------------------------------------

def priors_for(profile: str | None, gpu_name: str, gpus_per_node: int | None = None,
               nodes: int | None = None) -> tuple[Priors, str | None]:
    """The priors an estimate on `gpu_name` (catalog id) should use, and a note naming the profile.

    `profile`: a stored name (must have been measured on `gpu_name`), None to match the newest
    profile of that GPU automatically (preferring the same GPUs per node and nodes), or "none"
    for the shipped priors. Returns the shipped priors and no note when nothing matches (the
    note then only says which stored rows were ignored as invalid, if any).
    """
    base = default_priors()
    if profile == "none":
        return base, None
    if profile is None:
        chosen, skipped = match_profile(gpu_name, gpus_per_node, nodes)
        if chosen is None:
            return base, skipped_note(skipped)
    else:
        chosen, skipped = get_profile(profile), []
        if chosen.catalog_gpu != gpu_name:
            measured = chosen.catalog_gpu or chosen.fingerprint.gpu_name
            raise InvalidInput("profile", f"{profile!r} was measured on {measured}, not {gpu_name}",
                               "a profile of the same GPU (see `advisor profiles`), or none")
    fp = chosen.fingerprint
    note = (f"calibrated priors from profile '{chosen.name}' ({fp.gpu_name}, {fp.nodes} x "
            f"{fp.gpus_per_node}, {chosen.created_at[:10]}{', quick' if chosen.quick else ''})")
    if (gpus_per_node, nodes) != (None, None) and (fp.gpus_per_node, fp.nodes) != (gpus_per_node, nodes):
        note += f"; measured on {fp.nodes} x {fp.gpus_per_node}, collective terms may differ here"
    extra = skipped_note(skipped)
    return apply_overrides(base, chosen.overrides, chosen.name), note + (f"; {extra}" if extra else "")


# -- JSON export / import and the API's calls --------------------------------------------------

def export_profile(name: str) -> str:
    """A stored profile as JSON, sealed with its checksum."""
    return seal(get_profile(name)).model_dump_json(indent=2)


def parse_profile(data: str | bytes | dict, require_checksum: bool = True) -> Profile:
    """Validate profile JSON (a file's text or a decoded body) as one place for every way in
    (the API, `advisor profiles import`): InvalidInput names the field. An import must carry
    the checksum `export` writes, and match it."""
    try:
        if isinstance(data, dict):
            profile = Profile.model_validate(data)
        else:
            profile = Profile.model_validate_json(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "profile"
        raise InvalidInput(field, err["msg"].replace("Value error, ", ""),
                           "a profile as `advisor profiles export` writes it") from None
    if require_checksum and profile.checksum is None:
        raise InvalidInput("checksum", "missing: a profile carries the checksum `advisor profiles "
                           "export` and `advisor calibrate --out` write", "sha256:<64 hex digits>")
    return profile


def import_profile(path: Path, rename: str | None = None) -> tuple[Profile, int]:
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_PROFILE_FILE_BYTES + 1)
    except OSError as exc:
        raise InvalidInput("path", f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_PROFILE_FILE_BYTES:
        raise InvalidInput("path", f"{path} is larger than {MAX_PROFILE_FILE_BYTES} bytes",
                           "a profile JSON file")
    profile = parse_profile(raw)
    if rename:
        if not re.match(NAME_PATTERN, rename):
            raise InvalidInput("name", f"{rename!r} is not a profile name", NAME_PATTERN)
        profile = profile.model_copy(update={"name": rename})
    return profile, save_profile(profile)


def create_calibration(profile: Profile) -> ProfileSummary:
    """POST /v1/calibrations: store a validated profile, return its summary."""
    if profile.checksum is None:
        raise InvalidInput("checksum", "missing: a profile carries the checksum `advisor profiles "
                           "export` and `advisor calibrate --out` write", "sha256:<64 hex digits>")
    return summary(profile, save_profile(profile))


def delete_calibration(name: str) -> int:
    """DELETE /v1/calibrations/{name}: remove every version of `name`; how many were removed."""
    if not re.match(NAME_PATTERN, name):
        raise InvalidInput("name", f"{name!r} is not a profile name", NAME_PATTERN)
    return store.delete(name)
