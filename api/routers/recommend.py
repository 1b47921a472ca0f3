"""POST /v1/recommend: every strategy at its best settings, ranked, with the reasons."""

from __future__ import annotations

from fastapi import APIRouter, Response

from advisor.core.results import Recommendation
from api import service
from api.routers.common import ERRORS, json_response
from api.schemas import RecommendRequest

router = APIRouter(prefix="/v1", tags=["recommend"])


@router.post("/recommend", response_model=Recommendation, responses=ERRORS,
             summary="Rank the strategies and explain the choice")
async def post_recommend(req: RecommendRequest) -> Response:
    """As `advisor recommend --json`. `chosen` is null when nothing fits; each estimate then
    says why and what would make it fit."""
    return json_response(await service.recommend_json(req))
