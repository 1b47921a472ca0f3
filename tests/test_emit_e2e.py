"""End to end on CPU: emit the files for a tiny model, then really train a few steps with 2
processes and check the engine and its sharding are the ones the files name.

DDP and DeepSpeed (ZeRO-2, ZeRO-3, ZeRO-3 with CPU offload) go through
`accelerate launch --config_file <emitted accelerate_config.yaml>`; FSDP2 builds the plugin from
the emitted YAML as the launcher does and applies it with Accelerate's fsdp2_prepare_model under
torchrun/gloo (Accelerate does not shard FSDP on a machine without GPUs). The scripts live in
tests/e2e/. Each run takes about 10-20 s on two cores.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from advisor.cli.main import main

pytestmark = pytest.mark.slow
pytest.importorskip("deepspeed")
# Accelerate's DeepSpeed integration imports transformers (DeepSpeedPlugin.select ->
# set_deepspeed_weakref), and the tiny model is a transformers Llama.
pytest.importorskip("transformers")

E2E = Path(__file__).parent / "e2e"
WORLD = 2
STEPS = 8
TIMEOUT_S = 240


def adapt_for_this_machine(plan: Path) -> dict[str, str]:
    """The one place where the test changes emitted files; returns extra environment variables.

    - World size: the plan targets 8 GPUs; here 2 CPU processes run it. num_processes becomes 2
      (num_machines 1) and ds_config.json's train_batch_size becomes micro x accum x 2.
    - Device type: Accelerate only uses gloo on a CPU-only machine when ACCELERATE_USE_CPU is set
      (the DDP run); DeepSpeed's CPU accelerator picks gloo by itself.
    - Optimizer: an offload plan names AdamW in ds_config.json, which DeepSpeed builds as its
      C++ CPU Adam (minutes to compile here); "torch_adam": true makes it torch.optim.AdamW,
      the same update.
    """
    path = plan / "accelerate_config.yaml"
    acc = yaml.safe_load(path.read_text())
    acc |= {"num_processes": WORLD, "num_machines": 1}
    path.write_text(yaml.safe_dump(acc, sort_keys=False))
    ds_path = plan / "ds_config.json"
    if not ds_path.exists():
        return {"ACCELERATE_USE_CPU": "1"} if acc["distributed_type"] == "MULTI_GPU" else {}
    ds = json.loads(ds_path.read_text())
    ds["train_batch_size"] = ds["train_micro_batch_size_per_gpu"] * ds["gradient_accumulation_steps"] * WORLD
    if "optimizer" in ds:
        ds["optimizer"]["params"]["torch_adam"] = True
    ds_path.write_text(json.dumps(ds, indent=2))
    return {}


def emit_tiny(tmp_path: Path, strategy: str) -> Path:
    out = tmp_path / strategy
    argv = ["emit", "--layers", "2", "--hidden", "64", "--heads", "4", "--ffn", "128", "--vocab",
            "256", "--seq-len", "32", "--gpus", "8xA100", "--strategy", strategy,
            "--micro-batch", "2", "--grad-accum", "2", "--act-ckpt", "none", "--out", str(out)]
    assert main(argv) == 0
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd: list[str], env: dict[str, str], results: Path) -> list[dict]:
    results.mkdir()
    proc = subprocess.run(cmd, cwd=E2E, env={**os.environ, "PYTHONFAULTHANDLER": "1", **env},
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-8000:]
    reports = [json.loads((results / f"rank{r}.json").read_text()) for r in range(WORLD)]
    for r in reports:
        assert r["world"] == WORLD
        # learnable data: the loss must really fall over STEPS optimizer steps
        assert r["losses"][-1] < 0.8 * r["losses"][0], r["losses"]
    return reports


def _accelerate_launch(plan: Path, tmp_path: Path) -> list[dict]:
    env = adapt_for_this_machine(plan)
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
           str(plan / "accelerate_config.yaml"), "--main_process_port", str(_free_port()),
           "train_accelerate.py", str(results), str(STEPS)]
    return _run(cmd, env, results)


def _holds_one_nth(report: dict) -> bool:
    """local x N = full, within DeepSpeed's / FSDP's padding (under 1% here)."""
    return abs(report["local_numel"] * WORLD - report["full_numel"]) <= 0.01 * report["full_numel"]


def test_ddp_runs_replicated(tmp_path):
    reports = _accelerate_launch(emit_tiny(tmp_path, "ddp"), tmp_path)
    assert {r["distributed_type"] for r in reports} == {"DistributedType.MULTI_CPU"}
    assert {r["model_class"] for r in reports} == {"DistributedDataParallel"}
    # every rank holds the whole model, and the all-reduce kept the replicas identical
    assert all(r["local_numel"] == r["full_numel"] for r in reports)
    assert reports[0]["param_checksum"] == pytest.approx(reports[1]["param_checksum"], rel=1e-6)


@pytest.mark.parametrize(("strategy", "stage", "zero_optimizer", "offload"), [
    ("zero2", 2, "DeepSpeedZeroOptimizer", False),
    ("zero3", 3, "DeepSpeedZeroOptimizer_Stage3", False),
    ("zero3-offload", 3, "DeepSpeedZeroOptimizer_Stage3", True),
])
def test_deepspeed_runs_sharded(tmp_path, strategy, stage, zero_optimizer, offload):
    reports = _accelerate_launch(emit_tiny(tmp_path, strategy), tmp_path)
    for r in reports:
        assert r["distributed_type"] == "DistributedType.DEEPSPEED"
        assert (r["engine"], r["stage"], r["zero_optimizer"]) == ("DeepSpeedEngine", stage, zero_optimizer)
        assert r["bf16"] is True
        assert r["offload_optimizer"] is offload
        assert r.get("offload_param", False) is offload
        # micro 2 x accum 2 x 2 ranks, after the world-size adaptation
        assert r["train_batch_size"] == 2 * 2 * WORLD
        assert _holds_one_nth(r), r


def test_fsdp2_runs_sharded(tmp_path):
    plan = emit_tiny(tmp_path, "fsdp")
    adapt_for_this_machine(plan)
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(WORLD),
           "--master_port", str(_free_port()), "train_fsdp2.py", str(plan / "accelerate_config.yaml"),
           str(results), str(STEPS)]
    reports = _run(cmd, {}, results)
    for r in reports:
        # fully_shard renames each unit FSDP<class>: one unit per decoder layer
        assert r["fsdp_units"].count("FSDPLlamaDecoderLayer") == 2
        assert r["reshard_after_forward"] is True  # FULL_SHARD
        assert r["param_dtype"] == "torch.bfloat16"
        assert _holds_one_nth(r), r
