"""JSON for the typed results: the one schema `--json` prints and the API serves.

`Estimate` and `Recommendation` are dataclasses (advisor/results.py); pydantic's TypeAdapter
serialises them and derives their JSON Schema, so CLI and API cannot drift apart.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import TypeAdapter

from advisor.core.results import Estimate, InfeasiblePlan, Recommendation

Result = Estimate | InfeasiblePlan | Recommendation


@cache
def adapter(cls: Any) -> TypeAdapter[Any]:
    return TypeAdapter(cls)


def to_json(result: Result, indent: int | None = 2) -> str:
    return adapter(type(result)).dump_json(result, indent=indent).decode()

