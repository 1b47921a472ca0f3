"""The web form at `/`: GET shows it, POST shows it again with the results (or the errors next
to their fields), POST /bundle downloads the config zip. Plain HTML forms: no JavaScript.
Every error on these routes is a page (api/pages.py), never JSON."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from starlette.exceptions import HTTPException

from advisor.core.errors import AdvisorError, Infeasible, InvalidInput
from advisor.core.results import Recommendation
from api import bundle, form_fields, forms, pages, service, sweep, views
from api.schemas import ConfigsRequest

router = APIRouter(include_in_schema=False)
FORM_TYPES = (forms.URLENCODED, forms.MULTIPART)
HIDDEN_SKIP = ("strategy",)  # set by the button that downloads


def _hidden(state: forms.FormState, result: dict | None) -> list[tuple[str, str]]:
    """What the download form carries: the whole job as typed (the NVMe path is shown instead,
    when a plan needs one)."""
    skip = (*HIDDEN_SKIP, "nvme_path") if _show_nvme(state, result) else HIDDEN_SKIP
    return [(name, value) for name, value in state.values.items() if name not in skip]


def _show_nvme(state: forms.FormState, result: dict | None) -> bool:
    """The download box asks for the NVMe path when its plan swaps to NVMe, or a download
    failed for the want of it."""
    return result is not None and (result["needs_nvme"] or "nvme_path" in state.errors)


def _page(request: Request, state: forms.FormState, status: int = 200,
          result: dict | None = None) -> Response:
    settings = request.app.state.settings
    context = {"values": state.values, "errors": state.errors, "upload": state.upload,
               "groups": form_fields.groups(), "fields": form_fields.by_name(),
               "sources": form_fields.SOURCES, "source": state.source,
               "open_groups": state.open_groups(), "result": result, "hidden": _hidden(state, result),
               "show_nvme": _show_nvme(state, result),
               "command": forms.command_line(state) if result else "",
               "json_chars": settings.max_body_bytes // 3, "max_body_kib": settings.max_body_bytes // 1024}
    return pages.templates().TemplateResponse(request, "index.html", context, status_code=status)


def _record(state: forms.FormState, exc: Exception) -> None:
    if isinstance(exc, InvalidInput):
        forms.record(state, exc)
    elif isinstance(exc, Infeasible):
        state.add("form", exc.reason + (f"; cheapest fix: {exc.fix}" if exc.fix else ""))
    else:
        state.add("form", str(exc))


async def _read_form(request: Request) -> forms.FormState:
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() not in FORM_TYPES:
        raise HTTPException(415, f"the form posts {' or '.join(FORM_TYPES)}")
    return forms.parse_body(await request.body(), content_type)


def _sweep(req: ConfigsRequest, rec: Recommendation) -> list[sweep.Point]:
    plan = views.chosen_plan(rec)
    return sweep.sweep(req, plan) if plan is not None else []


async def _results(req: ConfigsRequest) -> dict:
    """The recommendation (cached) and the chosen plan's micro-batch sweep, off the event loop."""
    rec = await service.recommend(req)
    points = await service.offloaded(lambda: _sweep(req, rec))
    return views.result_context(rec, points, req.strategy)


@router.api_route("/", methods=["GET", "HEAD"])
def form_page(request: Request) -> Response:
    return _page(request, forms.FormState(values=forms.defaults()))


@router.post("/")
async def submit(request: Request) -> Response:
    state = await _read_form(request)
    req = forms.validate(state)
    if req is None:
        return _page(request, state, 422)
    try:
        result = await _results(req)
    except AdvisorError as exc:
        _record(state, exc)
        return _page(request, state, 422)
    forms.check_files(state, req)  # a bad NVMe path: the results, and the error by its field
    return _page(request, state, 422 if state.errors else 200, result=result)


@router.post("/bundle")
async def download_bundle(request: Request) -> Response:
    state = await _read_form(request)
    req = forms.validate(state)
    if req is None:
        return _page(request, state, 422)
    try:
        files = await service.offloaded(lambda: bundle.plan_files(req))
    except AdvisorError as exc:
        # The page again, results included, with the error next to the field to fill.
        _record(state, exc)
        try:
            result = await _results(req)
        except AdvisorError:
            result = None
        return _page(request, state, 422, result)
    return Response(bundle.zip_bytes(files), media_type="application/zip", headers={
        "content-disposition": f'attachment; filename="{bundle.ZIP_NAME}"'})
