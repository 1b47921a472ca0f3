"""The web form at `/`: GET shows it, POST shows it again with the results (or the errors next
to their fields), POST /bundle downloads the config zip. Plain HTML forms: no JavaScript."""

from __future__ import annotations

from functools import cache

from fastapi import APIRouter, Request, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.exceptions import HTTPException
from starlette.templating import Jinja2Templates

from advisor.cli.catalog import gpu_rows, model_rows
from advisor.core.errors import AdvisorError, Infeasible, InvalidInput
from advisor.core.workload import PRECISIONS
from advisor.emitters.files import templates_dir
from api import bundle, forms, service, views
from api.schemas import ConfigsRequest

TEMPLATES_DIR = templates_dir() / "web"
templates = Jinja2Templates(env=Environment(
    loader=FileSystemLoader(TEMPLATES_DIR), autoescape=True, undefined=StrictUndefined,
    trim_blocks=True, lstrip_blocks=True))
router = APIRouter(include_in_schema=False)
FORM_TYPE = "application/x-www-form-urlencoded"


def _page(request: Request, state: forms.FormState, status: int = 200, **extra) -> Response:
    context = {"values": state.values, "errors": state.errors, "options": _options(),
               "result": None, "fields": forms.FIELDS, "labels": forms.LABELS, **extra}
    return templates.TemplateResponse(request, "index.html", context, status_code=status)


def _error_page(request: Request, state: forms.FormState, exc: Exception) -> Response:
    """The form again, with the error next to its field (or above the form)."""
    if isinstance(exc, InvalidInput):
        forms.record(state, exc)
    elif isinstance(exc, Infeasible):
        state.add("form", exc.reason + (f"; cheapest fix: {exc.fix}" if exc.fix else ""))
    elif isinstance(exc, HTTPException):
        state.add("form", str(exc.detail))
        return _page(request, state, exc.status_code)
    else:
        state.add("form", str(exc))
    return _page(request, state, 422)


@cache
def _options() -> dict[str, list[tuple[str, str]]]:
    """(value, text) of each select's options."""
    return {
        "gpu": [(g["name"], f"{g['name']} ({g['memory_in_GiB']:g} GiB)") for g in gpu_rows()],
        "model": [(m["name"], f"{m['name']} ({m['params'] / 1e9:.1f}B)") for m in model_rows()],
        "precision": [("", "auto (bf16; fp16 without bf16)"), *((p, p) for p in PRECISIONS)],
    }


async def _read_form(request: Request) -> forms.FormState:
    if request.headers.get("content-type", "").split(";")[0].strip() != FORM_TYPE:
        raise HTTPException(415, f"the form posts {FORM_TYPE}")
    return forms.parse_body(await request.body())


@router.api_route("/", methods=["GET", "HEAD"])
def form_page(request: Request) -> Response:
    return _page(request, forms.FormState(values=dict(forms.DEFAULTS)))


@router.post("/")
async def submit(request: Request) -> Response:
    state = await _read_form(request)
    req = forms.validate(state)
    if req is None:
        return _page(request, state, 422)
    try:
        rec = await service.recommend(req)
    except AdvisorError as exc:
        return _error_page(request, state, exc)
    return _page(request, state, result=views.result_context(rec))


@router.post("/bundle")
async def download_bundle(request: Request) -> Response:
    state = await _read_form(request)
    req = forms.validate(state)
    if req is None:
        return _page(request, state, 422)
    try:
        files = await service.offloaded(lambda: bundle.plan_files(ConfigsRequest(**req.model_dump())))
    except (AdvisorError, HTTPException) as exc:
        return _error_page(request, state, exc)
    return Response(bundle.zip_bytes(files), media_type="application/zip", headers={
        "content-disposition": f'attachment; filename="{bundle.ZIP_NAME}"'})
