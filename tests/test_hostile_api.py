"""The REST API against an attacker: parsing that cannot stall, a loop that a slow request
cannot block, calibration writes that need the token, profiles held to physical ranges, answers
that follow the store, and the small things (Allow, paging, 415, no server paths, offline docs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import anyio
import httpx2
import pytest
from fastapi.testclient import TestClient

from advisor.profiles import schema as profile_schema
from advisor.profiles import store as profile_store
from advisor.profiles import use as profiles
from api import service
from api.app import create_app
from api.settings import Settings
from tests.test_profiles import synthetic

TOKEN = "k" * 40
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LONG = "1" * 20_000 + "x"  # took 40 s in the old count parser


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path / "home"))
    service.clear_caches()
    yield tmp_path / "home"
    service.clear_caches()


@pytest.fixture
def client(home) -> TestClient:
    return TestClient(create_app(Settings(api_token=TOKEN)), raise_server_exceptions=False)


def _sealed(**update) -> dict:
    return json.loads(profile_schema.seal(synthetic().model_copy(update=update)).model_dump_json())


# -- 1. parsing: bounded, and off the event loop ----------------------------------------------

@pytest.mark.parametrize("field", ["params", "tokens", "global_batch_tokens", "seq_len"])
def test_a_long_count_string_is_refused_by_its_length(client, field):
    job = {"params": 7e9, "gpus": "8xA100", field: LONG}
    r = client.post("/v1/estimate", json=job)
    assert r.status_code == 422 and r.json()["field"] == field
    assert "longer than 32 characters" in r.json()["message"]
    assert len(r.text) < 2000  # the 20 KB input is not echoed back


@pytest.mark.parametrize(("field", "limit"), [("gpus", 64), ("model", 64), ("profile", 128)])
def test_every_string_field_has_a_length_bound(client, field, limit):
    job = {"params": 7e9, "gpus": "8xA100", field: "a" * (limit + 1)}
    r = client.post("/v1/estimate", json=job)
    assert r.status_code == 422 and r.json()["field"] == field, r.text


def test_the_form_refuses_a_long_count_string(client):
    r = client.post("/", content=f"model_source=params&params={LONG}".encode(),
                    headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 422 and "longer than 32 characters" in r.text


def test_a_slow_request_does_not_hold_up_healthz(home, monkeypatch):
    """A recommend that spends 1.5 s in the cost model (time.sleep stands in for the CPU work:
    both hold the thread) runs beside /healthz, which must answer at once."""
    real = service.run_recommend

    def slow(req):
        time.sleep(1.5)
        return real(req)

    monkeypatch.setattr(service, "run_recommend", slow)
    app = create_app(Settings())
    done: dict[str, float] = {}  # seconds from the start until each answer arrived
    start = time.perf_counter()

    async def call(client, name, method, path, **kw):
        r = await client.request(method, path, **kw)
        assert r.status_code == 200, r.text
        done[name] = time.perf_counter() - start

    async def main():
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://t") as c, \
                anyio.create_task_group() as tg:
            tg.start_soon(lambda: call(c, "slow", "POST", "/v1/recommend",
                                       json={"params": 1e9, "gpus": "8xA100"}))
            await anyio.sleep(0.2)
            tg.start_soon(lambda: call(c, "healthz", "GET", "/healthz"))

    anyio.run(main)
    assert done["slow"] >= 1.5 and done["healthz"] < 0.9, done  # asked at 0.2 s


# -- 3. writes need the token -----------------------------------------------------------------

def test_without_a_configured_token_the_server_is_read_only(home):
    client = TestClient(create_app(Settings()), raise_server_exceptions=False)
    assert client.post("/v1/calibrations", json=_sealed(), headers=AUTH).status_code == 403
    assert client.delete("/v1/calibrations/h200-test", headers=AUTH).status_code == 403
    assert client.get("/v1/calibrations").status_code == 200
    assert profiles.list_profiles() == []


@pytest.mark.parametrize("header", [None, "Bearer wrong-token-of-some-length", f"Basic {TOKEN}", TOKEN,
                                    f"Bearer {TOKEN}x"])
def test_a_missing_or_wrong_token_is_401(client, header):
    headers = {"Authorization": header} if header else {}
    r = client.post("/v1/calibrations", json=_sealed(), headers=headers)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert client.delete("/v1/calibrations/h200-test", headers=headers).status_code == 401
    assert profiles.list_profiles() == []


def test_the_token_stores_and_deletes(client):
    assert client.post("/v1/calibrations", json=_sealed(), headers=AUTH).status_code == 201
    assert [p["name"] for p in client.get("/v1/calibrations").json()["items"]] == ["h200-test"]
    assert client.delete("/v1/calibrations/h200-test", headers=AUTH).status_code == 204
    assert client.delete("/v1/calibrations/h200-test", headers=AUTH).status_code == 404
    assert client.delete("/v1/calibrations/..%2Fx", headers=AUTH).status_code in (404, 422)


def test_openapi_says_which_operations_need_the_token(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert paths["/v1/calibrations"]["post"]["security"] == [{"ApiToken": []}]
    assert paths["/v1/calibrations/{name}"]["delete"]["security"] == [{"ApiToken": []}]
    assert "security" not in paths["/v1/calibrations"]["get"]
    assert {"401", "403"} <= set(paths["/v1/calibrations"]["post"]["responses"])
    body = paths["/v1/calibrations"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/Profile"}


# -- 4. a profile is held to physical ranges before it is stored --------------------------------

def _curve(y):
    return {"gemm_efficiency": {"hopper": {"x": [1024.0, 8192.0], "y": y}}}


BAD_PROFILES = [
    ("gemm-50", lambda d: d.update(overrides=_curve([0.3, 50.0])), "overrides"),
    ("gemm-negative", lambda d: d.update(overrides=_curve([-1.0, 0.5])), "overrides"),
    ("gemm-zero", lambda d: d.update(overrides=_curve([0.0, 0.5])), "overrides"),
    ("overlap-50", lambda d: d.update(overrides={"overlap": {"fsdp2": 50.0}}), "overrides"),
    ("overhead-negative", lambda d: d.update(overrides={"overhead": {"cuda_context_bytes": -1.0}}),
     "overrides"),
    ("rate-negative", lambda d: d.update(
        overrides={"offload": {"torch_cpu_adam_params_per_s_per_node": -5.0}}), "overrides"),
    ("bandwidth-negative", lambda d: d.update(overrides={"collective": {"intra_efficiency": -0.5}}),
     "overrides"),
    ("unknown-gpu", lambda d: d.update(catalog_gpu="NOPE"), "catalog_gpu"),
    ("not-a-date", lambda d: d.update(created_at="not a date"), "created_at"),
    ("no-time-zone", lambda d: d.update(created_at="2026-11-30T00:00:00"), "created_at"),
    ("sigma-negative", lambda d: d["fit"][0].update(sigma=-1), "fit"),
    ("no-checksum", lambda d: d.pop("checksum"), "checksum"),
    ("tampered", lambda d: d["fit"][1].update(value=0.51), "body"),
]


@pytest.mark.parametrize(("edit", "field"), [c[1:] for c in BAD_PROFILES], ids=[c[0] for c in BAD_PROFILES])
def test_an_unphysical_profile_is_refused_naming_the_field(client, edit, field):
    body = _sealed()
    edit(body)  # the checksum no longer matches either: the field's own error must come first
    r = client.post("/v1/calibrations", json=body, headers=AUTH)
    assert r.status_code == 422, r.text
    assert r.json()["field"].split(".")[0] == field, r.json()
    assert profiles.list_profiles() == []


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity"])
def test_nan_anywhere_in_a_profile_is_refused(client, raw):
    text = json.dumps(_sealed()).replace('"padding": ""', f'"padding": {raw}')
    r = client.post("/v1/calibrations", content=text.encode(),
                    headers={**AUTH, "content-type": "application/json"})
    assert r.status_code == 422 and r.json()["field"].startswith("measurements"), r.text


def test_a_bad_stored_row_is_skipped_and_reported_never_raised(client, home):
    """A row an older version wrote (valid checksum, invalid content): listed as skipped,
    estimates still answer, `advisor profiles` exits 0 and names it."""
    profiles.save_profile(synthetic("good"))
    body = json.loads(synthetic("bad").model_dump_json())
    body["catalog_gpu"] = "NOPE"
    profile_store.insert("bad", "f" * 16, "H200", body["created_at"], json.dumps(body))
    page = client.get("/v1/calibrations").json()
    assert [p["name"] for p in page["items"]] == ["good"]
    assert len(page["skipped"]) == 1 and "catalog_gpu" in page["skipped"][0]["reason"]
    r = client.post("/v1/estimate", json={"model": "llama-3-8b", "gpus": "8xH200"})
    assert r.status_code == 200 and any("'good'" in n for n in r.json()["cluster"]["notes"])
    proc = subprocess.run([sys.executable, "-m", "advisor.cli.main", "profiles"], capture_output=True,
                          text=True, env={**os.environ, "ADVISOR_HOME": str(home)})
    assert proc.returncode == 0 and "skipped stored profile version" in proc.stderr


# -- 5. answers follow the store ---------------------------------------------------------------

def test_cached_answers_follow_a_profile_imported_by_another_process(client, home, tmp_path):
    job = {"model": "llama-3-8b", "gpus": "8xH200"}
    before = client.post("/v1/estimate", json=job).json()
    assert not any("calibrated" in n for n in before["cluster"]["notes"])
    path = tmp_path / "p.json"
    path.write_text(profile_schema.seal(synthetic()).model_dump_json())
    proc = subprocess.run([sys.executable, "-m", "advisor.cli.main", "profiles", "import", str(path)],
                          capture_output=True, text=True,
                          env={**os.environ, "ADVISOR_HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    after = client.post("/v1/estimate", json=job).json()
    assert any("'h200-test'" in n for n in after["cluster"]["notes"])
    assert after["throughput"]["tokens_per_s_per_gpu"] != before["throughput"]["tokens_per_s_per_gpu"]


# -- 7. the smaller holes --------------------------------------------------------------------

def test_every_405_names_the_allowed_methods(client):
    paths = [r.path.replace("{name}", "x") for r in client.app.routes if hasattr(r, "path")]
    paths += ["/static/style.css", "/static/docs/swagger-ui.css"]
    for path in paths:
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
            r = client.request(method, path)
            if r.status_code == 405:
                assert r.headers.get("allow"), (method, path)
                assert method not in r.headers["allow"].split(", ")


def test_calibrations_list_pages_and_is_bounded(client):
    for i in range(5):
        profiles.save_profile(synthetic(f"p{i}"))
    page = client.get("/v1/calibrations", params={"limit": 2, "offset": 1}).json()
    assert [p["name"] for p in page["items"]] == ["p3", "p2"] and page["total"] == 5
    assert client.get("/v1/calibrations", params={"limit": 101}).status_code == 422
    assert client.get("/v1/calibrations", params={"offset": -1}).status_code == 422
    assert client.get("/v1/calibrations", params={"gpu": "NOPE"}).json()["field"] == "gpu"


def test_errors_never_show_server_paths(client, home):
    answers = [client.post("/v1/estimate", json={"params": 7e9, "gpus": "8xH200", "profile": "nope"}),
               client.get("/v1/calibrations", params={"gpu": "x" * 65}),
               client.post("/v1/calibrations", json={"name": "x"}, headers=AUTH)]
    for r in answers:
        assert r.status_code == 422
        assert str(home) not in r.text and "/work" not in r.text and "site-packages" not in r.text


def test_json_sent_as_text_plain_is_415(client):
    r = client.post("/v1/estimate", content=b'{"params": 7e9, "gpus": "8xA100"}',
                    headers={"content-type": "text/plain"})
    assert r.status_code == 415 and r.json()["code"] == "unsupported_media_type"


def test_docs_work_offline(client):
    for page, assets in (("/docs", ("swagger-ui-bundle.js", "swagger-ui.css")),
                         ("/redoc", ("redoc.standalone.js",))):
        r = client.get(page)
        assert r.status_code == 200
        assert "http://" not in r.text and "https://" not in r.text, page
        csp = r.headers["content-security-policy"]
        assert "http" not in csp
        for asset in assets:
            assert f"/static/docs/{asset}" in r.text
            served = client.get(f"/static/docs/{asset}")
            assert served.status_code == 200 and len(served.content) > 10_000
