"""The web form in process: labels, results, field errors next to their fields, escaping."""

from __future__ import annotations

import io
import json
import zipfile
from html.parser import HTMLParser

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import Settings

FORM = {"model_source": "params", "params": "13B", "gpu": "A100-80GB", "gpus_per_node": "8",
        "nodes": "1", "seq_len": "4096"}
XSS = '<script>alert("x")</script>'


class Page(HTMLParser):
    """Elements by id, labels by target, and every tag seen."""

    def __init__(self, html: str):
        super().__init__()
        self.by_id: dict[str, dict[str, str | None]] = {}
        self.label_for: set[str] = set()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if a.get("id"):
            self.by_id[a["id"]] = {"tag": tag, **a}
        if tag == "label" and a.get("for"):
            self.label_for.add(a["for"])


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(Settings()), raise_server_exceptions=False)


def submit(client, **changes):
    return client.post("/", data={**FORM, **changes})


def test_every_field_is_labelled_and_no_script(client):
    r = client.get("/")
    assert r.status_code == 200
    page = Page(r.text)
    fields = [a for tag, a in page.tags if tag in ("input", "select", "textarea")
              and a.get("type") not in ("hidden", "submit")]
    assert len(fields) >= 40
    for a in fields:
        assert a.get("id") in page.label_for, f"{a} has no label"
    assert 'enctype="multipart/form-data"' in r.text  # the config.json upload
    assert not [t for t, _ in page.tags if t == "script"]
    assert client.get("/static/style.css").status_code == 200
    assert client.head("/").status_code == 200


def test_result_page_has_table_charts_and_download(client):
    r = submit(client)
    assert r.status_code == 200
    page = Page(r.text)
    assert page.by_id["chosen"]["tag"] == "span"
    assert r.text.count("<tr class=") == 11  # one row per strategy
    for chart in ("memory-chart", "throughput-chart", "sweep-throughput-chart", "sweep-memory-chart"):
        assert page.by_id[chart]["tag"] == "figure"
    assert 'class="capacity"' in r.text and "capacity 80.0 GiB" in r.text
    assert page.by_id["download"]["tag"] == "button"
    assert page.by_id["results"]["tag"] == "section"
    assert page.by_id["submit"]["formaction"] == "/#results"  # the page opens at the results
    # The form keeps what was typed.
    assert page.by_id["params"]["value"] == "13B"


def test_invalid_input_rerenders_with_the_message_next_to_the_field(client):
    r = submit(client, params="abc", seq_len="0")
    assert r.status_code == 422
    page = Page(r.text)
    for name in ("params", "seq_len"):
        assert page.by_id[name]["aria-invalid"] == "true"
        assert f"err-{name}" in page.by_id[name]["aria-describedby"]
        assert f"err-{name}" in page.by_id
    assert "not a number" in r.text
    assert page.by_id["params"]["value"] == "abc"
    assert "result-title" not in page.by_id


@pytest.mark.parametrize(("changes", "field", "text"), [
    ({"nodes": "0"}, "nodes", "1 to"),
    ({"gpus_per_node": "73"}, "gpus_per_node", "&lt;= 72"),
    ({"gpus_per_node": "x"}, "gpus_per_node", "integer"),
    ({"gpu": "A1000"}, "gpu", "A100-80GB"),
    ({"model_source": "hf_config", "hf_config": "{oops"}, "hf_config", "not valid JSON"),
    ({"model_source": "hf_config", "hf_config": ""}, "hf_config", "paste"),
    ({"model_source": "preset", "model": "nope"}, "model", "llama-3-8b"),
    ({"precision": "fp8"}, "precision", "bf16"),
    ({"global_batch_tokens": "3"}, "global_batch_tokens", "multiple"),
    ({"tokens": "-1"}, "tokens", "&gt; 0"),  # escaped, as all text
    ({"inter_node_gbps": "NaN"}, "inter_node_gbps", "finite"),
    ({"nodes": "²"}, "nodes", "whole number"),
    ({"nodes": "9" * 5000}, "nodes", "whole number"),
    ({"model_source": "hf_config", "hf_config": "[" * 50_000}, "hf_config", "nesting"),
    ({"model_source": "hf_config", "hf_config": '{"hidden_size": ' + "9" * 5000 + "}"},
     "hf_config", "too long"),
    ({"model_source": "hf_config", "hf_config": "[1, 2]"}, "hf_config", "dictionary"),
])
def test_field_errors(client, changes, field, text):
    r = submit(client, **changes)
    assert r.status_code == 422, r.text[:500]
    page = Page(r.text)
    assert f"err-{field}" in page.by_id, (field, r.text[:2000])
    assert text in r.text


def test_user_input_is_escaped(client):
    config = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
              "num_hidden_layers": 32, "intermediate_size": 11008, "vocab_size": 32000,
              "_name_or_path": XSS}
    r = submit(client, model_source="hf_config", hf_config=json.dumps(config))
    assert r.status_code == 200
    assert "<script" not in r.text
    assert "&lt;script&gt;alert(" in r.text  # the name shows, as text
    r = submit(client, params=XSS, tokens='"><img src=x onerror=alert(1)>')
    assert r.status_code == 422
    assert "<script" not in r.text and "<img src=x" not in r.text


def test_preset_and_multi_node(client):
    r = submit(client, model_source="preset", model="llama-3-70b", gpu="H100-80GB", nodes="4",
               global_batch_tokens="4M", tokens="1T")
    assert r.status_code == 200
    assert "32 × H100-80GB (4 nodes of 8" in r.text
    assert "days" in r.text or " h<" in r.text  # time to train is shown


def test_form_rejects_other_content_and_floods(client):
    r = client.post("/", content=b"{}", headers={"content-type": "application/json"})
    assert r.status_code == 415 and r.headers["content-type"].startswith("text/html")
    assert "Not a form submission" in r.text and 'href="/"' in r.text
    flood = "&".join(f"f{i}=1" for i in range(500))
    r = client.post("/", content=flood.encode(),
                    headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 422 and "could not be read" in r.text


def test_bundle_download(client):
    r = client.post("/bundle", data={**FORM, "model_source": "preset", "model": "llama-3-8b"})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/zip"
    assert "attachment" in r.headers["content-disposition"]
    with zipfile.ZipFile(io.BytesIO(r.content)) as archive:
        assert archive.namelist()
