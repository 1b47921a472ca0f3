"""/docs (Swagger UI) and /redoc (ReDoc), served from this server: the assets come from the
pinned `fastapi-offline` package's static folder, so the docs work on a network without internet
access (FastAPI's defaults load them from a CDN)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/static/docs"


def assets_dir() -> Path | None:
    spec = importlib.util.find_spec("fastapi_offline")
    if spec is None or not spec.origin:
        return None
    folder = Path(spec.origin).parent / "static"
    return folder if (folder / "swagger-ui-bundle.js").is_file() else None


def install(app: FastAPI) -> None:
    """Mount the assets and the two pages; without the package the pages say how to get it."""
    folder = assets_dir()
    if folder is not None:
        app.mount(ASSETS_URL, StaticFiles(directory=folder), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger() -> HTMLResponse:
        if folder is None:
            return HTMLResponse("<p>Install advisor[api] (fastapi-offline) for the docs; the schema "
                                "is at <a href='/openapi.json'>/openapi.json</a>.</p>", status_code=501)
        return get_swagger_ui_html(openapi_url="/openapi.json", title="advisor API",
                                   swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
                                   swagger_favicon_url=f"{ASSETS_URL}/favicon.png")

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        if folder is None:
            return HTMLResponse("<p>Install advisor[api] (fastapi-offline) for the docs.</p>",
                                status_code=501)
        return get_redoc_html(openapi_url="/openapi.json", title="advisor API",
                              redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
                              redoc_favicon_url=f"{ASSETS_URL}/favicon.png", with_google_fonts=False)
