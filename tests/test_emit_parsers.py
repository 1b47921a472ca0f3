"""Every emitted file is read by Accelerate's and DeepSpeed's own code, as their launchers read it,
for every strategy x {1 node, 2 nodes} x {FSDP2, FSDP1} x {bf16, fp16}; and each check is shown to
fail on a broken file. The checkers live in tests/e2e/checks.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from advisor.core.engines import DeepSpeedBuckets, FsdpConfig, ZeroConfig
from advisor.core.model import infer_from_params
from advisor.emitters.choices import EmitOptions
from advisor.emitters.files import emit_strategy
from advisor.strategies import FSDP_NAMES, STRATEGY_NAMES, get_strategy

pytest.importorskip("accelerate")
pytest.importorskip("deepspeed")
from tests.e2e.checks import build_plugins, check_ds_config, launcher_env, unknown_section_keys  # noqa: E402

PARAMS = 1e9  # small enough that every strategy fits on 8 x A100-80GB at seq 2048
JOB = {"params": PARAMS, "seq_len": 2048}
CLUSTERS = {"1 node": "8xA100", "2 nodes": "2x8xA100"}


def _cases():
    for name in STRATEGY_NAMES:
        family = get_strategy(name).family
        for nodes, gpus in CLUSTERS.items():
            if name == "hsdp" and nodes == "1 node":
                continue  # cannot run on one node: see test_emit.py for the error
            versions = (2, 1) if family == "fsdp" else (2,)
            for version in versions:
                yield pytest.param(name, gpus, version, "bf16", id=f"{name}-{nodes}-fsdp{version}"
                                   if family == "fsdp" else f"{name}-{nodes}")
    for name in ("ddp", "zero2", "zero3-offload", "fsdp"):  # V100: no bf16, so fp16 loss scaling
        yield pytest.param(name, "8xV100-32GB", 2, "fp16", id=f"{name}-fp16")


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    """Emit every case once; returns case id -> (plan folder, estimate)."""
    root = tmp_path_factory.mktemp("plans")
    cache = {}

    def get(name, gpus, version, precision):
        key = (name, gpus, version, precision)
        if key not in cache:
            out = root / "-".join(map(str, key))
            data = {**JOB, "gpus": gpus, "precision": precision}
            if name in FSDP_NAMES:  # the version applies to FSDP plans only (refused elsewhere)
                data["fsdp_version"] = version
            plan = emit_strategy(data, name, out, EmitOptions(nvme_path="/local_nvme"))[0]
            cache[key] = out, plan.estimate
        return cache[key]
    return get


@pytest.mark.parametrize(("name", "gpus", "version", "precision"), list(_cases()))
def test_accelerate_and_deepspeed_accept_the_plan(plans, name, gpus, version, precision):
    from accelerate.commands.config.config_args import load_config_from_file

    out, est = plans(name, gpus, version, precision)
    yaml_path = out / "accelerate_config.yaml"
    config = load_config_from_file(str(yaml_path))
    assert config.num_processes == est.cluster.num_gpus
    assert config.num_machines == est.cluster.nodes
    assert unknown_section_keys(yaml_path) == []
    built = build_plugins(yaml_path)
    world = est.cluster.num_gpus
    cfg = est.engine_config  # what the strategy asked the engine for: the files must say it
    if isinstance(cfg, ZeroConfig):
        ds = built.deepspeed
        assert ds.zero_stage == cfg.stage
        assert ds.offload_optimizer_device == (cfg.offload_optimizer or "none")
        assert ds.offload_param_device == (cfg.offload_params or "none")
        assert ds.deepspeed_config[precision]["enabled"] is True
        # what DeepSpeed receives after Accelerate's processing, and the file itself
        check_ds_config(ds.deepspeed_config, world)
        parsed = check_ds_config(out / "ds_config.json", world)
        assert parsed.zero_optimization_stage == cfg.stage
    elif isinstance(cfg, FsdpConfig):
        f = built.fsdp
        assert f.fsdp_version == version == cfg.version
        if version == 2:
            assert f.reshard_after_forward is cfg.reshard_after_forward
            assert type(f.cpu_offload).__name__ == ("CPUOffloadPolicy" if cfg.cpu_offload
                                                    else "OffloadPolicy")
        else:
            assert f.sharding_strategy.name == cfg.sharding
            assert f.cpu_offload.offload_params is cfg.cpu_offload
        assert f.transformer_cls_names_to_wrap == ["LlamaDecoderLayer"]
        assert f.state_dict_type.name == "SHARDED_STATE_DICT"
        assert f.cpu_ram_efficient_loading is True
        assert f.activation_checkpointing is (est.workload.act_ckpt == "full")
        assert str(f.mixed_precision_policy.param_dtype) == {"bf16": "torch.bfloat16",
                                                              "fp16": "torch.float16"}[precision]
        if cfg.sharding == "HYBRID_SHARD" and version == 2:
            p = built.parallelism
            assert (p.dp_replicate_size, p.dp_shard_size) == (cfg.replicas, cfg.shard_size)
            assert (cfg.replicas, cfg.shard_size) == (est.cluster.nodes, est.cluster.gpus_per_node)
            assert p.total_size == world
    else:
        assert built.args.multi_gpu is True
        assert built.env["ACCELERATE_MIXED_PRECISION"] == precision


@pytest.mark.parametrize("name", ["zero3-offload", "fsdp", "ddp"])
def test_launch_sh_gives_the_launcher_the_per_node_flags(plans, tmp_path, name):
    """Run launch.sh on 'node 1' with a stand-in `accelerate` that records its arguments, then hand
    them to Accelerate's launcher: torchrun gets 2 nodes x 8 processes, node rank 1, node 0's address."""
    out, _ = plans(name, "2x8xA100", 2, "bf16")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "args.json"
    stub = bin_dir / "accelerate"
    stub.write_text("#!/usr/bin/env python3\nimport json, sys\n"
                    f"json.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n")
    stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "NODE_RANK": "1",
           "MAIN_PROCESS_IP": "10.1.2.3"}
    subprocess.run(["bash", str(out / "launch.sh"), "train.py", "--lr", "1e-4"], env=env, check=True)
    argv = json.loads(record.read_text())
    assert argv[0] == "launch" and argv[-3:] == ["train.py", "--lr", "1e-4"]
    args, launch_env = launcher_env(argv[argv.index("--config_file") + 1], tuple(argv[3:-3]))
    assert (args.nnodes, args.nproc_per_node, args.node_rank) == ("2", "8", 1)
    assert (args.rdzv_backend, args.rdzv_endpoint) == ("static", "10.1.2.3:29500")
    if name == "zero3-offload":
        assert launch_env["ACCELERATE_DEEPSPEED_CONFIG_FILE"] == str(out / "ds_config.json")


def test_launch_scripts_are_valid_bash(plans):
    for case in _cases():
        out, _ = plans(*case.values)
        subprocess.run(["bash", "-n", str(out / "launch.sh")], check=True)


def test_emitted_buckets_are_the_ones_the_estimate_counts(plans):
    out, _ = plans("zero3", "8xA100", 2, "bf16")
    z = json.loads((out / "ds_config.json").read_text())["zero_optimization"]
    b = DeepSpeedBuckets.for_model(infer_from_params(PARAMS))
    assert z["reduce_bucket_size"] == b.reduce_bucket_size
    assert z["stage3_prefetch_bucket_size"] == b.stage3_prefetch_bucket_size
    assert z["stage3_param_persistence_threshold"] == b.stage3_param_persistence_threshold
    assert z["stage3_max_live_parameters"] == b.stage3_max_live_parameters
    out, _ = plans("zero2", "8xA100", 2, "bf16")
    z = json.loads((out / "ds_config.json").read_text())["zero_optimization"]
    assert (z["reduce_bucket_size"], z["allgather_bucket_size"]) == (b.reduce_bucket_size,
                                                                     b.allgather_bucket_size)


# --- Each check can fail -------------------------------------------------------------------------

def _edit_yaml(src: Path, dst: Path, change) -> Path:
    data = yaml.safe_load((src / "accelerate_config.yaml").read_text())
    change(data)
    dst.write_text(yaml.safe_dump(data))
    return dst


def test_a_typo_inside_fsdp_config_passes_accelerates_loader_but_not_the_key_check(plans, tmp_path):
    from accelerate.commands.config.config_args import load_config_from_file

    out, _ = plans("fsdp", "8xA100", 2, "bf16")
    bad = _edit_yaml(out, tmp_path / "a.yaml", lambda d: d["fsdp_config"].update(
        fsdp_sharding_stratgy="FULL_SHARD"))
    load_config_from_file(str(bad))  # Accelerate's own loader says nothing
    build_plugins(bad)  # nor does the launcher: the key is silently dropped
    assert unknown_section_keys(bad) == ["fsdp_config.fsdp_sharding_stratgy"]


@pytest.mark.parametrize(("name", "change", "match"), [
    ("fsdp", lambda d: d["fsdp_config"].update(fsdp_reshard_after_forward="maybe"), "truth value"),
    ("fsdp", lambda d: d["fsdp_config"].update(fsdp_auto_wrap_policy="LAYER_WRAP"), "auto wrap"),
    ("fsdp", lambda d: d["fsdp_config"].update(fsdp_state_dict_type="LOCAL_STATE_DICT"), "LOCAL"),
    # a second source of DeepSpeed settings beside deepspeed_config_file
    ("zero3", lambda d: d["deepspeed_config"].update(zero_stage=7), "deepspeed_config_file"),
    ("zero3", lambda d: d.update(mixed_precision="bf16"), "deepspeed_config_file"),
    ("ddp", lambda d: d.update(distributed_typ="MULTI_GPU"), "unknown keys"),
])
def test_the_launcher_path_rejects_broken_yaml(plans, tmp_path, name, change, match):
    out, _ = plans(name, "8xA100", 2, "bf16")
    bad = _edit_yaml(out, tmp_path / "bad.yaml", change)
    with pytest.raises(ValueError, match=match):
        build_plugins(bad)


@pytest.mark.parametrize(("change", "match"), [
    (lambda c: c["zero_optimization"].update(stage=7), "stage"),
    (lambda c: c["zero_optimization"].update(overlap_com=True), "overlap_com"),
    (lambda c: c["zero_optimization"]["offload_param"].update(devic="cpu"), "devic"),
    (lambda c: c["bf16"].update(enabeld=True), "enabeld"),
    (lambda c: c.update(gradient_clippin=1.0), "gradient_clippin"),
    (lambda c: c.update(train_batch_size=c["train_batch_size"] - 1), "train_batch_size"),
])
def test_deepspeed_checks_reject_broken_json(plans, change, match):
    out, est = plans("zero3-offload", "2x8xA100", 2, "bf16")
    config = json.loads((out / "ds_config.json").read_text())
    check_ds_config(config, est.cluster.num_gpus)
    change(config)
    with pytest.raises(Exception, match=match):
        check_ds_config(config, est.cluster.num_gpus)


def test_deepspeed_check_really_uses_the_target_world_size(plans):
    out, est = plans("zero2", "2x8xA100", 2, "bf16")
    check_ds_config(out / "ds_config.json", 16)
    with pytest.raises(AssertionError, match="train_batch_size"):
        check_ds_config(out / "ds_config.json", 8)  # 16 GPUs' batch arithmetic at 8 ranks


@pytest.mark.parametrize("name", ["ddp", "fsdp"])
def test_pure_bf16_plans_turn_mixed_precision_off_and_say_how_to_load_the_model(tmp_path, name):
    """Without master weights the plan is mixed_precision: no with the model loaded in bf16;
    Accelerate's loader reads it that way and builds no mixed-precision policy."""
    from accelerate.commands.config.config_args import load_config_from_file

    data = {**JOB, "gpus": "8xA100", "master_weights": False}
    plan = emit_strategy(data, name, tmp_path, EmitOptions())[0]
    assert plan.estimate.workload.master_weights is False
    config = load_config_from_file(str(tmp_path / "accelerate_config.yaml"))
    assert config.mixed_precision == "no"
    built = build_plugins(tmp_path / "accelerate_config.yaml")
    if name == "fsdp":
        assert built.fsdp.mixed_precision_policy is None
    else:
        assert built.env["ACCELERATE_MIXED_PRECISION"] == "no"
    assert "dtype=torch.bfloat16" in (tmp_path / "PLAN.md").read_text()


def test_pure_bf16_deepspeed_plan_is_refused_naming_the_field(tmp_path):
    from advisor.core.errors import InvalidInput

    with pytest.raises(InvalidInput) as exc:
        emit_strategy({**JOB, "gpus": "8xA100", "master_weights": False}, "zero3", tmp_path, EmitOptions())
    assert exc.value.field == "strategy" and "fp32 master" in str(exc.value)
    assert not any(tmp_path.iterdir())
