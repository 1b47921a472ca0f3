"""One error schema for every failure (STYLE.md, principle 7), and the handlers that map to it.

InvalidInput and request-validation errors -> 422 naming the field and what it allows;
Infeasible -> 422 with the reason and the fix; HTTP errors keep their status; anything else ->
500 with a one-line message (the traceback goes to the server log, never to the client).
On the form's routes (`/`, `/bundle`) HTTP errors and internal errors are HTML pages instead
(api/pages.py): a browser shows them, with the way back to the form.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from functools import cache
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.routing import Mount

from advisor.core.errors import AdvisorError, Infeasible, InvalidInput
from advisor.core.units import number_text
from api import pages
from api.schemas import ConfigsRequest, ErrorResponse, FieldError

log = logging.getLogger("advisor.api")

_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
          405: "method_not_allowed", 413: "body_too_large",
          415: "unsupported_media_type", 422: "invalid_input", 501: "not_implemented"}


class UnsupportedInput(AdvisorError):
    """Input that passed validation but that the cost model cannot evaluate (a bug to fix in
    advisor/, reported as 422 rather than 500 because the input is what triggers it)."""


def error_response(status: int, body: ErrorResponse, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(body.model_dump(mode="json"), status_code=status, headers=headers)


def _describe(prop: dict[str, Any]) -> str | None:
    """What one JSON Schema property allows, in words."""
    texts = []
    for arm in prop.get("anyOf", [prop]):
        if arm.get("type") == "null":
            continue
        if "enum" in arm:
            texts.append("one of " + ", ".join(map(str, arm["enum"])))
        elif arm.get("type") == "array" and "enum" in arm.get("items", {}):
            texts.append(f"up to {arm.get('maxItems', 'any number of')} of "
                         + ", ".join(arm["items"]["enum"]))
        elif "pattern" in arm:
            texts.append('a count string such as "13e9", "7B" or "4M"')
        elif arm.get("type") == "string" and "maxLength" in arm:
            texts.append(f"{arm.get('minLength', 0)} to {arm['maxLength']} characters")
        else:
            bounds = [f"{sym} {number_text(arm[key])}" for key, sym in (
                ("exclusiveMinimum", ">"), ("minimum", ">="), ("exclusiveMaximum", "<"),
                ("maximum", "<=")) if key in arm]
            if bounds:
                texts.append(" and ".join(bounds))
            elif arm.get("type"):
                texts.append(f"a JSON {arm['type']}")
    return ", or ".join(texts) or None


@cache
def _allowed_by_field() -> dict[str, str | None]:
    """Allowed values of every request field, from the documented schema (one source)."""
    props = ConfigsRequest.model_json_schema()["properties"]
    return {name: _describe(prop) for name, prop in props.items()}


def field_errors(errors: list[dict[str, Any]]) -> list[FieldError]:
    """pydantic's error list as FieldErrors; paths drop the leading `body`."""
    allowed, out = _allowed_by_field(), []
    for err in errors:
        loc = [str(part) for part in err.get("loc", ())]
        if loc and loc[0] == "body":
            loc = loc[1:]
        if err.get("type") == "json_invalid":
            loc = ["body"]
        field = ".".join(loc) or "body"
        message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        ctx_error = (err.get("ctx") or {}).get("error")
        if err.get("type") == "json_invalid" and ctx_error:
            message = f"{message}: {ctx_error}"
        top = loc[0] if loc else ""
        hint: str | None = None
        if err.get("type") == "extra_forbidden":
            message, hint = "unknown field", "the fields " + ", ".join(sorted(allowed))
        elif top in allowed:
            hint = allowed[top]
        out.append(FieldError(field=field, message=message, allowed=hint))
    return out


def invalid_input_body(exc: InvalidInput) -> ErrorResponse:
    return ErrorResponse(code="invalid_input", message=str(exc), field=exc.field, allowed=exc.allowed)


def validation_body(errors: list[dict[str, Any]]) -> ErrorResponse:
    fields = field_errors(errors)
    first = fields[0] if fields else FieldError(field="body", message="invalid request")
    more = f" (and {len(fields) - 1} more)" if len(fields) > 1 else ""
    return ErrorResponse(code="invalid_input", message=f"{first.field}: {first.message}{more}",
                         field=first.field, allowed=first.allowed, errors=fields)


async def _on_validation(_: Request, exc: Exception) -> JSONResponse:
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    return error_response(422, validation_body(list(errors)))


async def _on_advisor_error(_: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, InvalidInput):
        return error_response(422, invalid_input_body(exc))
    if isinstance(exc, Infeasible):
        return error_response(422, ErrorResponse(code="infeasible", message=exc.reason, allowed=exc.fix))
    code = "unsupported_input" if isinstance(exc, UnsupportedInput) else "invalid_input"
    return error_response(422, ErrorResponse(code=code, message=str(exc)))


def _routes(routes: list[Any]) -> Iterator[Any]:
    """Every route, inside included routers too (FastAPI 0.165 wraps each in an _IncludedRouter
    whose own routes are its `original_router`'s)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _routes(inner.routes)
        else:
            yield route


def _allowed_methods(request: Request) -> str:
    """Every method some route serves at this path (Starlette's 405 names only the first
    route's, which is wrong where GET and POST are separate routes on one path)."""
    methods = set()
    for route in _routes(request.app.routes):
        if getattr(route, "path_regex", None) and route.path_regex.match(request.url.path):
            if isinstance(route, Mount):  # static files: StaticFiles serves GET and HEAD
                methods |= {"GET", "HEAD"}
            else:
                methods |= set(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods))


async def _on_http(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, HTTPException):
        return await _on_unexpected(request, exc)
    code = _CODES.get(exc.status_code, "http_error")
    message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
    headers = dict(getattr(exc, "headers", None) or {})
    if exc.status_code == 405:
        headers["Allow"] = _allowed_methods(request)
    if pages.is_form_path(request.url.path):
        return pages.error_page(exc.status_code, message, _FORM_HINTS.get(exc.status_code),
                                headers=headers or None)
    return error_response(exc.status_code, ErrorResponse(code=code, message=message),
                          headers=headers or None)


_FORM_HINTS = {405: "Open the form and submit it from there.",
               415: "Submit the form from this site's page; other clients use the JSON API under /v1."}


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    message = "internal error; the server log has the details"
    if pages.is_form_path(request.url.path):
        return pages.error_page(500, message)
    return error_response(500, ErrorResponse(code="internal_error", message=message))


def install(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(AdvisorError, _on_advisor_error)
    app.add_exception_handler(HTTPException, _on_http)
    app.add_exception_handler(Exception, _on_unexpected)
