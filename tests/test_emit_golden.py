"""Golden files: exactly what users get for three canonical plans, so a reviewer sees every change.

Any difference fails. After a reviewed change to the cost model or the templates, regenerate with
    ADVISOR_UPDATE_GOLDEN=1 pytest tests/test_emit_golden.py
and review the diff of tests/golden/. The folder the plan was written to is replaced by
/path/to/plan (it appears in deepspeed_config_file); `--profile none` pins the shipped priors, so a
calibration profile on the machine does not change the numbers.
"""

from __future__ import annotations

import difflib
import os
import shutil
from pathlib import Path

import pytest

from advisor.cli.main import main

GOLDEN = Path(__file__).parent / "golden"
PLACEHOLDER = "/path/to/plan"
CASES = {
    # DESIGN.md's first example: the recommender's choice plus the runner-up
    "13e9-8xA100-recommend": ["recommend", "--params", "13e9", "--gpus", "8xA100", "--alternatives", "1"],
    # issue 4's example: DeepSpeed ZeRO-3 with CPU offload on two nodes
    "llama-3-8b-2x8xH100-zero3-offload": ["emit", "--model", "llama-3-8b", "--gpus", "2x8xH100",
                                          "--strategy", "zero3-offload", "--micro-batch", "4"],
    # 70B on 40 GB GPUs: only ZeRO-Infinity fits (recommend ranks it first)
    "llama-3-70b-8xA100-40GB-zero3-nvme": ["emit", "--model", "llama-3-70b", "--gpus", "8xA100-40GB",
                                           "--strategy", "zero3-nvme", "--nvme-path", "/local_nvme"],
}


def _tree(root: Path, placeholder_for: Path | None = None) -> dict[str, str]:
    files = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        text = path.read_text()
        if placeholder_for is not None:
            text = text.replace(str(placeholder_for), PLACEHOLDER)
        files[str(path.relative_to(root))] = text
    return files


@pytest.mark.parametrize("case", CASES)
def test_emitted_files_match_the_golden_files(case, tmp_path, capsys):
    out = tmp_path / "plan"
    assert main([*CASES[case], "--profile", "none", "--out", str(out)]) == 0
    capsys.readouterr()
    got = _tree(out, placeholder_for=out)
    golden = GOLDEN / case
    if os.environ.get("ADVISOR_UPDATE_GOLDEN") == "1":
        shutil.rmtree(golden, ignore_errors=True)
        for rel, text in got.items():
            (golden / rel).parent.mkdir(parents=True, exist_ok=True)
            (golden / rel).write_text(text)
    want = _tree(golden)
    assert sorted(got) == sorted(want), "files differ; ADVISOR_UPDATE_GOLDEN=1 after review"
    diffs = ["".join(difflib.unified_diff(want[rel].splitlines(True), got[rel].splitlines(True),
                                         f"golden/{case}/{rel}", f"emitted/{rel}"))
             for rel in want if want[rel] != got[rel]]
    assert not diffs, "\n".join(diffs) + "\n(ADVISOR_UPDATE_GOLDEN=1 regenerates after review)"
