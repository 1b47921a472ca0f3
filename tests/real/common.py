"""What the real-run workers share: the run's shape, the process group, one JSON out, and the
launcher the tests call (`python -m torch.distributed.run --standalone --nproc-per-node 2 -m
tests.real.<worker> ...` from the repository root).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch.distributed as dist

WORLD = 2
MICRO_BATCH = 2
SEQ_LEN = 32
STEPS = 2
"""Optimizer steps per run; the last one is measured (optimizer state exists from the first)."""
ROOT = Path(__file__).resolve().parents[2]


def launch(module: str, *args: str | Path, ranks: int = WORLD, timeout_s: float = 120) -> None:
    """Run `python -m module args` as `ranks` torchrun processes (1: a plain process); raise with
    the output's tail when it fails. One thread per rank: the 2 ranks share a 2-core machine."""
    prefix = ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}"]
    cmd = [sys.executable, *(prefix if ranks > 1 else []), "-m", module, *map(str, args)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "DS_ACCELERATOR": "cpu"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}"
                           f"\n{proc.stderr[-3000:]}")


def init() -> int:
    """Join the gloo group torchrun describes; returns this rank."""
    dist.init_process_group("gloo")
    return dist.get_rank()


def write_and_exit(results: dict[str, Any], out: Path) -> None:
    """Gather every rank's results on rank 0, write {"ranks": [...]} to `out`, and exit.

    The exit skips interpreter teardown (os._exit): gloo's threads abort the process
    ("terminate called without an active exception") when Python tears down with them alive,
    even after destroy_process_group, which would turn a finished run into a failed launch.
    """
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, results)
    if dist.get_rank() == 0:
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps({"ranks": gathered}, indent=1))
        tmp.replace(out)
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
