"""The CLI against hostile or careless input: one line on stderr naming the field (exit 2),
never a traceback, never a silent acceptance of a contradiction, never an unbounded read."""

from __future__ import annotations

import pytest

from tests.test_cli import _assert_one_line_error, cli, cli_json

JOB = ("--params", "7e9", "--gpus", "8xA100")
NON_UTF8 = b'{"model_type": "llama", "_name_or_path": "\xff\xfe"}'


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    (root / "latin1.json").write_bytes(NON_UTF8)
    (root / "a-file").write_text("x")
    (root / "unknown-family.json").write_text('{"model_type": "newarch", "hidden_size": 4096}')
    (root / "not-json.json").write_text("model_type: llama")
    return root


CASES = [
    ("out-proc", ["recommend", *JOB, "--out", "/proc/x"], "out", ["cannot"]),
    ("out-under-a-file", ["recommend", *JOB, "--out", "{root}/a-file/x"], "out", ["is a file"]),
    ("out-empty", ["recommend", *JOB, "--out", ""], "out", ["0 characters"]),
    ("hf-config-not-utf8", ["recommend", "--hf-config", "{root}/latin1.json", "--gpus", "8xA100"],
     "hf_config", ["not UTF-8"]),
    ("hf-config-unbounded", ["recommend", "--hf-config", "/dev/zero", "--gpus", "8xA100"], "hf_config",
     ["larger than"]),
    ("both-sync-forms", ["recommend", *JOB, "--sync-each-micro-batch", "--no-sync-each-micro-batch"],
     "sync_each_micro_batch", ["given twice"]),
    ("flag-twice", ["estimate", *JOB, "--seq-len", "4096", "--seq-len", "8192"], "seq_len", ["given twice"]),
    ("fsdp-version-for-zero3", ["estimate", *JOB, "--strategy", "zero3", "--fsdp-version", "1"],
     "fsdp_version", ["fsdp"]),
    ("fsdp-version-for-deepspeed-only", ["recommend", *JOB, "--strategies", "zero2,zero3",
                                         "--fsdp-version", "1"], "fsdp_version", ["fsdp"]),
    ("nvme-path-relative", ["recommend", *JOB, "--out", "{root}/plan", "--nvme-path", "relative/dir"],
     "nvme_path", ["absolute"]),
    ("nvme-path-without-out", ["recommend", *JOB, "--nvme-path", "/nvme"], "nvme_path", ["--out"]),
    ("params-negative-float", ["recommend", "--params", "-7e9", "--gpus", "8xA100"], "params", ["> 0"]),
    ("micro-batch-fraction", ["estimate", *JOB, "--micro-batch", "2.5"], "micro_batch", ["> 0 and <= 4096"]),
    ("seq-len-fraction", ["estimate", *JOB, "--seq-len", "4.3k"], "seq_len", ["whole number"]),
    ("seq-len-words", ["estimate", *JOB, "--seq-len", "four"], "seq_len", ["not a number"]),
    ("params-long", ["estimate", "--params", "1" * 5000 + "x", "--gpus", "8xA100"], "params",
     ["longer than 32"]),
    ("alternatives-words", ["recommend", *JOB, "--out", "{root}/p2", "--alternatives", "two"],
     "alternatives", ["0 to 16"]),
    ("unknown-flag", ["recommend", *JOB, "--bogus"], "bogus", ["unrecognized"]),
    ("missing-gpus", ["recommend", "--params", "7e9"], "gpus", ["required"]),
    ("unknown-family", ["recommend", "--hf-config", "{root}/unknown-family.json", "--gpus", "8xA100"],
     "hf_config", ["newarch", "not modelled", "mixtral", "llama"]),
    ("not-json", ["recommend", "--hf-config", "{root}/not-json.json", "--gpus", "8xA100"], "hf_config",
     ["not valid JSON"]),
]


@pytest.mark.parametrize(("args", "field", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_mistake_is_one_line_naming_the_field(files, args, field, words):
    args = [a.replace("{root}", str(files)) for a in args]
    _assert_one_line_error(args, field, words)


@pytest.mark.parametrize(("text", "tokens"), [("4k", 4096), ("32K", 32768), ("128k", 131072), ("2048", 2048)])
def test_sequence_length_accepts_binary_suffixes(text, tokens):
    est = cli_json("estimate", *JOB, "--seq-len", text)
    assert est["workload"]["seq_len"] == tokens


def test_the_worst_string_input_is_refused_by_its_length_before_parsing():
    """Bounded work (the time is benchmarks/speed.py's): a 20 KB count string, which took the
    old parser 40 s, is refused by the length bound, not by the number parser."""
    proc = cli("estimate", "--params", "1" * 20_000 + "x", "--gpus", "8xA100")
    assert proc.returncode == 2 and "longer than 32 characters" in proc.stderr
    assert len(proc.stderr) < 500  # the input is not echoed back


def test_refused_out_writes_nothing_to_stdout(files):
    proc = cli("recommend", *JOB, "--out", str(files / "a-file"), "--json")
    assert proc.returncode == 2 and proc.stdout == "" and "out:" in proc.stderr
