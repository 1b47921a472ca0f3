"""POST /v1/estimate: one strategy at the given settings."""

from __future__ import annotations

from fastapi import APIRouter, Response

from advisor.core.results import Estimate, InfeasiblePlan
from api import service
from api.routers.common import ERRORS, json_response
from api.schemas import EstimateRequest

router = APIRouter(prefix="/v1", tags=["estimate"])


@router.post("/estimate", response_model=Estimate | InfeasiblePlan, responses=ERRORS,
             summary="Memory, communication, step time and throughput of one plan")
async def post_estimate(req: EstimateRequest) -> Response:
    """As `advisor estimate --json`: a plan that does not fit is still an answer (`fits` false,
    with the reason and the cheapest fix)."""
    return json_response(await service.estimate_json(req))
