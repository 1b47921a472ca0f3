"""Server settings: defaults for an internal network, overridable by environment variables
(so that every uvicorn worker process reads the same ones)."""

from __future__ import annotations

import os
from dataclasses import dataclass

# A config.json is 1-5 KB; 256 KiB bounds the cost of parsing and validating any request.
DEFAULT_MAX_BODY_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class Settings:
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """Largest request body, bytes."""
    cors_origins: tuple[str, ...] = ()
    """Origins allowed to call the API from a browser. Empty: CORS off (same origin only)."""

    @classmethod
    def from_env(cls) -> Settings:
        """ADVISOR_MAX_BODY_BYTES and ADVISOR_CORS_ORIGINS (comma-separated)."""
        origins = os.environ.get("ADVISOR_CORS_ORIGINS", "")
        return cls(
            max_body_bytes=int(os.environ.get("ADVISOR_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES)),
            cors_origins=tuple(o.strip() for o in origins.split(",") if o.strip()),
        )
