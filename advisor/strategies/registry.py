"""Strategy registry: the CLI / JSON names, in display order, mapped to their classes."""

from __future__ import annotations

from typing import Literal

from advisor.core.errors import InvalidInput
from advisor.core.protocol import Strategy
from advisor.strategies.ddp import DDP
from advisor.strategies.fsdp import _FSDP, HSDP, FSDPFullShard, FSDPGradOp, FSDPOffload
from advisor.strategies.zero import Zero1, Zero2, Zero2Offload, Zero3, Zero3NVMe, Zero3Offload, _Zero

StrategyClass = type[DDP] | type[_FSDP] | type[_Zero]
STRATEGIES: dict[str, StrategyClass] = {cls.name: cls for cls in (
    DDP, Zero1, Zero2, Zero3, Zero2Offload, Zero3Offload, Zero3NVMe,
    FSDPFullShard, FSDPGradOp, HSDP, FSDPOffload,
)}
STRATEGY_NAMES: tuple[str, ...] = tuple(STRATEGIES)
FSDP_NAMES: tuple[str, ...] = tuple(n for n, cls in STRATEGIES.items() if cls.family == "fsdp")


def get_strategy(name: str, fsdp_version: Literal[1, 2] = 2) -> Strategy:
    """The strategy called `name` (exact CLI/JSON names)."""
    cls = STRATEGIES.get(name)
    if cls is None:
        raise InvalidInput("strategy", f"unknown strategy {name!r}", ", ".join(STRATEGY_NAMES))
    if issubclass(cls, _FSDP):
        return cls(fsdp_version)
    return cls()
