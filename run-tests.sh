#!/usr/bin/env bash
# Everything the tests need, then ruff, mypy, the import contracts and the whole suite (CPU only;
# GPU tests skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh --test
.venv/bin/ruff check .
.venv/bin/mypy                 # advisor/ and api/ ([tool.mypy] in pyproject.toml)
.venv/bin/lint-imports         # the layers and import rules of docs/ARCHITECTURE.md
.venv/bin/python -m pytest -q "$@"
