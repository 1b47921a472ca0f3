"""Rules that keep the layout readable (docs/ARCHITECTURE.md): small files, and the import
contracts of pyproject.toml ([tool.importlinter]) hold. mypy runs in ./run-tests.sh."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 400
SOURCES = ("advisor", "api", "calibration", "benchmarks", "tests", "templates")


def _files():
    for folder in SOURCES:
        for path in sorted((REPO / folder).rglob("*")):
            if path.suffix in (".py", ".j2", ".html") and "__pycache__" not in path.parts:
                yield path


def test_no_file_over_400_lines():
    sizes = {str(p.relative_to(REPO)): len(p.read_text().splitlines()) for p in _files()}
    long = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert long == {}, f"split these (STYLE.md: small files): {long}"


def test_import_contracts_hold():
    """advisor's layers, no torch/deepspeed/web framework in advisor/, no import cycles."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.fail("lint-imports (import-linter) is not installed; ./setup.sh --test installs it")
    proc = subprocess.run([exe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "0 broken" in proc.stdout
