"""The REST API in process (FastAPI's TestClient): endpoints, the one error schema, limits,
security headers, CORS, and parity with the CLI's --json."""

from __future__ import annotations

import io
import json
import zipfile
from contextlib import redirect_stdout

import pytest
from fastapi.testclient import TestClient

from advisor.cli import main as cli
from advisor.strategies import STRATEGY_NAMES
from api.app import create_app
from api.settings import Settings
from benchmarks import speed

ERROR_KEYS = {"code", "message", "field", "allowed", "errors"}


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(Settings()), raise_server_exceptions=False)


def assert_error(response, status: int, code: str, field: str | None = None) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == ERROR_KEYS
    assert body["code"] == code
    if field is not None:
        assert body["field"] == field
    assert "Traceback" not in response.text
    return body


def test_healthz(client):
    r = client.get("/healthz")
    assert r.status_code == 200
    assert r.json()["status"] == "ok"


def test_estimate_returns_the_estimate_schema(client):
    r = client.post("/v1/estimate", json={"params": 13e9, "gpus": "8xA100", "strategy": "zero3"})
    assert r.status_code == 200
    body = r.json()
    assert body["strategy"] == "zero3" and body["fits"] is True
    assert body["cluster"]["num_gpus"] == 8
    assert body["model"]["params"] == 13_000_000_000
    mem = body["memory"]["per_gpu_bytes"]
    parts = ("params", "grads", "optimizer", "activations", "logits", "buffers", "overhead")
    assert mem["total"] == pytest.approx(sum(mem[k] for k in parts), rel=1e-9)


def test_recommend_ranks_every_strategy(client):
    r = client.post("/v1/recommend", json={"model": "llama-3-8b", "gpus": "8xA100"})
    assert r.status_code == 200
    body = r.json()
    assert body["chosen"] == body["estimates"][0]["strategy"]
    assert len(body["estimates"]) == 11
    assert body["summary"] and body["rule_of_thumb"]


def test_count_strings_are_accepted_like_the_cli(client):
    # "13B" = 13e9; "4M" tokens = 2^22 (binary for batches), on 8 GPUs x 4096 -> accumulation 128
    r = client.post("/v1/estimate", json={"params": "13B", "gpus": "8xA100", "micro_batch": 1,
                                          "global_batch_tokens": "4M"})
    assert r.status_code == 200, r.text
    assert r.json()["workload"]["grad_accum"] == 4 * 2**20 // (8 * 4096)


def test_hf_config_is_sent_as_json_content(client):
    config = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
              "num_key_value_heads": 8, "num_hidden_layers": 32, "intermediate_size": 14336,
              "vocab_size": 128256, "max_position_embeddings": 8192}
    r = client.post("/v1/estimate", json={"hf_config": config, "gpus": "8xH100"})
    assert r.status_code == 200, r.text
    assert r.json()["model"]["params"] == 8_030_261_248  # Llama-3-8B, as tests/test_cli.py derives


def _cli_json(*args: str) -> dict:
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli.main(list(args)) == 0
    return json.loads(out.getvalue())


def test_api_and_cli_print_the_same_json(client):
    api = client.post("/v1/recommend", json={"params": 7e9, "gpus": "2x8xH100", "seq_len": 8192})
    assert api.json() == _cli_json("recommend", "--params", "7e9", "--gpus", "2x8xH100",
                                   "--seq-len", "8192", "--json")
    api = client.post("/v1/estimate", json={"model": "mistral-7b", "gpus": "8xL40S",
                                            "strategy": "zero2-offload", "micro_batch": 2})
    assert api.json() == _cli_json("estimate", "--model", "mistral-7b", "--gpus", "8xL40S",
                                   "--strategy", "zero2-offload", "--micro-batch", "2", "--json")


def test_catalogs(client):
    gpus = client.get("/v1/gpus").json()
    assert "H100-80GB" in {g["name"] for g in gpus}
    models = client.get("/v1/models").json()
    by_name = {m["name"]: m for m in models}
    assert by_name["llama-3-8b"]["params"] == 8_030_261_248
    assert [m["params"] for m in models] == sorted(m["params"] for m in models)


def test_out_of_range_names_the_field_and_the_range(client):
    body = assert_error(client.post("/v1/recommend", json={"params": 13e9, "gpus": "8xA100",
                                                           "seq_len": 2**21}),
                        422, "invalid_input", "seq_len")
    assert body["allowed"] == "> 0 and <= 1048576"


def test_nested_field_paths(client):
    body = assert_error(client.post("/v1/recommend", json={"params": 13e9, "gpus": "8xA100",
                                                           "strategies": ["fsdp", "zero9"]}),
                        422, "invalid_input", "strategies.1")
    assert "zero3" in body["allowed"]


