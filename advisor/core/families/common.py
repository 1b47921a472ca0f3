"""Reading a config.json for one model family: its keys, with the defaults of the matching
transformers config class, and errors that name the key and the family's required keys."""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Sequence
from typing import Any

from advisor.core.errors import InvalidInput
from advisor.core.units import shown

FIELD = "hf_config"
_MISSING = object()
Reader = Callable[["Keys"], dict[str, Any]]
"""A family's reader: config keys in, ModelSpec fields out."""


class Keys:
    """One family's view of a config: `get` / `int` / `bool` with transformers' defaults; a
    required key that is absent, or of the wrong type, is InvalidInput naming it."""

    def __init__(self, config: dict[str, Any], family: str, required: Sequence[str]):
        self.config, self.family, self.required = config, family, tuple(required)

    def _fail(self, message: str) -> InvalidInput:
        return InvalidInput(FIELD, f"{message} (model_type {self.family!r})",
                            f"a {self.family} config.json with {', '.join(self.required)}")

    def get(self, *keys: str, default: Any = _MISSING) -> Any:
        """The first of `keys` present and not null (later keys are older spellings); a key
        of the family's required ones has no default."""
        for key in keys:
            if self.config.get(key) is not None:
                return self.config[key]
        if default is _MISSING or keys[0] in self.required:
            raise self._fail(f"missing required key {keys[0]!r}")
        return default

    def int(self, *keys: str, default: Any = _MISSING, low: int = 1) -> Any:
        value = self.get(*keys, default=default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self._fail(f"{keys[0]} must be an integer >= {low}, got {shown(str(value))}")
        return value

    def bool(self, key: str, default: bool) -> bool:
        value = self.config.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._fail(f"{key} must be true or false, got {shown(str(value))}")
        return value

    def number(self, key: str, default: float | None) -> float | None:
        value = self.config.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                or value <= 0:
            raise self._fail(f"{key} must be a positive number, got {shown(str(value))}")
        return float(value)

    def layer_types(self, layers: builtins.int, default: Callable[[builtins.int], str]) -> list[str]:
        """The per-layer attention kinds ("sliding_attention" / "full_attention"): the config's
        `layer_types` if given, else transformers' default pattern `default(i)`."""
        given = self.config.get("layer_types")
        if given is None:
            return [default(i) for i in range(layers)]
        if not isinstance(given, list) or len(given) != layers or not all(isinstance(t, str) for t in given):
            raise self._fail(f"layer_types must list {layers} strings, one per layer")
        return given


def sliding(kinds: list[str], window: int | None) -> dict[str, Any]:
    """ModelSpec's sliding-window fields from the per-layer kinds."""
    count = sum(kind == "sliding_attention" for kind in kinds)
    return {"sliding_window": window, "sliding_layers": count} if window and count else {}
