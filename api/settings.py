"""Server settings: defaults for an internal network, overridable by environment variables
(so that every uvicorn worker process reads the same ones)."""

from __future__ import annotations

import os
from dataclasses import dataclass

# A config.json is 1-5 KB; 256 KiB bounds the cost of parsing and validating any request.
DEFAULT_MAX_BODY_BYTES = 256 * 1024
MIN_TOKEN_CHARS = 16


@dataclass(frozen=True, slots=True)
class Settings:
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """Largest request body, bytes."""
    cors_origins: tuple[str, ...] = ()
    """Origins allowed to call the API from a browser. Empty: CORS off (same origin only)."""
    api_token: str | None = None
    """Bearer token that authorizes calibration-profile writes (POST, DELETE). None: the
    server is read-only for profiles."""

    def __post_init__(self) -> None:
        if self.api_token is not None and (len(self.api_token) < MIN_TOKEN_CHARS
                                           or not self.api_token.isascii()
                                           or not self.api_token.isprintable()
                                           or " " in self.api_token):
            raise ValueError(f"ADVISOR_API_TOKEN must be at least {MIN_TOKEN_CHARS} printable ASCII "
                             "characters without spaces (e.g. `openssl rand -hex 32`)")

    @classmethod
    def from_env(cls) -> Settings:
        """ADVISOR_MAX_BODY_BYTES, ADVISOR_CORS_ORIGINS (comma-separated), ADVISOR_API_TOKEN."""
        origins = os.environ.get("ADVISOR_CORS_ORIGINS", "")
        return cls(
            max_body_bytes=int(os.environ.get("ADVISOR_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES)),
            cors_origins=tuple(o.strip() for o in origins.split(",") if o.strip()),
            api_token=os.environ.get("ADVISOR_API_TOKEN") or None,
        )
