"""POST /v1/configs: the config files of a plan, as a JSON map name -> content or a zip."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response

from api import bundle, service
from api.routers.common import ERRORS
from api.schemas import ConfigsRequest

router = APIRouter(prefix="/v1", tags=["configs"])

Format = Annotated[Literal["json", "zip"], Query(description="json: a map of file name -> "
                                                  "content; zip: the same files in a zip archive")]


@router.post("/configs", response_model=dict[str, str], summary="Config files for the plan",
             responses={**ERRORS, 200: {"content": {"application/zip": {}},
                                        "description": "The files (JSON map, or a zip)"}})
async def post_configs(req: ConfigsRequest, format: Format = "json") -> Response:
    """Accelerate / DeepSpeed configs, launch commands and the checkpoint plan for the
    recommended plan (or `strategy`'s best plan). 422 with the reasons when it does not fit."""
    files = await service.offloaded(lambda: bundle.plan_files(req))
    if format == "zip":
        return Response(bundle.zip_bytes(files), media_type="application/zip", headers={
            "content-disposition": f'attachment; filename="{bundle.ZIP_NAME}"'})
    return bundle.json_files(files)
