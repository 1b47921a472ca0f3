"""The domain calls behind the endpoints: request model -> advisor functions -> typed result.

The same steps as the CLI (`advisor/cli/main.py`). A result is a pure function of its request and of
the calibration profiles stored (estimates use the newest profile of their GPU), so each kind
keeps a bounded LRU cache keyed by the request's canonical JSON *and the store's version*
(`profile_store.version_token`): a repeated request costs a dictionary look-up, and a profile
stored by another worker or by `advisor profiles import` is seen at once.

A cached answer is returned on the event loop; a miss runs the cost model in a worker thread
(`run_in_threadpool`), so a slow request never holds up /healthz or the cached answers of others.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from advisor.core import schemas
from advisor.core.errors import AdvisorError, InvalidInput
from advisor.core.results import Estimate, InfeasiblePlan, Recommendation
from advisor.profiles import store as profile_store
from advisor.requests.jobs import run_estimate, run_recommend
from api.errors import UnsupportedInput
from api.schemas import EstimateRequest, RecommendRequest

log = logging.getLogger("advisor.api")
CACHE_ENTRIES = 256  # per cache; a recommendation is ~50 KB as objects and ~45 KB as JSON: < 30 MB
K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")


class LRU(Generic[K, V]):
    """A thread-safe least-recently-used map of at most `size` entries."""

    def __init__(self, size: int) -> None:
        self.size, self._data, self._lock = size, OrderedDict[K, V](), threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            if key not in self._data:
                return None
            self._data.move_to_end(key)
            return self._data[key]

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


_caches: dict[str, LRU[tuple, object]] = {
    kind: LRU(CACHE_ENTRIES) for kind in ("estimate", "recommend", "estimate_json", "recommend_json")}


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


def _cached(kind: str, key: tuple, compute: Callable[[], T]) -> T:
    cache = _caches[kind]
    hit = cache.get(key)
    if hit is not None:
        return hit  # type: ignore[return-value]
    value = guarded(compute)
    cache.put(key, value)
    return value


def _key(text: str) -> tuple:
    return (text, profile_store.version_token())


def _estimate(key: tuple) -> Estimate | InfeasiblePlan:
    return _cached("estimate", key, lambda: run_estimate(EstimateRequest.model_validate_json(key[0])))


def _recommend(key: tuple) -> Recommendation:
    return _cached("recommend", key,
                   lambda: run_recommend(RecommendRequest.model_validate_json(key[0]))[0])


def _recommend_text(req: RecommendRequest) -> str:
    """For a ConfigsRequest only the RecommendRequest part counts."""
    if type(req) is not RecommendRequest:
        req = RecommendRequest.model_validate(req.model_dump(include=set(RecommendRequest.model_fields)))
    return req.model_dump_json()


async def _answer(kind: str, key: tuple, compute: Callable[[], T]) -> T:
    """The cached answer at once, or the computed one from a worker thread."""
    hit = _caches[kind].get(key)
    if hit is not None:
        return hit  # type: ignore[return-value]
    return await run_in_threadpool(_cached, kind, key, compute)


def recommend_sync(req: RecommendRequest) -> Recommendation:
    """For code already off the event loop (the config bundle)."""
    return _recommend(_key(_recommend_text(req)))


async def estimate(req: EstimateRequest) -> Estimate | InfeasiblePlan:
    key = _key(req.model_dump_json())
    return await _answer("estimate", key, lambda: _estimate(key))


async def estimate_json(req: EstimateRequest) -> bytes:
    """As `advisor estimate --json` prints it, compact."""
    key = _key(req.model_dump_json())
    return await _answer("estimate_json", key,
                         lambda: schemas.to_json(_estimate(key), indent=None).encode())


async def recommend(req: RecommendRequest) -> Recommendation:
    key = _key(_recommend_text(req))
    return await _answer("recommend", key, lambda: _recommend(key))


async def recommend_json(req: RecommendRequest) -> bytes:
    """As `advisor recommend --json` prints it, compact."""
    key = _key(_recommend_text(req))
    return await _answer("recommend_json", key,
                         lambda: schemas.to_json(_recommend(key), indent=None).encode())


async def offloaded(fn: Callable[[], T]) -> T:
    """Run other CPU work (rendering a config bundle) in a worker thread, guarded."""
    return await run_in_threadpool(guarded, fn)


def clear_caches() -> None:
    for cache in _caches.values():
        cache.clear()
