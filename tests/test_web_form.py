"""The web form's fields come from the request model: every field is there, a new one appears
with no form code, each posted value reaches the request, the model source is read alone, and
the form routes answer errors as pages (in process; tests/test_web_browser.py drives Chromium)."""

from __future__ import annotations

import html
import io
import json
import math
import re
import shlex
import zipfile
from pathlib import Path

import pytest
from annotated_types import Ge, Gt, Le
from fastapi.testclient import TestClient
from pydantic import Field

from api import form_fields, forms
from api.app import create_app
from api.schemas import ConfigsRequest
from api.settings import Settings
from tests.test_web import Page

HF_CONFIG = Path(__file__).parent / "data" / "hf_configs" / "qwen2.5-7b.json"
FORM_ONLY = {"gpu", "nodes"}  # `gpus` as the form shows it


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(Settings()), raise_server_exceptions=False)


def form(**changes: str) -> forms.FormState:
    """A parsed form: the defaults, with `changes` posted."""
    state = forms.parse_body(b"")
    state.values.update(changes)
    return state


def test_every_request_field_is_a_form_field_and_rendered(client):
    names = {f.name for f in form_fields.fields()}
    assert names == (set(ConfigsRequest.model_fields) - {"gpus"}) | FORM_ONLY
    page = Page(client.get("/").text)
    for name in names:
        assert name in page.by_id, f"{name} is not on the page"
    for value, _, _ in form_fields.SOURCES:
        assert page.by_id[f"source-{value}"]["type"] == "radio"
    # RecommendRequest's newest fields are there, from the model alone.
    assert page.by_id["code_changes"]["type"] == "checkbox"
    assert page.by_id["nvme_tib"]["inputmode"] == "decimal"


def test_a_new_request_field_appears_folded_in_its_group_with_no_form_code():
    class Future(ConfigsRequest):
        warp_drive: bool = Field(default=False, json_schema_extra={"x-group": "workload"})
        """Engage the warp drive."""
        pipeline_stages: int | None = Field(default=None, gt=0, le=64,
                                            json_schema_extra={"x-group": "cluster"})
        """Pipeline-parallel stages."""

    groups = {g.key: g for g in form_fields.build_groups(form_fields.build_fields(Future))}
    warp = next(f for f in groups["workload"].advanced if f.name == "warp_drive")
    assert (warp.widget, warp.label, warp.hint, warp.flag, warp.default) == (
        "check", "Warp drive", "Engage the warp drive.", "--warp-drive", "false")
    stages = next(f for f in groups["cluster"].advanced if f.name == "pipeline_stages")
    assert (stages.widget, stages.inputmode, stages.hint) == ("text", "numeric", "Pipeline-parallel stages.")


def test_groups_follow_x_group_and_fold_all_but_the_common_fields():
    groups = {g.key: g for g in form_fields.groups()}
    assert list(groups) == ["model", "cluster", "workload", "strategy", "config"]
    assert [f.name for f in groups["cluster"].basic] == ["gpu", "gpus_per_node", "nodes", "inter_node_gbps"]
    assert {"cpu_ram_gib", "nvme_gbps", "nvme_tib", "profile"} <= {f.name for f in groups["cluster"].advanced}
    assert {"micro_batch", "grad_accum", "act_ckpt", "optimizer", "master_weights", "flash_attention",
            "compile", "sync_each_micro_batch", "fused_loss", "fsdp_version", "code_changes"} <= {
        f.name for f in groups["workload"].advanced}
    assert not groups["model"].advanced  # the model's sources switch instead
    assert {f.source for f in groups["model"].basic} == {"params", "preset", "hf_config", "shape"}


# One valid value other than the default for each field; text fields of the shape need the rest.
SAMPLES = {"params": "7B", "model": "qwen2.5-7b", "layers": "32", "hidden": "4096", "heads": "32",
           "kv_heads": "8", "ffn": "14336", "vocab": "128256", "gpus_per_node": "4", "inter_node_gbps": "400",
           "cpu_ram_gib": "512", "nvme_gbps": "200", "nvme_tib": "30", "profile": "none", "seq_len": "2k",
           "micro_batch": "2", "grad_accum": "4", "global_batch_tokens": "2M", "tokens": "300B",
           "nvme_path": "/local_nvme"}
SHAPE = {k: SAMPLES[k] for k in ("layers", "hidden", "heads", "ffn", "vocab")}


def _sample(f: form_fields.FormField) -> str:
    if f.name in SAMPLES:
        return SAMPLES[f.name]
    if f.widget == "check":
        return "false" if f.default == "true" else "true"
    if f.widget == "checks":
        return f.choices[0][0]
    if f.widget == "select":
        return next(v for v, _ in f.choices[1:] if v != f.default)
    assert f.inputmode, f"give {f.name} a sample value"
    # A number field nobody told this test about: the smallest whole number its bounds allow, past 1.
    low, high = 2, float("inf")
    for meta in ConfigsRequest.model_fields[f.name].metadata:
        if isinstance(meta, Gt | Ge):
            low = max(low, math.ceil(meta.gt + 1 if isinstance(meta, Gt) else meta.ge))
        elif isinstance(meta, Le):
            high = meta.le
    assert low <= high, (f.name, low, high)
    return str(low)


