#!/usr/bin/env bash
# Everything the tests need, then the whole suite (CPU only; GPU tests skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh --test
.venv/bin/ruff check .
.venv/bin/python -m pytest -q "$@"