def test_unknown_gpu_and_model_list_the_valid_names(client):
    body = assert_error(client.post("/v1/estimate", json={"params": 1e9, "gpus": "8xA1000"}),
                        422, "invalid_input", "gpus")
    assert "A100-80GB" in body["allowed"] and "H100-80GB" in body["allowed"]
    body = assert_error(client.post("/v1/estimate", json={"model": "llama-9", "gpus": "8xA100"}),
                        422, "invalid_input", "model")
    assert "llama-3-8b" in body["allowed"]


def test_unknown_and_missing_fields(client):
    body = assert_error(client.post("/v1/estimate", json={"params": 1e9, "gpus": "8xA100",
                                                          "param": 3}),
                        422, "invalid_input", "param")
    assert "seq_len" in body["allowed"]
    assert_error(client.post("/v1/estimate", json={"params": 1e9}), 422, "invalid_input", "gpus")
    assert_error(client.post("/v1/estimate", json=[1, 2]), 422, "invalid_input")


def test_malformed_bodies(client):
    assert_error(client.post("/v1/estimate", content=b"{", headers={"content-type": "application/json"}),
                 422, "invalid_input", "body")
    for unreadable in (b"\x80\x81", b"[" * 100_000):  # not UTF-8; nested past the parser's limit
        assert_error(client.post("/v1/estimate", content=unreadable,
                                 headers={"content-type": "application/json"}), 400, "bad_request")
    # Not declared JSON: 415, whatever the body holds.
    assert_error(client.post("/v1/estimate", content=b"params=1", headers={"content-type": "text/plain"}),
                 415, "unsupported_media_type")
    assert_error(client.post("/v1/estimate", content=b'{"params": 7e9, "gpus": "8xA100"}',
                             headers={"content-type": "text/plain"}), 415, "unsupported_media_type")


def test_every_error_uses_one_schema(client):
    assert_error(client.get("/v1/nothing"), 404, "not_found")
    assert_error(client.get("/v1/estimate"), 405, "method_not_allowed")
    assert_error(client.put("/v1/gpus"), 405, "method_not_allowed")


def test_body_size_is_limited():
    small = TestClient(create_app(Settings(max_body_bytes=1024)))
    big = {"params": 1e9, "gpus": "8xA100", "hf_config": {"x": "a" * 2000}}
    body = assert_error(small.post("/v1/estimate", json=big), 413, "body_too_large")
    assert body["allowed"] == "at most 1024 bytes"

    def chunks():  # no Content-Length: the limit holds while the body streams in
        yield b'{"params": 1e9, "gpus": "8xA100", "model": "'
        for _ in range(10):
            yield b"a" * 200
        yield b'"}'

    r = small.post("/v1/estimate", content=chunks(), headers={"content-type": "application/json"})
    assert_error(r, 413, "body_too_large")


def test_hf_config_tree_is_bounded(client):
    deep: dict = {}
    node = deep
    for _ in range(40):
        node["a"] = {}
        node = node["a"]
    body = assert_error(client.post("/v1/estimate", json={"gpus": "8xA100", "hf_config": deep}),
                        422, "invalid_input", "hf_config")
    assert "deeper" in body["message"]
    wide = {f"k{i}": i for i in range(5000)}
    assert_error(client.post("/v1/estimate", json={"gpus": "8xA100", "hf_config": wide}),
                 422, "invalid_input", "hf_config")


def test_security_headers_on_api_pages_and_errors(client):
    for r in (client.get("/healthz"), client.get("/"), client.get("/v1/nothing")):
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
        assert r.headers["referrer-policy"] == "no-referrer"
    assert "script-src" not in client.get("/").headers["content-security-policy"]  # no JS at all


def test_cors_is_off_unless_configured(client):
    headers = {"origin": "https://evil.example", "access-control-request-method": "POST"}
    r = client.options("/v1/estimate", headers=headers)
    assert "access-control-allow-origin" not in r.headers
    r = client.post("/v1/estimate", json={"params": 1e9, "gpus": "8xA100"}, headers=headers)
    assert "access-control-allow-origin" not in r.headers

    allowed = TestClient(create_app(Settings(cors_origins=("https://tools.internal",))))
    r = allowed.options("/v1/estimate", headers={"origin": "https://tools.internal",
                                                  "access-control-request-method": "POST"})
    assert r.headers["access-control-allow-origin"] == "https://tools.internal"
    r = allowed.options("/v1/estimate", headers=headers)
    assert "access-control-allow-origin" not in r.headers


def test_openapi_has_examples_on_every_request_model(client):
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    for name in ("EstimateRequest", "RecommendRequest", "ConfigsRequest"):
        assert schemas[name]["examples"], name
        for example in schemas[name]["examples"]:
            assert example["gpus"]
    for path in ("/v1/estimate", "/v1/recommend", "/v1/configs", "/v1/gpus", "/v1/models", "/healthz"):
        assert path in spec["paths"]
    assert client.get("/docs").status_code == 200


