"""The app factory: routers, error handlers, body limit, security headers, static files.

`advisor serve` runs `uvicorn --factory api.app:create_app`; tests call `create_app()`.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.staticfiles import StaticFiles

from api import docs, errors
from api.middleware import BodyLimit, JsonOnly, SecurityHeaders
from api.routers import calibrations, catalog, configs, estimate, health, recommend, web
from api.settings import Settings

STATIC_DIR = Path(__file__).parent / "static"
DESCRIPTION = """Training-strategy advisor: per-GPU memory, communication, step time and throughput
for DDP, DeepSpeed ZeRO and FSDP on your cluster, a ranked recommendation, and the config files.

Request fields are the CLI's flags with underscores (`params`, `model`, `gpus`, `seq_len`,
`micro_batch`, `act_ckpt`, ...). A Hugging Face config.json is sent as JSON in `hf_config`.
Every error has the same body: `code`, `message`, and for input errors the `field` and what it
`allowed`. Reads are open; storing or deleting a calibration profile needs
`Authorization: Bearer <token>` with the server's `ADVISOR_API_TOKEN` (none set: read-only)."""


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()
    app = FastAPI(title="advisor", version=health.version_text(), description=DESCRIPTION,
                  docs_url=None, redoc_url=None)
    app.state.settings = settings
    for module in (health, catalog, estimate, recommend, configs, calibrations, web):
        app.include_router(module.router)
    docs.install(app)  # before /static: its assets mount at /static/docs
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    errors.install(app)
    app.add_middleware(JsonOnly)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins),
                           allow_methods=["GET", "POST", "DELETE"],
                           allow_headers=["content-type", "authorization"])
    app.add_middleware(SecurityHeaders)  # added last: outermost, so every response has them
    return app
