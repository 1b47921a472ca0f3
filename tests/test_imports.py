"""The CLI stays light: a recommendation imports neither torch, DeepSpeed nor FastAPI.

Run in a fresh interpreter so that modules other tests import cannot hide or fake a heavy import.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "deepspeed", "fastapi")

CHILD = f"""
import contextlib, io, json, sys
from advisor.cli.main import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    rc = main(["recommend", "--params", "13e9", "--gpus", "8xA100", "--json"])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r})
print(json.dumps({{"rc": rc, "chosen": json.loads(out.getvalue())["chosen"], "heavy": heavy}}))
"""


def test_recommend_does_not_import_torch_deepspeed_or_fastapi():
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["rc"] == 0
    assert result["chosen"]  # the recommendation really ran
    assert result["heavy"] == []