def test_openapi_examples_are_accepted(client):
    spec = client.get("/openapi.json").json()
    for path, name in (("/v1/estimate", "EstimateRequest"), ("/v1/recommend", "RecommendRequest")):
        for example in spec["components"]["schemas"][name]["examples"]:
            r = client.post(path, json=example)
            assert r.status_code == 200, (example, r.text)


WORST_CASES = speed.WORST_CASES


@pytest.mark.parametrize("job", WORST_CASES, ids=range(len(WORST_CASES)))
def test_worst_case_recommend_answers_with_bounded_work(job):
    """Inputs at every field's bound get an answer (a 422 here once hid a layout built past the
    GPU limit by the cheapest-fix search), and the search's work stays within its grid:
    strategies x checkpointing x gradient-sync modes x the micro-batch ladder. Their time
    (target 1 s each) is measured by `python benchmarks/speed.py`, not here."""
    from advisor.core.workload import ACT_CKPTS
    from advisor.search.space import MICRO_BATCH_LADDER
    from api import service

    service.clear_caches()  # no result from the cache
    client = TestClient(create_app(Settings()), raise_server_exceptions=False)
    r = client.post("/v1/recommend", json=job)
    assert r.status_code == 200, r.text
    grid = len(STRATEGY_NAMES) * len(ACT_CKPTS) * 2 * len(MICRO_BATCH_LADDER)
    assert 0 < r.json()["candidates_evaluated"] <= grid


def test_configs_json_and_zip(client):
    job = {"model": "llama-3-8b", "gpus": "8xA100"}
    r = client.post("/v1/configs", json=job)
    assert r.status_code == 200, r.text
    files = r.json()
    assert files and all(isinstance(v, str) and v for v in files.values())
    z = client.post("/v1/configs?format=zip", json=job)
    assert z.status_code == 200
    assert z.headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(z.content)) as archive:
        assert sorted(archive.namelist()) == sorted(files)
        for name in files:
            assert archive.read(name).decode() == files[name]


def test_configs_when_nothing_fits(client):
    r = client.post("/v1/configs", json={"model": "llama-3.1-405b", "gpus": "1xL4"})
    body = assert_error(r, 422, "infeasible")
    assert "no plan fits" in body["message"]


def test_configs_for_one_strategy_parse(client):
    import yaml

    job = {"model": "llama-3-8b", "gpus": "2x8xH100", "strategy": "zero3", "global_batch_tokens": "4M"}
    r = client.post("/v1/configs", json=job)
    assert r.status_code == 200, r.text
    files = r.json()
    ds = json.loads(files["ds_config.json"])
    assert ds["zero_optimization"]["stage"] == 3
    # train_batch_size counts sequences: 4M tokens = 2^22 / 4096 tokens per sequence = 1024.
    assert ds["train_batch_size"] == 4 * 2**20 // 4096
    assert yaml.safe_load(files["accelerate_config.yaml"])["num_machines"] == 2


def test_configs_field_errors(client):
    r = client.post("/v1/configs", json={"model": "llama-3-8b", "gpus": "8xA100", "strategy": "zero3-nvme"})
    assert_error(r, 422, "invalid_input", "nvme_path")
    r = client.post("/v1/configs", json={"model": "llama-3-8b", "gpus": "8xA100", "strategy": "zero3-nvme",
                                         "nvme_path": "/local_nvme"})
    assert r.status_code == 200 and "/local_nvme" in r.json()["ds_config.json"]


def test_calibrations_round_trip_and_change_estimates():
    """POST a profile (the shipped CPU example, renamed and sealed again: renaming changes its
    content), list it, and see a named estimate refuse it for a GPU it was not measured on."""
    from pathlib import Path

    from advisor.profiles import schema as profile_schema
    from advisor.profiles import use as profiles

    token = "t" * 32
    client = TestClient(create_app(Settings(api_token=token)), raise_server_exceptions=False)
    auth = {"Authorization": f"Bearer {token}"}
    shipped = Path(__file__).parents[1] / "calibration" / "profiles" / "example-cpu-gloo.json"
    profile = profiles.parse_profile(shipped.read_text()).model_copy(update={"name": "api-test-profile"})
    body = json.loads(profile_schema.seal(profile).model_dump_json())
    posted = client.post("/v1/calibrations", json=body, headers=auth)
    assert posted.status_code == 201, posted.text
    assert posted.json()["name"] == "api-test-profile"
    listed = client.get("/v1/calibrations").json()
    assert "api-test-profile" in [p["name"] for p in listed["items"]]
    bad = client.post("/v1/calibrations", json={"name": "x"}, headers=auth)
    assert bad.status_code == 422 and bad.json()["field"]
    # a CPU profile cannot be used for an A100 estimate: a clear 422 naming the field
    wrong = client.post("/v1/estimate", json={"params": 7e9, "gpus": "8xA100",
                                              "profile": "api-test-profile"})
    assert wrong.status_code == 422 and wrong.json()["field"] == "profile"
    assert client.delete("/v1/calibrations/api-test-profile", headers=auth).status_code == 204
