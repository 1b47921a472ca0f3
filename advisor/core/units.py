"""Units and converters. Inside the model everything is bytes, seconds, FLOPs and elements;
GiB, ms and friends appear only when printing (see `advisor/cli/report.py`)."""

from __future__ import annotations

import re

MiB = 1024**2
GiB = 1024**3
TiB = 1024**4
GB = 1e9  # decimal gigabyte, used by datasheet bandwidths (GB/s)

_SUFFIXES = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
# Batch sizes in tokens follow the LLM convention: "4M tokens" is 2^22 = 4,194,304 (Llama:
# 2048 sequences x 2048 tokens), so a batch divides into power-of-two micro-batches.
_BINARY_SUFFIXES = {"": 1.0, "K": 2.0**10, "M": 2.0**20, "B": 2.0**30, "G": 2.0**30, "T": 2.0**40}
# One way to match each number: digits with an optional fraction, or a bare fraction. (The old
# `[0-9]*\.?[0-9]+` could split a digit run in n ways, so a 10k-digit non-number took seconds.)
_COUNT_RE = re.compile(r"\s*([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*([KMBGT]?)\s*",
                       re.IGNORECASE)
MAX_COUNT_CHARS = 32
"""Longest count string read (`1.2345e12` is 9; a bound keeps every parse cheap)."""


def parse_count(text: str | float | int, binary: bool = False) -> float:
    """Parse a human count: `13e9`, `7B`, `4M`, `300B`, `1.5T`, or a plain number.

    `B` and `G` both mean billions; the suffix is case-insensitive. With `binary`, suffixes
    are powers of 2 (`4M` = 4,194,304), the convention for batch sizes in tokens.
    Raises ValueError on anything else.
    """
    if isinstance(text, int | float):
        return float(text)
    if len(text) > MAX_COUNT_CHARS:
        raise ValueError(f"{shown(text)} is longer than {MAX_COUNT_CHARS} characters "
                         "(examples: 13e9, 7B, 4M, 300B)")
    match = _COUNT_RE.fullmatch(text)
    if not match:
        raise ValueError(f"{shown(text)} is not a number (examples: 13e9, 7B, 4M, 300B)")
    value, suffix = match.groups()
    return float(value) * (_BINARY_SUFFIXES if binary else _SUFFIXES)[suffix.upper()]


def shown(text: str, limit: int = 40) -> str:
    """A user's string for an error message: repr'd (control characters escaped) and cut."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"


def number_text(value: float) -> str:
    """A bound as people read it: 1048576 as written, 1e13 as 1e+13, 0.1 as 0.1."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e7 else f"{value:g}"


def gbit_per_s_to_bytes_per_s(gbps: float) -> float:
    """Gbit/s (network and NVMe flags) to bytes/s: 1 Gbit/s = 1e9 / 8 bytes/s."""
    return gbps * 1e9 / 8


def gb_per_s_to_bytes_per_s(gb_per_s: float) -> float:
    """GB/s (datasheet memory and link bandwidths, decimal) to bytes/s."""
    return gb_per_s * GB


def gib_text(n_bytes: float) -> str:
    """Bytes as 'N.N GiB' for messages shown to people."""
    return f"{n_bytes / GiB:.1f} GiB"


def params_text(params: int, active: int, experts: int | None = None, top_k: int | None = None) -> str:
    """A parameter count for people: '8.03B params', or for MoE with the active share."""
    text = f"{params / 1e9:.2f}B params"
    if active != params:
        text += f" ({active / 1e9:.2f}B active per token"
        text += f": {top_k} of {experts} experts)" if experts and top_k else ")"
    return text


def duration_text(seconds: float | None, missing: str = "-") -> str:
    """Seconds as minutes, hours or days for people; `missing` when there is no value."""
    if seconds is None:
        return missing
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
