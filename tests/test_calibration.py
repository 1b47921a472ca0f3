"""Calibration end to end on the CPU (gloo, tiny sizes), as CI runs it: `advisor calibrate
--quick` produces a complete profile that changes the predictions it should, and `advisor
validate` compares real runs with the model within the stated tolerance. GPU-only checks are
marked `gpu` and skipped without CUDA.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from advisor.core import compute
from advisor.core.context import Context
from advisor.core.estimate import estimate
from advisor.core.layout import ParallelLayout
from advisor.profiles import fit
from advisor.profiles import standin as device
from advisor.profiles.schema import apply_overrides, architecture_of, missing_terms
from advisor.profiles.use import get_profile, list_profiles
from advisor.profiles.validation import CPU_MEMORY_TOLERANCE, Row, priors_pair
from advisor.strategies import get_strategy

QUICK_BUDGET_S = 60  # the bound for `calibrate --quick`; CPU mode takes ~25 s here


def _advisor(*args: str, home: Path, timeout_s: float = 180) -> subprocess.CompletedProcess:
    env = {**os.environ, "ADVISOR_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "advisor.cli.main", *args], env=env, capture_output=True,
                          text=True, timeout=timeout_s)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory) -> dict:
    home = tmp_path_factory.mktemp("advisor-home")
    out = home / "profile.json"
    start = time.perf_counter()
    proc = _advisor("calibrate", "--quick", "--name", "ci-cpu", "--out", str(out), home=home)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {"home": home, "out": out, "elapsed_s": elapsed, "proc": proc}


@pytest.fixture
def profile(calibrated, monkeypatch):
    monkeypatch.setenv("ADVISOR_HOME", str(calibrated["home"]))
    return get_profile("ci-cpu")


@pytest.mark.slow
def test_quick_cpu_calibration_is_complete_stored_and_says_cpu_mode(calibrated, profile):
    assert calibrated["elapsed_s"] < QUICK_BUDGET_S
    said = calibrated["proc"].stdout + calibrated["proc"].stderr
    assert "CPU mode" in said and "[ 92%] fit" in said and "GEMM, layer matmuls" in said
    assert missing_terms(profile) == []
    assert profile.fingerprint.device == "cpu" and profile.catalog_gpu is None  # never auto-matched
    assert json.loads(calibrated["out"].read_text()) == json.loads(profile.model_dump_json())
    assert [s.name for s in list_profiles()] == ["ci-cpu"]
    runs = {r["strategy"] for r in profile.measurements["runs"]["runs"]}
    assert runs == {"ddp", "fsdp", "zero1", "zero2", "zero2-offload", "zero3"}
    assert all(0 < t.value < 1 for t in profile.fit if t.term.startswith("uncertainty."))


def _ctx(profile, priors) -> Context:
    runs = profile.measurements["runs"]
    cluster = device.profile_cluster(None, profile.device_spec, runs["world"], 1)
    return Context(cluster=cluster, model=device.run_model_spec(runs["model"]),
                   workload=device.run_workload(runs), priors=priors,
                   layout=ParallelLayout.shard(cluster.num_gpus))  # compute only: any layout


@pytest.mark.slow
def test_profile_changes_compute_collectives_and_overheads(profile):
    before, after = priors_pair(profile)
    b, a = _ctx(profile, before), _ctx(profile, after)
    assert compute.micro_batch_time(a).forward_s != compute.micro_batch_time(b).forward_s
    # Compute time is FLOPs / (peak * efficiency): with the attention ratio held at the shipped
    # value, the fitted GEMM curve alone scales it by the inverse efficiency ratio.
    arch = architecture_of(profile)
    ratio = before.attention_efficiency[arch]
    a_gemm = _ctx(profile, apply_overrides(after, {"attention_efficiency": {arch: ratio}}, "t"))
    assert compute.dense_efficiency(a_gemm) != compute.dense_efficiency(b)
    assert compute.micro_batch_time(a_gemm).forward_s / compute.micro_batch_time(b).forward_s == \
        pytest.approx(compute.dense_efficiency(b) / compute.dense_efficiency(a_gemm))
    fitted = profile.overrides["attention_efficiency"][arch]
    assert after.attention_efficiency[arch] == fitted != ratio
    assert a.priors.collective.intra_efficiency == profile.overrides["collective"]["intra_efficiency"]
    assert a.priors.collective.intra_latency_s != b.priors.collective.intra_latency_s
    # Memory: CPU mode has no CUDA context, NCCL or allocator, so the overhead term drops to 0
    # and the total by exactly the shipped overhead: context + NCCL (1 tier) + fragmentation.
    eb = estimate(b.cluster, b.model, b.workload, get_strategy("ddp"), before)
    ea = estimate(a.cluster, a.model, a.workload, get_strategy("ddp"), after)
    oh = before.overhead
    subtotal = eb.memory.per_gpu_bytes.total - eb.memory.per_gpu_bytes.overhead
    assert ea.memory.per_gpu_bytes.overhead == 0
    assert eb.memory.per_gpu_bytes.total - ea.memory.per_gpu_bytes.total == pytest.approx(
        oh.cuda_context_bytes + oh.nccl_bytes_per_tier + oh.fragmentation["ddp"] * subtotal)
    # The fitted overlap and uncertainty reach the step time and its range.
    assert ea.time.step_s != eb.time.step_s
    assert (ea.time.high_s - ea.time.low_s) / ea.time.step_s != pytest.approx(
        (eb.time.high_s - eb.time.low_s) / eb.time.step_s)


@pytest.mark.slow
def test_validate_on_cpu_memory_within_tolerance_and_calibration_helps(calibrated, tmp_path):
    md, html = tmp_path / "report.md", tmp_path / "report.html"
    proc = _advisor("validate", "--profile", "ci-cpu", "--strategies", "ddp,fsdp,zero2,zero3",
                    "--report", str(md), "--report", str(html), "--json", home=calibrated["home"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    rows = [Row(**r) for r in result["rows"]]
    assert [r.strategy for r in rows] == ["ddp", "fsdp", "zero2", "zero3"]
    for r in rows:  # tracked bytes: params, grads, optimizer, activations, logits
        assert abs(Row.error(r.memory_after_bytes, r.measured_memory_bytes)) <= CPU_MEMORY_TOLERANCE, r
    before = statistics.median(abs(Row.error(r.step_before_s, r.measured_step_s)) for r in rows)
    after = statistics.median(abs(Row.error(r.step_after_s, r.measured_step_s)) for r in rows)
    assert after < before
    assert "| zero3 |" in md.read_text()
    assert html.read_text().startswith("<!doctype html>") and "<td>fsdp</td>" in html.read_text()


def test_alpha_beta_recovers_latency_and_bandwidth():
    sizes = [2.0**k for k in range(12, 31, 3)]
    alpha, beta = fit.alpha_beta(sizes, [5e-5 + x / 2e11 for x in sizes])  # 50 us, 200 GB/s
    assert alpha == pytest.approx(5e-5, rel=1e-9)
    assert 1 / beta == pytest.approx(2e11, rel=1e-9)


@pytest.mark.parametrize(("name", "memory_gib", "expected"), [
    ("NVIDIA H200", 140.4, "H200"),
    ("NVIDIA H100 80GB HBM3", 79.6, "H100-80GB"),
    ("NVIDIA A100-SXM4-40GB", 39.4, "A100-40GB"),
    ("NVIDIA A100-SXM4-80GB", 79.2, "A100-80GB"),
    ("NVIDIA GeForce GTX 1080", 8.0, None),
])
def test_catalog_gpu_for_torch_device_names(name, memory_gib, expected):
    assert device.catalog_gpu_for(name, memory_gib * 2**30) == expected


def test_run_model_spec_is_tiny_llamas_own():
    pytest.importorskip("torch")
    from dataclasses import asdict

    from calibration.tiny_llama import TinyLlamaConfig, model_spec

    cfg = TinyLlamaConfig()
    ours, theirs = device.run_model_spec(asdict(cfg)), model_spec(cfg)
    assert ours.model_dump(exclude={"name", "source"}) == theirs.model_dump(exclude={"name", "source"})


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")
def test_quick_gpu_calibration_matches_the_catalog_and_validates(tmp_path, monkeypatch):
    proc = _advisor("calibrate", "--quick", "--name", "gpu-quick", home=tmp_path, timeout_s=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path))
    profile = get_profile("gpu-quick")
    assert profile.catalog_gpu is not None
    gemm = next(t for t in profile.fit if t.term.startswith("gemm_efficiency."))
    assert all(0 < y <= 1 for y in gemm.value)
    proc = _advisor("validate", "--profile", "gpu-quick", "--strategies", "ddp,fsdp,zero2,zero3",
                    "--json", home=tmp_path, timeout_s=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [Row(**r) for r in json.loads(proc.stdout)["rows"]]
    assert all(abs(Row.error(r.memory_after_bytes, r.measured_memory_bytes)) < 0.25 for r in rows)
