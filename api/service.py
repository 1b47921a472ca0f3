"""The domain calls behind the endpoints: request model -> advisor functions -> typed result.

The same steps as the CLI (`advisor/cli.py`). A result is a pure function of its request, so
each kind keeps a bounded LRU cache keyed by the request's canonical JSON: a repeated request
(a dashboard polling, a form re-submitted) costs a dictionary look-up instead of a search.
Storing a calibration profile clears the caches (a matched profile changes the answers).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import lru_cache
from typing import TypeVar

from pydantic import ValidationError

from advisor import schemas
from advisor.errors import AdvisorError, InvalidInput
from advisor.jobs import run_estimate, run_recommend
from advisor.results import Estimate, Recommendation
from api.errors import UnsupportedInput
from api.schemas import EstimateRequest, RecommendRequest

log = logging.getLogger("advisor.api")
CACHE_ENTRIES = 256  # per cache; a recommendation is ~50 KB as objects and ~45 KB as JSON: < 30 MB
T = TypeVar("T")


def guarded(fn: Callable[[], T]) -> T:
    """Run domain code; errors that are not the advisor's own become 422s, not 500s."""
    try:
        return fn()
    except AdvisorError:
        raise
    except ValidationError as exc:  # a value derived from the request is out of range
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "request"
        raise InvalidInput(field, f"{err['msg']} (derived from the request)") from None
    except (ArithmeticError, ValueError) as exc:
        log.exception("cost model failed on a validated request")
        raise UnsupportedInput(f"the cost model cannot evaluate this input "
                               f"({type(exc).__name__}: {exc})") from None


@lru_cache(maxsize=CACHE_ENTRIES)
def _estimate(key: str) -> Estimate:
    return run_estimate(EstimateRequest.model_validate_json(key))


@lru_cache(maxsize=CACHE_ENTRIES)
def _recommend(key: str) -> Recommendation:
    return run_recommend(RecommendRequest.model_validate_json(key))[0]


# The JSON text is cached too: serialising a recommendation (~45 KB) costs more than a look-up.
@lru_cache(maxsize=CACHE_ENTRIES)
def _estimate_json(key: str) -> bytes:
    return schemas.to_json(_estimate(key), indent=None).encode()


@lru_cache(maxsize=CACHE_ENTRIES)
def _recommend_json(key: str) -> bytes:
    return schemas.to_json(_recommend(key), indent=None).encode()


def _recommend_key(req: RecommendRequest) -> str:
    """For a ConfigsRequest only the RecommendRequest part counts."""
    if type(req) is not RecommendRequest:
        req = RecommendRequest.model_validate(req.model_dump(include=set(RecommendRequest.model_fields)))
    return req.model_dump_json()


def estimate(req: EstimateRequest) -> Estimate:
    return guarded(lambda: _estimate(req.model_dump_json()))


def estimate_json(req: EstimateRequest) -> bytes:
    """As `advisor estimate --json` prints it, compact."""
    return guarded(lambda: _estimate_json(req.model_dump_json()))


def recommend(req: RecommendRequest) -> Recommendation:
    return guarded(lambda: _recommend(_recommend_key(req)))


def recommend_json(req: RecommendRequest) -> bytes:
    """As `advisor recommend --json` prints it, compact."""
    return guarded(lambda: _recommend_json(_recommend_key(req)))


def clear_caches() -> None:
    for cached in (_estimate, _recommend, _estimate_json, _recommend_json):
        cached.cache_clear()
