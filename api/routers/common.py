"""What the routers share: the documented error responses and the JSON result response."""

from __future__ import annotations

from typing import Any

from fastapi import Response

from advisor import schemas
from advisor.results import Estimate, Recommendation
from api.schemas import ErrorResponse

ERRORS: dict[int | str, dict[str, Any]] = {
    413: {"model": ErrorResponse, "description": "Request body too large"},
    422: {"model": ErrorResponse, "description": "Invalid input: the field, its allowed range "
          "or values (valid GPU, preset and strategy names)"},
}


def result_response(result: Estimate | Recommendation) -> Response:
    """The result as `advisor ... --json` prints it (compact): serialised once, not re-validated."""
    return Response(schemas.to_json(result, indent=None), media_type="application/json")
