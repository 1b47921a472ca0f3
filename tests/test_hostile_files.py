"""Hostile strings through every user field that reaches an emitted file (issue: no injection).

The fields: the model's name (config.json `_name_or_path`, shown in every file), the NVMe path
(ds_config.json), a stored profile's strings (its GPU name reaches PLAN.md's notes) and the
--out folder (accelerate_config.yaml's deepspeed_config_file). Text with control characters is
refused where it enters, naming the field; printable text with shell, YAML and Markdown syntax
is accepted and must come out quoted: `bash -n` passes, running launch.sh (with a stand-in
`accelerate` on PATH that records its arguments) runs nothing injected, `yaml.safe_load` and
Accelerate's own loader read the intended structure, and PLAN.md shows the text escaped.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from advisor.core.errors import InvalidInput
from advisor.core.text import markdown
from advisor.emitters.choices import EmitOptions
from advisor.emitters.files import emit_strategy
from advisor.profiles import schema as profile_schema
from advisor.profiles import use as profiles
from tests.test_profiles import synthetic

CONFIG = json.loads((Path(__file__).parent / "data" / "hf_configs" / "llama-3-8b.json").read_text())
PRINTABLE = [
    "$(touch PWNED)", "`touch PWNED`", "'; touch PWNED; '", '"; touch PWNED; "', "x && touch PWNED #",
    "<script>alert(1)</script> | *b* [l](http://e) ~~s~~ &amp; \\", "key: value # not a comment",
    "{{ 7 * 7 }} {% raw %}", "-- --config_file /etc/passwd", "模型 ünïcødé",
]
CONTROL = ["x\ntouch PWNED\n#", "x\r\ntouch PWNED", "x\x1b[31mred", "x\u2028touch PWNED",
           "x\x00y", "\u202eevil", "x\ty", "x" * 129]
FAKE_ACCELERATE = '#!/bin/sh\nprintf "%s\\n" "$@" > "$ARGS_OUT"\n'


def _emit(tmp_path: Path, name: str, strategy: str = "zero3", **data) -> Path:
    out = tmp_path / "plan"
    job = {"hf_config": {**CONFIG, "_name_or_path": name}, "gpus": "8xA100", "micro_batch": 1,
           "act_ckpt": "full", **data}
    emit_strategy(job, strategy, out, EmitOptions(nvme_path="/mnt/nvme_0/ds-swap"))
    return out


def _run_launch(plan: Path, tmp_path: Path) -> list[str]:
    """launch.sh with a stand-in `accelerate` that records its arguments; returns them."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "accelerate").write_text(FAKE_ACCELERATE)
    (bin_dir / "accelerate").chmod(0o755)
    args_out = tmp_path / "args.txt"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "ARGS_OUT": str(args_out),
           "NODE_RANK": "0", "MAIN_PROCESS_IP": "127.0.0.1"}
    proc = subprocess.run(["bash", str(plan / "launch.sh"), "train.py", "--lr", "1e-4"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return args_out.read_text().splitlines()


def _no_pwned(root: Path) -> None:
    assert not list(root.rglob("PWNED")), "an injected command ran"


@pytest.mark.parametrize("name", PRINTABLE)
def test_printable_hostile_model_name_is_quoted_in_every_file(tmp_path, name):
    plan = _emit(tmp_path, name)
    files = {p.name: p.read_text() for p in plan.iterdir() if p.is_file()}
    assert subprocess.run(["bash", "-n", str(plan / "launch.sh")]).returncode == 0
    args = _run_launch(plan, tmp_path)
    _no_pwned(tmp_path)
    assert args[:3] == ["launch", "--config_file", str(plan / "accelerate_config.yaml")]
    assert args[-3:] == ["train.py", "--lr", "1e-4"]
    # YAML: the same keys as for a plain name, the values intact
    config = yaml.safe_load(files["accelerate_config.yaml"])
    assert set(config) >= {"distributed_type", "deepspeed_config", "num_processes"}
    assert config["deepspeed_config"]["deepspeed_config_file"] == str(plan / "ds_config.json")
    from accelerate.commands.config.config_args import load_config_from_file

    assert load_config_from_file(str(plan / "accelerate_config.yaml")).num_processes == 8
    assert json.loads(files["ds_config.json"])["train_micro_batch_size_per_gpu"] == 1
    # Markdown: escaped where it is shown, never raw HTML or a broken table
    text = files["PLAN.md"]
    assert f"**Model**: {markdown(name)}," in text
    assert "<script>" not in text
    assert sum(line.startswith("# ") for line in text.splitlines()) == 1
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert all(line.rstrip().endswith("|") for line in rows)


@pytest.mark.parametrize("name", CONTROL, ids=[repr(c)[:20] for c in CONTROL])
def test_control_characters_in_the_model_name_are_refused_naming_the_field(tmp_path, name):
    with pytest.raises(InvalidInput) as exc:
        _emit(tmp_path, name)
    assert exc.value.field == "hf_config._name_or_path"
    assert not (tmp_path / "plan").exists()


@pytest.mark.parametrize("path", ["relative/dir", "/mnt/nvme 0", "/mnt/$(touch PWNED)", "/a\nb", "/a`b`",
                                  "/a;b", "/a'b", "/" + "a" * 1100])
def test_nvme_path_is_an_absolute_path_of_safe_characters(path):
    with pytest.raises(InvalidInput) as exc:
        EmitOptions(nvme_path=path)
    assert exc.value.field == "nvme_path"


def test_nvme_path_reaches_ds_config_through_json(tmp_path):
    plan = _emit(tmp_path, "plain", strategy="zero3-nvme", gpus="8xA100-40GB")
    ds = json.loads((plan / "ds_config.json").read_text())
    assert ds["zero_optimization"]["offload_param"]["nvme_path"] == "/mnt/nvme_0/ds-swap"


def test_profile_strings_are_validated_and_escaped_in_plan_md(tmp_path, monkeypatch):
    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path / "home"))
    base = json.loads(profile_schema.seal(synthetic()).model_dump_json())
    for field, value in (("gpu_name", "NVIDIA H200\ntouch PWNED"), ("torch", "2.13\x1b[2J")):
        data = json.loads(json.dumps(base))
        data["fingerprint"][field] = value
        with pytest.raises(InvalidInput) as exc:
            profiles.parse_profile(data, require_checksum=False)
        assert exc.value.field == f"fingerprint.{field}"
    hostile = "NVIDIA H200 <b>|x|</b> $(touch PWNED) [a](b)"
    profiles.save_profile(synthetic().model_copy(update={"fingerprint": synthetic().fingerprint.model_copy(
        update={"gpu_name": hostile})}))
    plan = tmp_path / "plan"
    emit_strategy({"model": "llama-3-8b", "gpus": "8xH200"}, "fsdp", plan, EmitOptions())
    text = (plan / "PLAN.md").read_text()
    assert markdown(hostile) in text and "<b>" not in text
    _run_launch(plan, tmp_path)
    _no_pwned(tmp_path)


@pytest.mark.parametrize("out", ["", "plan\n", "pl\x1ban"])
def test_out_folder_with_control_characters_is_refused(tmp_path, out):
    with pytest.raises(InvalidInput) as exc:
        emit_strategy({"params": 1e9, "gpus": "8xA100"}, "fsdp", str(tmp_path / out) if out else out,
                      EmitOptions())
    assert exc.value.field == "out"


def test_out_folder_with_shell_syntax_is_written_and_quoted(tmp_path):
    out = tmp_path / "$(touch PWNED) 'q' `x`"
    emit_strategy({"params": 1e9, "gpus": "2x8xA100"}, "zero2", out, EmitOptions())
    config = yaml.safe_load((out / "accelerate_config.yaml").read_text())
    assert config["deepspeed_config"]["deepspeed_config_file"] == str(out / "ds_config.json")
    args = _run_launch(out, tmp_path)
    assert args[1:3] == ["--config_file", str(out / "accelerate_config.yaml")]
    _no_pwned(tmp_path)
