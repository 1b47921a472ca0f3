"""JSON for the typed results: the one schema `--json` prints and the API serves.

`Estimate` and `Recommendation` are dataclasses (advisor/core/results.py); pydantic's TypeAdapter
serialises them and derives their JSON Schema, so CLI and API cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from advisor.core.results import Estimate, InfeasiblePlan, Recommendation

Result = Estimate | InfeasiblePlan | Recommendation


_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def adapter(cls: type) -> TypeAdapter[Any]:
    """The (cached) TypeAdapter of a result class."""
    if cls not in _ADAPTERS:
        _ADAPTERS[cls] = TypeAdapter(cls)
    return _ADAPTERS[cls]


def to_json(result: Result, indent: int | None = 2) -> str:
    return adapter(type(result)).dump_json(result, indent=indent).decode()

