"""`advisor emit` and `recommend --out`: what the files hold, the errors, and the all-or-nothing
write. Accelerate's and DeepSpeed's own parsers are in test_emit_parsers.py, the golden files in
test_emit_golden.py, real training in test_emit_e2e.py."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from advisor.cli.main import main
from advisor.core.engines import NVME_PARAM_BUFFER_COUNT, nvme_param_buffer_elements
from advisor.core.errors import InvalidInput
from advisor.core.model import preset
from advisor.emitters import files as emit
from advisor.emitters.choices import EmitOptions, plain, reasons
from advisor.emitters.files import PLAN_MARKER, emit_strategy, write_recommendation

REPO = Path(__file__).resolve().parents[1]
SMALL = {"params": 1e9, "seq_len": 2048}


def test_yaml_holds_exactly_the_plan_and_a_reason_above_each_decided_value(tmp_path):
    plan = emit_strategy({**SMALL, "gpus": "2x8xA100"}, "hsdp", tmp_path / "p", EmitOptions())[0]
    text = (tmp_path / "p" / "accelerate_config.yaml").read_text()
    assert yaml.safe_load(text) == plain(plan.accelerate)
    lines = text.splitlines()
    for path, _value, why in reasons(plan.accelerate):
        assert "\n" not in why
        key = path.rsplit(".", 1)[-1]
        at = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{key}:"))
        assert lines[at - 1].strip() == f"# {why}", path


def test_batch_arithmetic_is_micro_x_accum_x_world(tmp_path):
    plan = emit_strategy({"model": "llama-3-8b", "gpus": "2x8xH100", "micro_batch": 4},
                         "zero3-offload", tmp_path / "p", EmitOptions())[0]
    ds = json.loads((tmp_path / "p" / "ds_config.json").read_text())
    assert plan.estimate.workload.act_ckpt == "full"  # the search's choice: none does not fit at mb 4
    # 4 sequences x 1 accumulation step x 16 GPUs
    assert (ds["train_micro_batch_size_per_gpu"], ds["gradient_accumulation_steps"]) == (4, 1)
    assert ds["train_batch_size"] == 64


def test_a_global_batch_sets_the_accumulation(tmp_path):
    # 4M tokens = 4,194,304 = micro 2 x 4096 tokens x 8 GPUs x 64 steps
    emit_strategy({"model": "llama-3-8b", "gpus": "8xA100", "micro_batch": 2,
                   "global_batch_tokens": "4M"}, "zero3", tmp_path / "p", EmitOptions())
    ds = json.loads((tmp_path / "p" / "ds_config.json").read_text())
    assert (ds["train_micro_batch_size_per_gpu"], ds["gradient_accumulation_steps"]) == (2, 64)
    assert ds["train_batch_size"] * 4096 == 4 * 2**20


def test_nvme_path_lives_in_the_json_and_swap_buffers_hold_the_largest_partition(tmp_path):
    emit_strategy({"model": "llama-3-70b", "gpus": "8xA100-40GB"}, "zero3-nvme", tmp_path / "p",
                  EmitOptions(nvme_path="/local_nvme"))
    ds = json.loads((tmp_path / "p" / "ds_config.json").read_text())["zero_optimization"]
    assert ds["offload_optimizer"]["nvme_path"] == ds["offload_param"]["nvme_path"] == "/local_nvme"
    # Accelerate's launcher drops offload_*_nvme_path from the YAML, so the YAML has none
    text = (tmp_path / "p" / "accelerate_config.yaml").read_text()
    assert "/local_nvme" not in text
    assert not any("nvme" in key for key in yaml.safe_load(text)["deepspeed_config"])
    # embedding 128256 x 8192 = 1,050,673,152 elements / 8 GPUs = 131,334,144 per partition:
    # above DeepSpeed's 1e8 default, which would fail its numel <= buffer assertion
    assert ds["offload_param"]["buffer_size"] == 132_000_000 > math.ceil(128256 * 8192 / 8)


@pytest.mark.parametrize(("model", "gpus", "size"), [
    ("llama-2-7b", "8xA100", 100_000_000),  # DeepSpeed's default suffices
    ("llama-3-70b", "8xA100-40GB", 132_000_000),  # raised to the 131.3M-element partition
])
def test_the_swap_buffers_are_the_ones_the_estimate_counts(tmp_path, model, gpus, size):
    emit_strategy({"model": model, "gpus": gpus}, "zero3-nvme", tmp_path / "p", EmitOptions("/nvme"))
    p = json.loads((tmp_path / "p" / "ds_config.json").read_text())["zero_optimization"]["offload_param"]
    assert (p["buffer_count"], p["buffer_size"]) == (5, size)
    # zero.py's host-memory estimate uses the same count and size
    assert (NVME_PARAM_BUFFER_COUNT, nvme_param_buffer_elements(preset(model), 8)) == (5, size)


@pytest.mark.parametrize(("model", "layer_class"), [("qwen2.5-7b", "Qwen2DecoderLayer"),
                                                    ("mistral-7b", "MistralDecoderLayer")])
def test_fsdp_wraps_the_models_own_decoder_layer(tmp_path, model, layer_class):
    emit_strategy({"model": model, "gpus": "2x8xH100"}, "fsdp", tmp_path / "p", EmitOptions())
    cfg = yaml.safe_load((tmp_path / "p" / "accelerate_config.yaml").read_text())
    assert cfg["fsdp_config"]["fsdp_transformer_layer_cls_to_wrap"] == layer_class == \
        preset(model).decoder_layer_class


def test_one_gpu_ddp_is_not_multi_gpu(tmp_path):
    emit_strategy({**SMALL, "gpus": "1xA100"}, "ddp", tmp_path / "p", EmitOptions())
    cfg = yaml.safe_load((tmp_path / "p" / "accelerate_config.yaml").read_text())
    assert (cfg["distributed_type"], cfg["num_processes"]) == ("NO", 1)


@pytest.mark.parametrize(("data", "strategy", "options", "field", "words"), [
    ({**SMALL, "gpus": "8xA100"}, "hsdp", EmitOptions(), "strategy", "2 nodes"),
    ({**SMALL, "gpus": "8xA100"}, "zero3-nvme", EmitOptions(), "nvme_path", "NVMe"),
    ({**SMALL, "gpus": "8xA100"}, "zero4", EmitOptions(), "strategy", "unknown"),
    ({"model": "llama-3-70b", "gpus": "8xA100"}, "ddp", EmitOptions(), "strategy", "does not fit"),
    ({**SMALL, "gpus": "8xH100", "precision": "fp8"}, "fsdp", EmitOptions(), "precision", "fp8"),
])
def test_bad_input_names_the_field_and_writes_nothing(tmp_path, data, strategy, options, field, words):
    with pytest.raises(InvalidInput) as err:
        emit_strategy(data, strategy, tmp_path / "p", options)
    assert err.value.field == field and words in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_cli_error_is_one_line_and_leaves_no_folder(tmp_path):
    out = tmp_path / "plan"
    proc = subprocess.run([sys.executable, "-m", "advisor.cli.main", "emit", "--params", "1e9", "--gpus",
                           "8xA100", "--strategy", "hsdp", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("advisor: error: strategy: hsdp")
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_folder_with_other_files_is_left_alone(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InvalidInput) as err:
        emit_strategy({**SMALL, "gpus": "8xA100"}, "fsdp", tmp_path, EmitOptions())
    assert err.value.field == "out"
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_an_earlier_plan_is_replaced_whole(tmp_path):
    out = tmp_path / "plan"
    emit_strategy({**SMALL, "gpus": "8xA100"}, "zero3", out, EmitOptions())
    assert (out / "ds_config.json").exists()
    emit_strategy({**SMALL, "gpus": "8xA100"}, "fsdp", out, EmitOptions())
    assert sorted(p.name for p in out.iterdir()) == [
        "PLAN.md", "accelerate_config.yaml", "advisor_ac.py", "launch.sh", "model_config.json",
        "plan.json", "training_args.json"]
    assert (out / "PLAN.md").read_text().startswith(PLAN_MARKER)
    assert [p.name for p in tmp_path.iterdir()] == ["plan"]  # no temporary folders left


def test_a_failure_while_writing_keeps_the_old_plan_and_leaves_no_debris(tmp_path, monkeypatch):
    out = tmp_path / "plan"
    emit_strategy({**SMALL, "gpus": "8xA100"}, "zero3", out, EmitOptions())
    before = {p.name: p.read_text() for p in out.iterdir()}
    real_write = Path.write_text

    def fail_on_plan(self, text, *args, **kwargs):
        if self.name == "launch.sh":
            raise OSError("disk full")
        return real_write(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", fail_on_plan)
    with pytest.raises(InvalidInput, match="out: cannot write .*: disk full") as exc:  # one line
        emit_strategy({**SMALL, "gpus": "8xA100"}, "fsdp", out, EmitOptions())
    assert exc.value.field == "out"
    monkeypatch.undo()
    assert {p.name: p.read_text() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["plan"]


def test_templates_refuse_undefined_values():
    import jinja2

    with pytest.raises(jinja2.UndefinedError):
        emit.environment().get_template("launch.sh.j2").render(title="x")


def test_recommend_out_writes_the_chosen_plan_and_the_runners_up(tmp_path, capsys):
    out = tmp_path / "plan"
    assert main(["recommend", "--params", "13e9", "--gpus", "8xA100", "--out", str(out),
                 "--alternatives", "2", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    fitting = [e["strategy"] for e in rec["estimates"] if e["fits"]]
    alts = sorted(p.name for p in (out / "alternatives").iterdir())
    assert alts == [f"2-{fitting[1]}", f"3-{fitting[2]}"]
    for folder in [out, *(out / "alternatives").iterdir()]:
        assert {"accelerate_config.yaml", "launch.sh", "PLAN.md"} <= {p.name for p in folder.iterdir()}
    top = (out / "PLAN.md").read_text()
    assert f"# Training plan: {rec['chosen']} for" in top
    assert f"(alternatives/2-{fitting[1]}/PLAN.md)" in top


def test_alternatives_need_out(capsys):
    assert main(["recommend", "--params", "1e9", "--gpus", "8xA100", "--alternatives", "1"]) == 2
    assert "alternatives: needs --out" in capsys.readouterr().err


def test_recommend_with_nothing_fitting_writes_nothing(tmp_path):
    from advisor.core.errors import Infeasible
    from advisor.core.results import Recommendation

    rec = Recommendation(chosen=None, summary=["Nothing fits."], rule_of_thumb="", estimates=[],
                         cluster=None, model=None, candidates_evaluated=0, infeasible_candidates=0)
    with pytest.raises(Infeasible):
        write_recommendation(rec, tmp_path / "p", 0, EmitOptions())
    assert list(tmp_path.iterdir()) == []
