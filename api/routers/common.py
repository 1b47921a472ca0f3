"""What the routers share: the documented error responses and the JSON result response.

The estimate and recommend handlers are `async def`: a cached answer is returned on the event
loop (a thread hop would cost more than the look-up), a miss runs the cost model in a worker
thread (api/service.py), so no request holds up the loop. Under the GIL threads buy no
parallelism: run more processes (`advisor serve --workers N`) for more throughput.
"""

from __future__ import annotations

from typing import Any

from fastapi import Response

from api.schemas import ErrorResponse

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "The body could not be read (not UTF-8)"},
    404: {"model": ErrorResponse, "description": "No such resource"},
    413: {"model": ErrorResponse, "description": "Request body too large"},
    415: {"model": ErrorResponse, "description": "The body is not declared as JSON"},
    422: {"model": ErrorResponse, "description": "Invalid input: the field, its allowed range "
          "or values (valid GPU, preset and strategy names)"},
}


def json_response(content: bytes) -> Response:
    """JSON text already serialised by advisor/core/schemas.py: sent as is, not re-validated. The
    route's `response_model` documents it."""
    return Response(content, media_type="application/json")
