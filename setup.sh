#!/usr/bin/env bash
# Set up (or refresh) the project's virtual environment in .venv.
#   ./setup.sh          the CLI and the server
#   ./setup.sh --test   plus what the tests need: torch (CPU wheel, pinned), DeepSpeed,
#                       Accelerate, pytest, ruff, and Debian's chromium for the browser tests
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
export PIP_DISABLE_PIP_VERSION_CHECK=1
.venv/bin/python -m pip install -q --upgrade pip setuptools wheel
if [ "${1:-}" = "--test" ]; then
    # torch first and pinned: a bare `torch` requirement would pull a multi-GB CUDA build.
    .venv/bin/python -m pip install -q "torch==2.13.0"
    .venv/bin/python -m pip install -q -e ".[api,test]"
    # DeepSpeed builds from its sdist and imports torch while doing so: no build isolation,
    # so it sees the CPU torch above instead of downloading another one.
    .venv/bin/python -m pip install -q --no-build-isolation "deepspeed==0.19.8"
    if [ -f .ci/install-browser.sh ]; then bash .ci/install-browser.sh; fi
else
    .venv/bin/python -m pip install -q -e ".[api]"
fi
