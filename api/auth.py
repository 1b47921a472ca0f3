"""Who may write: calibration profiles change every later answer for their GPU, so storing or
deleting one needs `Authorization: Bearer <ADVISOR_API_TOKEN>`. Without a token configured the
server is read-only for profiles (403); a missing or wrong token is 401. Reads stay open.
The token is compared in constant time."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from api.schemas import ErrorResponse

_bearer = HTTPBearer(auto_error=False, scheme_name="ApiToken",
                     description="The server's ADVISOR_API_TOKEN; required to store or delete "
                                 "calibration profiles.")


def require_writer(request: Request,
                   credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> None:
    token: str | None = request.app.state.settings.api_token
    if token is None:
        raise HTTPException(403, "profile writes are disabled on this server (it has no "
                                 "ADVISOR_API_TOKEN): it is read-only for calibration profiles")
    given = credentials.credentials if credentials and credentials.scheme.lower() == "bearer" else ""
    if not hmac.compare_digest(given.encode(), token.encode()):
        raise HTTPException(401, "a valid `Authorization: Bearer <token>` header is required to "
                                 "write calibration profiles", headers={"WWW-Authenticate": "Bearer"})


Writer = Annotated[None, Depends(require_writer)]
"""A route parameter that admits only an authorized writer."""

AUTH_ERRORS: dict[int | str, dict] = {
    401: {"model": ErrorResponse, "description": "Missing or wrong bearer token"},
    403: {"model": ErrorResponse,
          "description": "The server has no ADVISOR_API_TOKEN: profile writes are disabled"},
}
