"""The web form at `/`: GET shows it, POST shows it again with the results (or the errors next
to their fields), POST /bundle downloads the config zip. Plain HTML forms: no JavaScript."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.templating import Jinja2Templates

from advisor.catalog import gpu_rows, model_rows
from advisor.errors import AdvisorError, Infeasible, InvalidInput
from advisor.workload import PRECISIONS
from api import bundle, forms, service, views
from api.schemas import ConfigsRequest

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "templates" / "web"
templates = Jinja2Templates(env=Environment(
    loader=FileSystemLoader(TEMPLATES_DIR), autoescape=True, undefined=StrictUndefined,
    trim_blocks=True, lstrip_blocks=True))
router = APIRouter(include_in_schema=False)
FORM_TYPE = "application/x-www-form-urlencoded"


def _page(request: Request, state: forms.FormState, status: int = 200, **extra) -> Response:
    context = {"values": state.values, "errors": state.errors, "gpus": gpu_rows(),
               "presets": model_rows(), "precisions": PRECISIONS, "result": None,
               "hidden_fields": forms.FIELDS, **extra}
    return templates.TemplateResponse(request, "index.html", context, status_code=status)


async def _read_form(request: Request) -> forms.FormState:
    if request.headers.get("content-type", "").split(";")[0].strip() != FORM_TYPE:
        raise HTTPException(415, f"the form posts {FORM_TYPE}")
    return forms.parse_body(await request.body())


@router.get("/")
def form_page(request: Request) -> Response:
    return _page(request, forms.FormState(values=dict(forms.DEFAULTS)))


@router.post("/")
async def submit(request: Request) -> Response:
    state = await _read_form(request)
    req = forms.validate(state)
    if req is None:
        return _page(request, state, 422)
    try:
        rec = await run_in_threadpool(service.recommend, req)
    except InvalidInput as exc:
        forms.record(state, exc)
        return _page(request, state, 422)
    except AdvisorError as exc:
        state.add("form", str(exc))
        return _page(request, state, 422)
    return _page(request, state, result=views.result_context(rec))


@router.post("/bundle")
async def download_bundle(request: Request) -> Response:
    state = await _read_form(request)
    req = forms.validate(state)
    if req is None:
        return _page(request, state, 422)
    try:
        files = await run_in_threadpool(bundle.plan_files, ConfigsRequest(**req.model_dump()))
    except InvalidInput as exc:
        forms.record(state, exc)
        return _page(request, state, 422)
    except Infeasible as exc:
        state.add("form", f"{exc.reason}" + (f"; fix: {exc.fix}" if exc.fix else ""))
        return _page(request, state, 422)
    except HTTPException as exc:
        state.add("form", str(exc.detail))
        return _page(request, state, exc.status_code)
    return Response(bundle.zip_bytes(files), media_type="application/zip", headers={
        "content-disposition": f'attachment; filename="{bundle.ZIP_NAME}"'})
