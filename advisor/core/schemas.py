"""JSON for the typed results: the one schema `--json` prints and the API serves.

`Estimate` and `Recommendation` are dataclasses (advisor/results.py); pydantic's TypeAdapter
serialises them and derives their JSON Schema, so CLI and API cannot drift apart.
"""

from __future__ import annotations

from functools import cache

from pydantic import TypeAdapter

from advisor.core.results import Estimate, Recommendation


@cache
def adapter(cls: type) -> TypeAdapter:
    return TypeAdapter(cls)


def to_json(result: Estimate | Recommendation, indent: int | None = 2) -> str:
    return adapter(type(result)).dump_json(result, indent=indent).decode()


def to_dict(result: Estimate | Recommendation) -> dict:
    return adapter(type(result)).dump_python(result, mode="json")


def json_schema(cls: type[Estimate] | type[Recommendation]) -> dict:
    return adapter(cls).json_schema()
