"""Scripts the end-to-end emit tests launch (train_*.py) and the launcher-faithful checkers they
and tests/test_emit_parsers.py share (checks.py)."""
