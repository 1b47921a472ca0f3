"""/v1/calibrations: the calibration profile store.

A profile is what `advisor calibrate` (or `python -m calibration run`) writes; storing one puts
it under $ADVISOR_HOME like `advisor profiles import`, and later estimates on the same GPU use
it. Writes (POST, DELETE) need the server's bearer token (api/auth.py); reads are open.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException

from advisor.core.errors import InvalidInput
from advisor.core.hardware import gpu_catalog
from advisor.profiles import schema as profile_schema
from advisor.profiles import use as profiles
from api import service
from api.auth import AUTH_ERRORS, Writer
from api.routers.common import ERRORS

router = APIRouter(prefix="/v1", tags=["calibrations"])
MAX_PAGE = 100


class SkippedRow(BaseModel):
    version: int
    reason: str


class ProfilePage(BaseModel):
    """One page of stored profiles, newest first, and the rows left out as invalid."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    items: list[profile_schema.ProfileSummary]
    total: int
    """Profiles matching the filter, over all pages."""
    limit: int
    offset: int
    skipped: list[SkippedRow]
    """Stored rows that fail validation (written by another version, edited on disk): never
    used, listed so they can be found and deleted."""


ProfileName = Annotated[str, Path(pattern=profile_schema.NAME_PATTERN, description="The profile's name")]


@router.post("/calibrations", status_code=201, response_model=profile_schema.ProfileSummary,
             responses={**ERRORS, **AUTH_ERRORS}, summary="Store a calibration profile")
def post_calibration(_: Writer, body: profile_schema.Profile) -> profile_schema.ProfileSummary:
    """Validate and store a profile (JSON as `advisor profiles export` writes it, with its
    checksum). Cached answers are dropped: estimates that match this GPU now use the new
    profile. Needs `Authorization: Bearer <ADVISOR_API_TOKEN>`."""
    stored = profiles.create_calibration(body)
    service.clear_caches()
    return stored


@router.delete("/calibrations/{name}", status_code=204, responses={**ERRORS, **AUTH_ERRORS, 404: ERRORS[404]},
               summary="Delete every version of a calibration profile")
def delete_calibration(_: Writer, name: ProfileName) -> Response:
    """Needs `Authorization: Bearer <ADVISOR_API_TOKEN>`. 404 when no profile has that name."""
    if not profiles.delete_calibration(name):
        raise HTTPException(404, f"no profile named {name!r}")
    service.clear_caches()
    return Response(status_code=204)


@router.get("/calibrations", response_model=ProfilePage, responses={422: ERRORS[422]},
            summary="List stored calibration profiles")
def get_calibrations(gpu: Annotated[str | None, Query(max_length=64, description="A catalog GPU id")] = None,
                     limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 20,
                     offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0) -> ProfilePage:
    """The newest version of every stored profile, optionally of one catalog GPU, a page at a
    time."""
    if gpu is not None and gpu not in gpu_catalog():
        raise InvalidInput("gpu", f"unknown GPU {gpu!r}", ", ".join(sorted(gpu_catalog())))
    found = profiles.listing(catalog_gpu=gpu)
    return ProfilePage(items=found.items[offset:offset + limit], total=len(found.items), limit=limit,
                       offset=offset, skipped=[SkippedRow(version=s.version, reason=s.reason)
                                               for s in found.skipped])
