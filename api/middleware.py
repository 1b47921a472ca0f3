"""Two pure-ASGI middlewares: a request-body size limit and security headers."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api import pages
from api.schemas import ErrorResponse

# The pages: no scripts at all, styles and images from this server only, forms post back here.
PAGE_CSP = ("default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
            "frame-ancestors 'none'; base-uri 'none'")
# /docs and /redoc: Swagger UI / ReDoc served from this server (api/docs.py) with an inline
# bootstrap script; nothing from another origin.
DOCS_CSP = ("default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; font-src 'self'; connect-src 'self'; worker-src blob:; "
            "frame-ancestors 'none'; base-uri 'none'")
_COMMON = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=(), interest-cohort=()"),
]


class SecurityHeaders:
    """Adds the headers above to every HTTP response; `no-store` except for /static."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        csp = DOCS_CSP if path in ("/docs", "/redoc") else PAGE_CSP
        extra = [*_COMMON, (b"content-security-policy", csp.encode())]
        if not path.startswith("/static/"):
            extra.append((b"cache-control", b"no-store"))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []),
                                      *((k, v) for k, v in extra if k not in names)]
            await send(message)

        await self.app(scope, receive, send_with_headers)


class BodyLimit:
    """Rejects a request body over `max_bytes` with 413 before the app parses any of it.

    The body (at most `max_bytes`, checked on Content-Length and again while it streams in) is
    buffered and replayed to the app, so a chunked upload cannot slip past the header check.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._too_large(scope, send)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(scope, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, send: Send) -> None:
        """413: JSON, or on the form's routes a page a browser shows (api/pages.py)."""
        if pages.is_form_path(scope.get("path", "")):
            media, body = b"text/html; charset=utf-8", pages.error_html(
                413, f"The form's data is over {self.max_bytes // 1024} KiB.",
                "A config.json is 1-50 KB: paste or choose the file itself, not an archive or a "
                "checkpoint.").encode()
        else:
            media, body = b"application/json", json.dumps(ErrorResponse(
                code="body_too_large", message=f"request body over {self.max_bytes} bytes",
                allowed=f"at most {self.max_bytes} bytes").model_dump(mode="json")).encode()
        await send({"type": "http.response.start", "status": 413, "headers": [
            (b"content-type", media), (b"content-length", str(len(body)).encode()),
            (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


class JsonOnly:
    """415 for a request with a body under /v1 that is not declared JSON (`application/json` or
    `application/*+json`): FastAPI would otherwise validate a text/plain body as bytes and answer
    a misleading 422."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH")
                or not scope.get("path", "").startswith("/v1/")):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        has_body = headers.get(b"content-length", b"0") not in (b"0", b"") or b"transfer-encoding" in headers
        media = headers.get(b"content-type", b"").decode("latin-1").split(";")[0].strip().lower()
        if not has_body or media == "application/json" or (
                media.startswith("application/") and media.endswith("+json")):
            await self.app(scope, receive, send)
            return
        body = json.dumps(ErrorResponse(
            code="unsupported_media_type", message=f"the body must be JSON, sent as "
            f"Content-Type: application/json (got {media or 'no content type'!r})",
            allowed="application/json").model_dump(mode="json")).encode()
        await send({"type": "http.response.start", "status": 415, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
