"""GET /healthz: liveness for load balancers and the tests that start a server."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from fastapi import APIRouter

from api.schemas import Health

router = APIRouter(tags=["health"])


def version_text() -> str:
    try:
        return version("advisor")
    except PackageNotFoundError:
        return "unknown"


@router.get("/healthz", summary="Liveness")
def healthz() -> Health:
    return Health(version=version_text())
