"""One module per strategy family behind the protocol in `base.py`; names in `registry.py`."""

from advisor.strategies.registry import STRATEGY_NAMES, get_strategy

__all__ = ["STRATEGY_NAMES", "get_strategy"]
