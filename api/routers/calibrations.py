"""POST /v1/calibrations and GET /v1/calibrations: the calibration profile store.

A profile is what `advisor calibrate` (or `python -m calibration run`) writes; posting one stores
it under $ADVISOR_HOME like `advisor profiles import`, and later estimates on the same GPU use it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from advisor import profiles
from api import service
from api.routers.common import ERRORS

router = APIRouter(prefix="/v1", tags=["calibrations"])


@router.post("/calibrations", status_code=201, response_model=profiles.ProfileSummary,
             responses=ERRORS, summary="Store a calibration profile")
def post_calibration(body: dict[str, Any]) -> profiles.ProfileSummary:
    """Validate and store a profile (JSON as `advisor profiles export` writes it). Cached
    answers are dropped: estimates that match this GPU now use the new profile."""
    stored = profiles.create_calibration(body)
    service.clear_caches()
    return stored


@router.get("/calibrations", response_model=list[profiles.ProfileSummary],
            responses={422: ERRORS[422]}, summary="List stored calibration profiles")
def get_calibrations(gpu: str | None = None) -> list[profiles.ProfileSummary]:
    """The newest version of every stored profile, optionally of one catalog GPU."""
    return profiles.list_calibrations(gpu)