@pytest.mark.parametrize("f", [f for f in form_fields.fields()
                               if f.name not in ("hf_config", "gpu", "nodes")], ids=lambda f: f.name)
def test_each_field_reaches_the_request(f):
    source = f.source or "params"
    state = form(model_source=source, **{**(SHAPE if source == "shape" else {}), f.name: _sample(f)})
    req = forms.validate(state)
    assert req is not None, state.errors
    got = getattr(req, f.name)
    default = ConfigsRequest.model_fields[f.name].default
    assert got is not None and got != default, (f.name, got)


def test_the_cluster_is_gpu_type_x_per_node_x_nodes():
    assert forms.validate(form(gpu="H100-80GB", gpus_per_node="4", nodes="3")).gpus == "3x4xH100-80GB"
    # blank GPUs per node: the GPU's typical server (an NVL72 rack for GB200)
    assert forms.validate(form(gpu="GB200", gpus_per_node="", nodes="2")).gpus == "2x72xGB200"


def test_only_the_chosen_model_source_is_read(client):
    req = forms.validate(form(model_source="preset", model="llama-3-8b", params="13B", layers="7"))
    assert req is not None and (req.model, req.params, req.layers) == ("llama-3-8b", None, None)
    req = forms.validate(form(model_source="shape", params="13B", **SHAPE))
    assert req is not None and (req.params, req.layers, req.kv_heads) == (None, 32, None)
    r = client.post("/", data={"model_source": "shape", "layers": "32"})  # the rest missing
    assert r.status_code == 422 and "err-hidden" in Page(r.text).by_id and "required" in r.text
    state = form(model_source="params", params="")
    assert forms.validate(state) is None and "params" in state.errors  # said where the user looks


def test_boxes_post_false_when_unticked_and_lists_join():
    # A check posts its hidden "false", then "true" when ticked: the last one counts.
    state = forms.parse_body(b"compile=false&compile=true&flash_attention=false&model_source=params")
    req = forms.validate(state)
    assert req is not None and req.compile is True and req.flash_attention is False
    assert req.master_weights is True  # not posted at all: the default
    state = forms.parse_body(b"strategies=&strategies=fsdp&strategies=zero3")
    assert forms.validate(state).strategies == ["fsdp", "zero3"]
    state = forms.parse_body(b"strategies=fsdp,zero2")  # the download form's hidden copy
    assert forms.validate(state).strategies == ["fsdp", "zero2"]
    state = forms.parse_body(b"strategies=")  # every box unticked
    assert forms.validate(state) is None and "choose at least one" in state.errors["strategies"]


@pytest.mark.parametrize(("changes", "field", "text"), [
    ({"strategies": '<script>x</script>'}, "strategies", "Input should be &#39;ddp&#39;"),
    ({"fsdp_version": "3"}, "fsdp_version", "1 or 2"),
    ({"compile": "maybe"}, "compile", "boolean"),
    ({"code_changes": "false", "fused_loss": "true"}, "code_changes", "--fused-loss"),
    ({"model_source": "<b>", "params": "x"}, "params", "not a number"),  # unknown source: parameters
    ({"nvme_path": "relative/dir"}, "nvme_path", "absolute"),
])
def test_bad_values_of_the_generated_fields_are_refused_by_their_field(client, changes, field, text):
    r = client.post("/", data={"params": "7B", "gpu": "A100-80GB", "nodes": "1", **changes})
    assert r.status_code == 422, r.text[-1500:]
    page = Page(r.text)
    assert f"err-{field}" in page.by_id and text in r.text, r.text[-3000:]
    assert "<script>x" not in r.text and "<b>" not in r.text
    group = form_fields.by_name()[field].group
    folded = [g.key for g in form_fields.groups() if any(f.name == field for f in g.advanced)]
    if folded:  # an error in a fold opens it
        assert "open" in page.by_id[f"more-{folded[0]}"], (field, group)


