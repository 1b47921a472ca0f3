"""The config bundle of a plan: the files advisor.emit renders, as JSON or as a zip."""

from __future__ import annotations

import io
import json
import zipfile

from fastapi import Response
from starlette.exceptions import HTTPException

from advisor.errors import Infeasible
from advisor.results import Estimate
from api import service
from api.schemas import ConfigsRequest

ZIP_NAME = "advisor-configs.zip"


def choose_plan(req: ConfigsRequest) -> Estimate:
    """The recommended plan, or the best plan of `req.strategy`; Infeasible when it does not fit."""
    rec = service.recommend(req)
    name = req.strategy or rec.chosen
    plan = next((e for e in rec.estimates if e.strategy == name), None)
    if plan is None or not plan.fits:
        reasons = plan.reason if plan is not None else "; ".join(rec.summary)
        fix = plan.fix if plan is not None else None
        raise Infeasible(f"no plan to emit: {name or 'nothing'} does not fit ({reasons})", fix)
    return plan


def plan_files(req: ConfigsRequest) -> dict[str, str]:
    try:
        from advisor.emit import render_plan_files
    except ImportError:
        raise HTTPException(501, "config emission is not available in this build "
                                 "(advisor.emit.render_plan_files is missing)") from None
    plan = choose_plan(req)
    return service.guarded(lambda: render_plan_files(plan))


def zip_bytes(files: dict[str, str]) -> bytes:
    """A deterministic zip: sorted names, fixed timestamps."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, files[name])
    return buffer.getvalue()


def json_files(files: dict[str, str]) -> Response:
    return Response(json.dumps(files, indent=None), media_type="application/json")
