"""The HTML pages' Jinja environment, and the error page a browser gets from a form route.

The form routes (`/`, `/bundle`) answer every error as a page, never as the API's JSON: field
errors re-render the form (api/routers/web.py); a body over the limit (api/middleware.py), a
wrong content type, a wrong method or an internal error get `error.html`.
"""

from __future__ import annotations

from functools import cache

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from advisor.emitters.files import templates_dir

FORM_PATHS = frozenset({"/", "/bundle"})
TITLES = {400: "The request could not be read", 404: "No such page", 405: "Not allowed here",
          413: "Too much data", 415: "Not a form submission", 422: "Cannot use this input",
          500: "Internal error"}


@cache
def environment() -> Environment:
    return Environment(loader=FileSystemLoader(templates_dir() / "web"), autoescape=True,
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


@cache
def templates() -> Jinja2Templates:
    return Jinja2Templates(env=environment())


def is_form_path(path: str) -> bool:
    return path in FORM_PATHS


def error_html(status: int, message: str, hint: str | None = None) -> str:
    """A whole page: what went wrong, what to do, and the way back to the form."""
    return environment().get_template("error.html").render(
        status=status, title=TITLES.get(status, "Error"), message=message, hint=hint)


def error_page(status: int, message: str, hint: str | None = None,
               headers: dict[str, str] | None = None) -> HTMLResponse:
    return HTMLResponse(error_html(status, message, hint), status_code=status, headers=headers)
