"""Bounds on decoded JSON trees (a pasted config.json, a profile's raw measurements): finite
numbers only, a depth and a size limit. Python's JSON parser accepts NaN and Infinity, and an
unbounded tree costs unbounded time to walk and validate."""

from __future__ import annotations

import math
from typing import Any


def check_tree(value: Any, max_depth: int, max_items: int) -> None:
    """Raise ValueError for a NaN/Infinity anywhere in `value`, nesting deeper than `max_depth`,
    or more than `max_items` keys and list items in all."""
    stack, items = [(value, 0)], 0
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise ValueError(f"nested deeper than {max_depth} levels")
        if isinstance(node, float) and not math.isfinite(node):
            raise ValueError("numbers must be finite (no NaN or Infinity)")
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list | tuple) else ()
        for child in children:
            items += 1
            if items > max_items:
                raise ValueError(f"more than {max_items} keys and items")
            stack.append((child, depth + 1))
