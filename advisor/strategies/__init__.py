"""One module per strategy family behind the protocol in `base.py`; names in `registry.py`."""

from advisor.strategies.registry import FSDP_NAMES, STRATEGY_NAMES, get_strategy

__all__ = ["FSDP_NAMES", "STRATEGY_NAMES", "get_strategy"]
