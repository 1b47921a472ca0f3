"""The documented Python API (advisor/__init__.py): the same requests and results as the CLI."""

from __future__ import annotations

import json

import pytest
import yaml

import advisor
from advisor.core.errors import InvalidInput
from advisor.core.results import Estimate, InfeasiblePlan
from advisor.core.schemas import to_json
from tests.test_cli import cli_json


def test_estimate_matches_the_cli():
    job = {"params": 13e9, "gpus": "8xA100", "strategy": "fsdp", "micro_batch": 2, "act_ckpt": "selective",
           "profile": "none"}
    est = advisor.estimate(job)
    assert isinstance(est, Estimate) and est.fits
    cli = cli_json("estimate", "--params", "13e9", "--gpus", "8xA100", "--strategy", "fsdp", "--micro-batch",
                   "2", "--act-ckpt", "selective", "--profile", "none")
    assert json.loads(to_json(est)) == cli


def test_bad_input_raises_invalid_input_naming_the_field():
    with pytest.raises(InvalidInput) as exc:
        advisor.estimate({"params": 13e9, "gpus": "8xA100", "seq_len": 0})
    assert exc.value.field == "seq_len" and exc.value.allowed == "> 0 and <= 1048576"


def test_an_infeasible_strategy_is_its_own_type():
    plan = advisor.estimate({"params": 7e9, "gpus": "8xA100", "strategy": "hsdp"})
    assert isinstance(plan, InfeasiblePlan) and "2 nodes" in plan.reason


def test_recommend_and_emit(tmp_path):
    rec = advisor.recommend({"params": 13e9, "gpus": "8xA100", "profile": "none"})
    assert rec.chosen == "fsdp"
    folders = advisor.emit(rec, tmp_path / "plan", alternatives=1)
    assert folders == [tmp_path / "plan", tmp_path / "plan" / "alternatives" / "2-zero3"]
    config = yaml.safe_load((tmp_path / "plan" / "accelerate_config.yaml").read_text())
    assert config["distributed_type"] == "FSDP" and config["num_processes"] == 8
    one = advisor.estimate({"params": 7e9, "gpus": "8xA100", "strategy": "zero2", "profile": "none"})
    assert advisor.emit(one, tmp_path / "zero2") == [tmp_path / "zero2"]
    assert json.loads((tmp_path / "zero2" / "ds_config.json").read_text())["zero_optimization"]["stage"] == 2
