"""What is recommended is what is emitted: every plan folder, read back from its own runnable files
(advisor/emitters/readback.py: the YAML, ds_config.json, training_args.json, model_config.json,
advisor_ac's arguments) and estimated again, gives the plan's own strategy, workload and numbers.
An edit to a file changes the re-estimate (the files are read, not plan.json's copy)."""

from __future__ import annotations

import json

import pytest

from advisor.core.results import Estimate
from advisor.emitters.choices import EmitOptions
from advisor.emitters.files import emit_strategy, write_recommendation
from advisor.emitters.readback import request_from_plan
from advisor.requests.jobs import run_estimate, run_recommend
from advisor.requests.models import EstimateRequest, RecommendRequest, validate_request
from advisor.strategies import STRATEGY_NAMES

MODELS = ["llama-3.1-8b", "qwen3-8b", "mixtral-8x7b", "gemma-2-9b", "phi-3-mini", "gpt-neox-20b",
          "deepseek-v2-lite", "gpt-oss-20b", "falcon-7b", "olmo-2-7b"]
GPUS = {"hsdp": "2x8xH100"}


def reestimate(folder) -> Estimate:
    est = run_estimate(validate_request(EstimateRequest, request_from_plan(folder)))
    assert isinstance(est, Estimate)
    return est


def same_plan(got: Estimate, want: Estimate) -> None:
    assert got.strategy == want.strategy
    assert got.workload == want.workload
    assert got.engine_config == want.engine_config
    assert got.layout == want.layout
    assert got.memory.per_gpu_bytes == want.memory.per_gpu_bytes
    assert got.memory.cpu_per_node_bytes == want.memory.cpu_per_node_bytes
    assert got.throughput.tokens_per_s_per_gpu == pytest.approx(want.throughput.tokens_per_s_per_gpu,
                                                                rel=1e-12)
    assert got.model.params == want.model.params
    assert got.model.architecture.layers == want.model.architecture.layers


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_every_strategy_reads_back_to_its_plan(strategy: str, tmp_path) -> None:
    data = {"model": "llama-3.2-1b", "gpus": GPUS.get(strategy, "8xH100"), "seq_len": 2048}
    options = EmitOptions(nvme_path="/nvme") if strategy == "zero3-nvme" else EmitOptions()
    plan = emit_strategy(data, strategy, tmp_path, options)[0]
    same_plan(reestimate(tmp_path), plan.estimate)


@pytest.mark.parametrize("model", MODELS)
def test_every_family_reads_back_to_its_recommended_plan(model: str, tmp_path) -> None:
    rec, _ = run_recommend(validate_request(RecommendRequest, {"model": model, "gpus": "8xH100",
                                                                 "seq_len": 4096}))
    plan = write_recommendation(rec, tmp_path, 0, EmitOptions())[0]
    same_plan(reestimate(tmp_path), plan.estimate)


@pytest.mark.parametrize("extra", [
    {"act_ckpt": "selective", "fused_loss": True},
    {"act_ckpt": "full", "grad_accum": 4, "sync_each_micro_batch": True},
    {"master_weights": False, "act_ckpt": "full"},
    {"compile": True, "optimizer": "adam8bit"},
    {"precision": "fp16", "act_ckpt": "full"},
    {"params": "1.3e9", "act_ckpt": "selective", "micro_batch": 2},
], ids=["selective-fused", "full-accum-sync", "pure-bf16", "compile-adam8bit", "fp16", "inferred"])
@pytest.mark.parametrize("strategy", ["ddp", "fsdp", "zero2", "zero3-offload"])
def test_settings_read_back(strategy: str, extra: dict, tmp_path) -> None:
    if strategy.startswith("zero") and (extra.get("master_weights") is False or
                                        (strategy == "zero3-offload" and "optimizer" in extra)):
        pytest.skip("DeepSpeed keeps fp32 master weights / has no CPU 8-bit Adam (refused elsewhere)")
    data = {"model": "llama-3.2-1b", "gpus": "8xA100", "seq_len": 2048, "micro_batch": 1, **extra}
    if "params" in extra:
        data.pop("model")
    plan = emit_strategy(data, strategy, tmp_path, EmitOptions())[0]
    same_plan(reestimate(tmp_path), plan.estimate)


def test_the_readme_example_fits_as_emitted(tmp_path) -> None:
    """`advisor recommend --params 13e9 --gpus 8xA100 --out DIR`: the emitted files re-estimate to
    the plan, and it fits."""
    rec, _ = run_recommend(validate_request(RecommendRequest, {"params": "13e9", "gpus": "8xA100"}))
    plan = write_recommendation(rec, tmp_path, 0, EmitOptions())[0]
    again = reestimate(tmp_path)
    same_plan(again, plan.estimate)
    assert again.fits and again.memory.per_gpu_bytes.total <= again.memory.usable_bytes


def test_an_edited_file_changes_the_reestimate(tmp_path) -> None:
    plan = emit_strategy({"model": "llama-3.2-1b", "gpus": "8xA100", "micro_batch": 2}, "fsdp",
                         tmp_path, EmitOptions())[0]
    args = json.loads((tmp_path / "training_args.json").read_text())
    args["per_device_train_batch_size"] = 4
    (tmp_path / "training_args.json").write_text(json.dumps(args))
    again = reestimate(tmp_path)
    assert again.workload.micro_batch == 4
    assert again.memory.per_gpu_bytes.activations > plan.estimate.memory.per_gpu_bytes.activations
