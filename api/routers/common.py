"""What the routers share: the documented error responses and the JSON result response.

The estimate and recommend handlers are `async def` and call the cost model inline: it is pure
CPU work (~0.3 ms for an estimate, ~15-20 ms for an uncached search, bounded by the input
limits), so a worker thread would buy no parallelism under the GIL and its hop costs more than
a cached answer. Run more processes (`advisor serve --workers N`) for more throughput.
"""

from __future__ import annotations

from typing import Any

from fastapi import Response

from api.schemas import ErrorResponse

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "The body could not be read (not UTF-8)"},
    413: {"model": ErrorResponse, "description": "Request body too large"},
    422: {"model": ErrorResponse, "description": "Invalid input: the field, its allowed range "
          "or values (valid GPU, preset and strategy names)"},
}


def json_response(content: bytes) -> Response:
    """JSON text already serialised by advisor/schemas.py: sent as is, not re-validated. The
    route's `response_model` documents it."""
    return Response(content, media_type="application/json")
