"""The config bundle of a plan: the files `advisor emit` writes, as a JSON map or a zip.

The plan is chosen as `advisor emit` chooses it: the recommended plan, or with `strategy` the
best plan of that strategy alone; advisor/emitters/files.py renders the same files in memory.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

from fastapi import Response

from advisor.core.errors import Infeasible
from advisor.core.results import Estimate, Recommendation
from advisor.emitters.choices import EmitOptions
from advisor.emitters.files import build_plan, render
from api import service
from api.schemas import ConfigsRequest, RecommendRequest

ZIP_NAME = "advisor-plan.zip"
PLAN_FOLDER = Path(".")  # files sit side by side; launch.sh finds ds_config.json next to itself


def choose_plan(req: ConfigsRequest) -> tuple[Estimate, Recommendation]:
    """The plan to emit and the search it came from; Infeasible when it does not fit."""
    if req.strategy is None:
        rec = service.recommend_sync(req)
    else:
        data = req.model_dump(include=set(RecommendRequest.model_fields))
        rec = service.recommend_sync(RecommendRequest.model_validate({**data, "strategies": [req.strategy]}))
    plan = next((e for e in rec.estimates if e.fits), None)
    if plan is None:
        closest = rec.estimates[0] if rec.estimates else None
        reason = closest.reason if closest is not None else "no strategy can run here"
        raise Infeasible(f"nothing to emit: no plan fits ({reason})",
                         closest.fix if closest is not None else None)
    return plan, rec


def plan_files(req: ConfigsRequest) -> dict[str, str]:
    """File name -> text, as `advisor emit` would write them."""
    plan, rec = choose_plan(req)
    why = rec.summary if req.strategy else [*rec.summary, rec.rule_of_thumb]

    def render_files() -> dict[str, str]:
        built = build_plan(plan, EmitOptions(nvme_path=req.nvme_path), why, rec.notes, PLAN_FOLDER)
        return render(built, [])

    return service.guarded(render_files)


def zip_bytes(files: dict[str, str]) -> bytes:
    """A deterministic zip: sorted names, fixed timestamps, launch.sh executable."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o755 if name.endswith(".sh") else 0o644) << 16
            archive.writestr(info, files[name])
    return buffer.getvalue()


def json_files(files: dict[str, str]) -> Response:
    return Response(json.dumps(files), media_type="application/json")