def _multipart(fields: dict[str, str], upload: bytes, filename: str = "config.json") -> tuple[bytes, str]:
    boundary = "----advisor-test-boundary"
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
             for k, v in fields.items()]
    head = (f'--{boundary}\r\nContent-Disposition: form-data; name="hf_config_file"; '
            f'filename="{filename}"\r\nContent-Type: application/json\r\n\r\n')
    parts.append(head.encode() + upload + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def test_an_uploaded_config_json_is_the_model(client):
    body, ctype = _multipart({"model_source": "hf_config", "gpu": "A100-80GB", "nodes": "1"},
                             HF_CONFIG.read_bytes(), "qwen <b>.json")
    r = client.post("/", content=body, headers={"content-type": ctype})
    assert r.status_code == 200, r.text[-2000:]
    assert "(qwen2)" in r.text  # the model line names the family read from the file
    assert "Read qwen &lt;b&gt;.json" in r.text  # the file name, escaped
    page = Page(r.text)
    assert page.by_id["hf_config"]["tag"] == "textarea"
    assert json.loads(HF_CONFIG.read_text())["hidden_size"] == 3584
    assert "&#34;hidden_size&#34;: 3584" in r.text  # the file's text, in the box
    body, ctype = _multipart({"model_source": "hf_config"}, b"\xff\xfe not text")
    r = client.post("/", content=body, headers={"content-type": ctype})
    assert r.status_code == 422 and "could not be read" in r.text
    r = client.post("/", content=b"--x\r\ngarbage",
                    headers={"content-type": "multipart/form-data; boundary=y"})
    assert r.status_code == 422 and "could not be read" in r.text


def test_form_routes_answer_errors_as_pages_and_the_api_keeps_json(client):
    big = b"model_source=hf_config&hf_config=" + b"a" * (300 * 1024)
    r = client.post("/", content=big, headers={"content-type": forms.URLENCODED})
    assert r.status_code == 413 and r.headers["content-type"].startswith("text/html")
    assert "Too much data" in r.text and "256 KiB" in r.text and 'id="back"' in r.text
    r = client.post("/v1/recommend", content=b"{" + b" " * (300 * 1024) + b"}",
                    headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["code"] == "body_too_large"
    r = client.get("/bundle")
    assert r.status_code == 405 and r.headers["allow"] == "POST" and "<h2" in r.text
    r = client.put("/")
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD, POST"
    r = client.post("/bundle", content=b"<x/>", headers={"content-type": "application/xml"})
    assert r.status_code == 415 and "Not a form submission" in r.text


NVME_JOB = {"model_source": "params", "params": "70B", "gpu": "A100-80GB", "nodes": "1",
            "strategies": "zero3-nvme"}


def test_an_nvme_plan_asks_for_its_path_and_then_downloads(client):
    r = client.post("/", data=NVME_JOB)
    assert r.status_code == 200
    page = Page(r.text)
    assert page.by_id["bundle-nvme_path"]["name"] == "nvme_path"  # asked for in the download box
    assert not [a for t, a in page.tags if a.get("type") == "hidden" and a.get("name") == "nvme_path"]
    r = client.post("/bundle", data=NVME_JOB)
    assert r.status_code == 422 and r.headers["content-type"].startswith("text/html")
    page = Page(r.text)
    assert "err-bundle-nvme_path" in page.by_id and "NVMe" in r.text
    assert page.by_id["bundle-nvme_path"]["aria-invalid"] == "true"
    assert "result-title" in page.by_id  # the results stay on the page
    r = client.post("/bundle", data={**NVME_JOB, "nvme_path": "relative/dir"})
    assert r.status_code == 422 and "err-bundle-nvme_path" in Page(r.text).by_id
    r = client.post("/bundle", data={**NVME_JOB, "nvme_path": "/local_nvme"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(r.content)) as archive:
        ds = json.loads(archive.read("ds_config.json"))
    assert ds["zero_optimization"]["offload_param"]["nvme_path"] == "/local_nvme"


def test_a_row_button_downloads_that_strategys_plan(client):
    r = client.post("/", data={"params": "13B", "gpu": "A100-80GB", "nodes": "1"})
    page = Page(r.text)
    zips = [a for t, a in page.tags if t == "button" and a.get("class") == "zip"]
    assert {a["value"] for a in zips} >= {"fsdp", "zero3", "zero2"}
    assert all(a["form"] == "bundle" for a in zips)
    r = client.post("/bundle", data={"params": "13B", "gpu": "A100-80GB", "nodes": "1", "strategy": "zero2"})
    with zipfile.ZipFile(io.BytesIO(r.content)) as archive:
        assert json.loads(archive.read("ds_config.json"))["zero_optimization"]["stage"] == 2


def test_the_command_line_shown_writes_the_files_the_download_gives(client, tmp_path, capsys):
    from advisor.cli.main import main

    job = {"params": "7B", "gpu": "H100-80GB", "nodes": "2", "seq_len": "2k", "compile": "true",
           "tokens": "300B", "strategies": ["", "fsdp", "zero2", "zero3"], "sync_each_micro_batch": "false"}
    r = client.post("/", data=job)
    command = html.unescape(re.search(r'<pre id="command"><code>(.*?)</code>', r.text).group(1))
    argv = shlex.split(command)
    assert argv[:2] == ["advisor", "recommend"] and argv[-2:] == ["--out", "plan/"]
    assert {"--compile", "--no-sync-each-micro-batch", "2k", "fsdp,zero2,zero3"} <= set(argv)
    out = tmp_path / "plan"
    assert main([*argv[1:-2], "--out", str(out)]) == 0, capsys.readouterr().err
    with zipfile.ZipFile(io.BytesIO(client.post("/bundle", data=job).content)) as archive:
        names = set(archive.namelist())
        assert names == {p.name for p in out.iterdir()}
        for name in names & {"training_args.json", "ds_config.json", "accelerate_config.yaml", "plan.json"}:
            assert archive.read(name).decode() == (out / name).read_text(), name
