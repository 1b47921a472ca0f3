"""The real `advisor` command, end to end, in a subprocess: exit codes, JSON values and the
one-line error contract (exit 2, `advisor: error: <field>: ...` on stderr, no traceback).

Each expensive command runs once per module (module-scoped fixtures); a CLI call is ~0.2-0.5 s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HF_CONFIGS = REPO / "tests" / "data" / "hf_configs"

ALL_STRATEGIES = {"ddp", "zero1", "zero2", "zero3", "zero2-offload", "zero3-offload", "zero3-nvme",
                  "fsdp", "fsdp-grad-op", "hsdp", "fsdp-offload"}
MEMORY_COMPONENTS = ("params", "grads", "optimizer", "activations", "logits", "buffers", "overhead")
# Llama-3-8B: untied embedding + head 2 x 128256 x 4096 = 1,050,673,152; per layer q,o 2 x 4096^2
# + k,v 2 x 4096 x 1024 + gated MLP 3 x 4096 x 14336 + 2 norms x 4096 = 218,112,000; x 32 layers
# = 6,979,584,000; + final norm 4096 -> 8,030,261,248.
LLAMA_3_8B_PARAMS = 8_030_261_248


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Run `advisor ARGS` as a user would (a fresh interpreter, output piped)."""
    return subprocess.run([sys.executable, "-m", "advisor.cli.main", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def cli_ok(*args: str) -> str:
    proc = cli(*args)
    assert proc.returncode == 0, f"advisor {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    return proc.stdout


def cli_json(*args: str):
    return json.loads(cli_ok(*args, "--json"))


# ---- commands of the issue, run once each ------------------------------------------------------

REC_13B = ("recommend", "--params", "13e9", "--gpus", "8xA100")
REC_8B_2NODES = ("recommend", "--model", "llama-3-8b", "--gpus", "2x8xH100", "--seq-len", "8192",
                 "--global-batch-tokens", "4M")
REC_HF = ("recommend", "--hf-config", str(HF_CONFIGS / "qwen2.5-7b.json"), "--gpus", "4xA100-40GB",
          "--tokens", "300B")
EST_ZERO3 = ("estimate", "--params", "7e9", "--gpus", "4xA100", "--strategy", "zero3",
             "--micro-batch", "8", "--seq-len", "4096")
EST_FSDP_SHAPE = ("estimate", "--layers", "32", "--hidden", "4096", "--heads", "32", "--kv-heads", "8",
                  "--ffn", "14336", "--vocab", "128256", "--gpus", "64xH100", "--strategy", "fsdp",
                  "--micro-batch", "2", "--seq-len", "8192", "--act-ckpt", "full")


@pytest.fixture(scope="module")
def rec_13b() -> dict:
    return cli_json(*REC_13B)


@pytest.fixture(scope="module")
def rec_8b_2nodes() -> dict:
    return cli_json(*REC_8B_2NODES)


@pytest.fixture(scope="module")
def rec_hf() -> dict:
    return cli_json(*REC_HF)


@pytest.fixture(scope="module")
def est_zero3() -> dict:
    return cli_json(*EST_ZERO3)


@pytest.fixture(scope="module")
def est_fsdp_shape() -> dict:
    return cli_json(*EST_FSDP_SHAPE)


HUMAN = {"rec-13b": REC_13B, "rec-8b-2nodes": REC_8B_2NODES, "rec-hf": REC_HF,
         "est-zero3": EST_ZERO3, "est-fsdp-shape": EST_FSDP_SHAPE}


@pytest.fixture(scope="module")
def human() -> dict[str, str]:
    """The human report of each command of the issue, by id."""
    return {name: cli_ok(*args) for name, args in HUMAN.items()}


@pytest.mark.parametrize("name", HUMAN)
def test_issue_commands_print_a_human_report(human, name):
    assert "tok" in human[name] and "GiB" in human[name]


def test_recommend_human_report_has_the_recommendation_rule_and_table(human, rec_13b):
    out = human["rec-13b"]
    assert f"Recommendation: {rec_13b['chosen']}" in out  # the same choice as --json
    assert "Rule of thumb" in out
    header = next(line for line in out.splitlines() if "strategy" in line and "fits" in line)
    assert "tok/s/GPU" in header and "MFU" in header


def test_recommend_from_hf_config_gives_time_to_train(rec_hf, human):
    assert rec_hf["model"]["params"] == 7_615_616_512  # Qwen2.5-7B, same as its preset
    chosen = rec_hf["estimates"][0]
    assert chosen["strategy"] == rec_hf["chosen"] and chosen["fits"]
    # time to train = tokens / (tokens/s/GPU x GPUs); 300B is decimal: 3e11 tokens on 4 GPUs
    tp = chosen["throughput"]
    assert tp["time_to_train_s"] == pytest.approx(300e9 / (tp["tokens_per_s_per_gpu"] * 4), rel=1e-6)
    assert "time to train" in human["rec-hf"] and "days" in human["rec-hf"]


# ---- estimate --json ---------------------------------------------------------------------------

@pytest.mark.parametrize(("fixture", "strategy", "params"), [
    ("est_zero3", "zero3", 7_000_000_000),  # --params 7e9 is kept exact
    ("est_fsdp_shape", "fsdp", LLAMA_3_8B_PARAMS),  # the shape flags are Llama-3-8B's
])
def test_estimate_json_has_every_figure(request, fixture, strategy, params):
    est = request.getfixturevalue(fixture)
    assert est["strategy"] == strategy
    assert est["model"]["params"] == params
    assert isinstance(est["fits"], bool)
    per_gpu = est["memory"]["per_gpu_bytes"]
    assert set(per_gpu) == {*MEMORY_COMPONENTS, "total"}
    assert per_gpu["total"] == pytest.approx(sum(per_gpu[k] for k in MEMORY_COMPONENTS), abs=1)
    assert all(per_gpu[k] >= 0 for k in MEMORY_COMPONENTS)
    assert est["memory"]["cpu_per_node_bytes"] == 0  # no offload in either
    assert est["memory"]["nvme_bytes"] == 0
    assert est["communication"]["per_gpu_bytes_per_step"]["total"] > 0
    assert est["time"]["step_s"] > 0
    assert est["throughput"]["tokens_per_s_per_gpu"] > 0
    assert 0 < est["throughput"]["mfu"] < 1


def test_estimate_zero3_micro_batch_8_does_not_fit_80gb_and_says_why(est_zero3):
    assert est_zero3["cluster"]["gpu"] == "A100-80GB" and est_zero3["cluster"]["num_gpus"] == 4
    assert est_zero3["workload"]["micro_batch"] == 8 and est_zero3["workload"]["act_ckpt"] == "none"
    total = est_zero3["memory"]["per_gpu_bytes"]["total"]
    assert total > est_zero3["memory"]["usable_bytes"]
    assert est_zero3["fits"] is False and "GiB" in est_zero3["reason"]


def test_estimate_fsdp_on_64_h100_fits_with_the_asked_settings(est_fsdp_shape):
    est = est_fsdp_shape
    assert est["fits"] is True and est["reason"] is None
    assert (est["cluster"]["num_gpus"], est["cluster"]["nodes"]) == (64, 8)
    assert est["workload"]["act_ckpt"] == "full" and est["workload"]["seq_len"] == 8192
    # 2 sequences x 8192 tokens x 64 GPUs x grad-accum 1 = 1,048,576 tokens per step
    assert est["throughput"]["tokens_per_step"] == 1_048_576
    assert est["communication"]["per_gpu_bytes_per_step"]["inter_node"] > 0  # 8 nodes


# ---- recommend --json --------------------------------------------------------------------------

@pytest.mark.parametrize("fixture", ["rec_13b", "rec_8b_2nodes", "rec_hf"])
def test_recommend_ranks_every_strategy_once_fitting_first_by_throughput(request, fixture):
    rec = request.getfixturevalue(fixture)
    names = [e["strategy"] for e in rec["estimates"]]
    assert sorted(names) == sorted(ALL_STRATEGIES)
    assert rec["chosen"] == rec["estimates"][0]["strategy"]
    assert rec["estimates"][0]["fits"] is True
    fits = [e["fits"] for e in rec["estimates"]]
    assert fits == sorted(fits, reverse=True), "a non-fitting estimate is ranked above a fitting one"
    tps = [e["throughput"]["tokens_per_s_per_gpu"] for e in rec["estimates"] if e["fits"]]
    assert tps == sorted(tps, reverse=True)
    for e in rec["estimates"]:
        if not e["fits"]:
            assert e["reason"], f"{e['strategy']} does not fit without a reason"


def test_recommend_13b_on_8_a100(rec_13b):
    assert rec_13b["model"]["params"] == 13_000_000_000
    assert rec_13b["model"]["inferred"] is True
    by_name = {e["strategy"]: e for e in rec_13b["estimates"]}
    # DDP replicates 16 bytes/param of model states: 13e9 x 16 = 208e9 bytes, far over 80 GiB
    assert by_name["ddp"]["fits"] is False and "GiB" in by_name["ddp"]["reason"]
    assert by_name["hsdp"]["fits"] is False and "node" in by_name["hsdp"]["reason"]
    assert by_name["zero3"]["fits"] is True  # sharding 8 ways brings it under 80 GiB
    assert rec_13b["rule_of_thumb"]


def test_recommend_llama_3_8b_global_batch_4m_sets_grad_accum(rec_8b_2nodes):
    assert rec_8b_2nodes["model"]["params"] == LLAMA_3_8B_PARAMS
    assert rec_8b_2nodes["cluster"]["num_gpus"] == 16
    fitting = [e for e in rec_8b_2nodes["estimates"] if e["fits"]]
    assert fitting
    for e in fitting:
        s = e["workload"]
        # 4M is binary: 2^22 = 4,194,304 tokens = grad_accum x micro_batch x 8192 x 16 GPUs
        assert s["grad_accum"] * s["micro_batch"] * 8192 * 16 == 4_194_304, e["strategy"]
        assert e["throughput"]["tokens_per_step"] == 4_194_304


# ---- catalogs ----------------------------------------------------------------------------------

def test_gpus_lists_the_catalog():
    out = cli_ok("gpus")
    assert "GPU catalog" in out and "A100-80GB" in out and "H100-80GB" in out
    rows = cli_json("gpus")
    by_name = {g["name"]: g for g in rows}
    assert {"A100-40GB", "A100-80GB", "H100-80GB", "H200", "B200", "MI300X"} <= set(by_name)
    assert by_name["A100-80GB"]["memory_in_GiB"] == 80
    assert by_name["A100-80GB"]["peak_bf16_dense_in_TFLOPS"] == 312


def test_models_lists_the_presets_with_exact_params():
    out = cli_ok("models")
    assert "Model presets" in out and "8,030,261,248" in out
    rows = cli_json("models")
    by_name = {m["name"]: m["params"] for m in rows}
    assert by_name["llama-3-8b"] == LLAMA_3_8B_PARAMS
    assert by_name["gpt2"] == 124_439_808
    assert [m["params"] for m in rows] == sorted(m["params"] for m in rows)


# ---- bad input: exit 2, one line naming the field, no traceback --------------------------------

BAD_INPUTS = [
    # (id, args, field, words the line must contain)
    ("unknown-gpu", ["recommend", "--params", "13e9", "--gpus", "8xFOO"], "gpus", ["FOO", "A100-80GB"]),
    ("params-zero", ["recommend", "--params", "0", "--gpus", "8xA100"], "params", ["> 0"]),
    ("params-text", ["recommend", "--params", "abc", "--gpus", "8xA100"], "params", ["abc"]),
    ("heads-not-dividing-hidden",  # 4100 / 32 = 128.125 (the issue's 4000 / 32 = 125 divides)
     ["recommend", "--layers", "32", "--hidden", "4100", "--heads", "32", "--ffn", "11008",
      "--vocab", "32000", "--gpus", "8xA100"], "heads", ["4100"]),
    ("kv-heads-not-dividing-heads",
     ["recommend", "--layers", "32", "--hidden", "4096", "--heads", "32", "--kv-heads", "5",
      "--ffn", "11008", "--vocab", "32000", "--gpus", "8xA100"], "kv_heads", ["5"]),
    ("shape-missing-heads",
     ["recommend", "--layers", "32", "--hidden", "4096", "--ffn", "11008", "--vocab", "32000",
      "--gpus", "8xA100"], "heads", []),
    ("micro-batch-zero", ["estimate", "--params", "7e9", "--gpus", "8xA100", "--micro-batch", "0"],
     "micro_batch", ["> 0"]),
    ("unknown-strategy", ["estimate", "--params", "7e9", "--gpus", "8xA100", "--strategy", "zero9"],
     "strategy", ["zero3", "fsdp", "hsdp"]),
    ("unknown-strategies", ["recommend", "--params", "7e9", "--gpus", "8xA100",
                            "--strategies", "fsdp,zero9"], "strategies", ["zero3"]),
    # 1000 tokens vs seq_len x GPUs = 4096 x 8 = 32768
    ("global-batch-not-multiple", ["recommend", "--params", "7e9", "--gpus", "8xA100",
                                   "--global-batch-tokens", "1000"], "global_batch_tokens", ["32768"]),
    ("global-batch-and-grad-accum", ["estimate", "--params", "7e9", "--gpus", "8xA100",
                                     "--grad-accum", "2", "--global-batch-tokens", "4M"],
     "grad_accum", ["global-batch-tokens"]),
    ("gpus-not-filling-nodes", ["recommend", "--params", "7e9", "--gpus", "12xH100"], "gpus",
     ["12", "8"]),
    ("gpus-unparseable", ["recommend", "--params", "7e9", "--gpus", "8x"], "gpus", ["8xA100"]),
    ("unknown-model", ["recommend", "--model", "nope", "--gpus", "8xA100"], "model",
     ["nope", "llama-3-8b"]),
    ("hf-config-missing", ["recommend", "--hf-config", "/nonexistent.json", "--gpus", "8xA100"],
     "hf_config", ["/nonexistent.json"]),
    ("no-model", ["recommend", "--gpus", "8xA100"], "model", ["--params", "--model"]),
    ("two-models", ["recommend", "--model", "llama-3-8b", "--hf-config",
                    str(HF_CONFIGS / "gpt2.json"), "--gpus", "8xA100"], "model", []),
    ("seq-len-zero", ["recommend", "--params", "7e9", "--gpus", "8xA100", "--seq-len", "0"],
     "seq_len", ["> 0"]),
    ("fp8-on-a100", ["recommend", "--params", "7e9", "--gpus", "8xA100", "--precision", "fp8"],
     "precision", ["fp8", "bf16"]),
    ("bf16-on-v100", ["recommend", "--params", "7e9", "--gpus", "8xV100", "--precision", "bf16"],
     "precision", ["fp16"]),
    ("gpt2-past-learned-positions", ["recommend", "--model", "gpt2", "--gpus", "8xA100",
                                     "--seq-len", "4096"], "seq_len", ["1024"]),
    ("tokens-text", ["recommend", "--params", "7e9", "--gpus", "8xA100", "--tokens", "abc"],
     "tokens", []),
]

EDGE_CASES = [
    pytest.param(["recommend", "--params", "-5", "--gpus", "8xA100"], "params", ["> 0"], ("is not a number",),
                 id="params-negative"),
    pytest.param(["recommend", "--params", "13e9", "--model", "llama-3-8b", "--gpus", "8xA100"],
                 "model", ["--params"], (),
                 id="params-and-model"),
    pytest.param(["recommend", "--params", "7e9", "--gpus", "8xA100", "--inter-node-gbps", "nan"],
                 "inter_node_gbps", [], ("less than or equal",),
                 id="inter-node-gbps-nan"),
    pytest.param(["recommend", "--params", "7e9", "--gpus", "8xA100", "--strategies", ","],
                 "strategies", [], (),
                 id="strategies-empty"),
]


def _assert_one_line_error(args: list[str], field: str, words: list[str],
                           forbidden: tuple[str, ...] = ()) -> None:
    proc = cli(*args)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, f"exit {proc.returncode}; stderr: {proc.stderr!r}"
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith("advisor: error:"), line
    assert field in line or f"--{field.replace('_', '-')}" in line, f"{field} not named: {line}"
    for word in words:
        assert word in line, f"{word!r} not in: {line}"
    for word in forbidden:
        assert word not in line, f"misleading {word!r} in: {line}"


@pytest.mark.parametrize(("case", "args", "field", "words"), BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_is_one_line_naming_the_field(case, args, field, words):
    _assert_one_line_error(args, field, words)


@pytest.mark.parametrize(("args", "field", "words", "forbidden"), EDGE_CASES)
def test_bad_input_edge_cases(args, field, words, forbidden):
    _assert_one_line_error(args, field, words, forbidden)


def test_accumulation_sync_and_fused_loss_flags_reach_the_estimate():
    """--sync-each-micro-batch drops FSDP's unsharded-gradient buffer; --fused-loss replaces
    the 12 B per logit of HF's loss by the plan's chunked loss: one chunk of 2^26 / 8192 = 8192
    vocabulary entries at 6 B, 4 B per hidden element and 20 B per token (llama-3-8b, vocab
    128256, hidden 4096, 8192 x 1 tokens)."""
    base = ("estimate", "--model", "llama-3-8b", "--gpus", "8xA100", "--seq-len", "8192",
            "--grad-accum", "4", "--json")
    plain = json.loads(cli_ok(*base))
    tuned = json.loads(cli_ok(*base, "--sync-each-micro-batch", "--fused-loss"))
    assert plain["workload"]["sync_each_micro_batch"] is False
    assert tuned["workload"]["sync_each_micro_batch"] is True
    assert tuned["workload"]["fused_loss"] is True
    assert "unsharded gradients (no_sync accumulation)" in plain["memory"]["buffers_detail"]
    assert "unsharded gradients (no_sync accumulation)" not in tuned["memory"]["buffers_detail"]
    logits = plain["memory"]["per_gpu_bytes"]["logits"] - tuned["memory"]["per_gpu_bytes"]["logits"]
    tokens = 8192
    assert logits == 12 * tokens * 128256 - (6 * tokens * 8192 + 4 * tokens * 4096 + 20 * tokens)
