"""The API as users run it: `advisor serve` (uvicorn) in its own process on loopback, driven
over real HTTP. Starts on a free port, polls /healthz, and terminates the server at the end."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 30


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(*extra: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`advisor serve` on a free loopback port; yields its base URL once /healthz answers."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "advisor.cli.main", "serve", "--port", str(port), "--log-level",
         "warning", *extra], cwd=REPO, env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"advisor serve exited {proc.returncode}:\n{proc.stdout.read()}")
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("advisor serve did not answer /healthz") from None
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def request(base: str, method: str, path: str, body: bytes | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(base + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()


def post_json(base: str, path: str, payload: object) -> tuple[int, dict, object]:
    status, headers, raw = request(base, "POST", path, json.dumps(payload).encode(),
                                   {"content-type": "application/json"})
    return status, headers, json.loads(raw)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serve() as base:
        yield base


def test_estimate_and_recommend_over_http(server):
    status, _, body = post_json(server, "/v1/estimate", {"params": 13e9, "gpus": "8xA100"})
    assert status == 200 and body["fits"] is True
    status, headers, body = post_json(server, "/v1/recommend", {"model": "llama-3-8b",
                                                                "gpus": "2x8xH100"})
    assert status == 200 and body["chosen"]
    assert headers["content-type"] == "application/json"
    assert "server" not in headers  # uvicorn's banner is off


def test_errors_over_http_use_the_error_schema(server):
    status, headers, body = post_json(server, "/v1/estimate", {"params": -1, "gpus": "8xA100"})
    assert status == 422 and body["field"] == "params"
    assert headers["x-content-type-options"] == "nosniff"
    status, _, raw = request(server, "GET", "/v1/missing")
    assert status == 404 and json.loads(raw)["code"] == "not_found"


def test_body_limit_over_http(server):
    # A declared Content-Length over the limit is answered before the body is read (the server
    # then closes: a client still writing the body would see a broken pipe, so none is sent).
    host, port = server.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.putrequest("POST", "/v1/estimate")
    conn.putheader("content-type", "application/json")
    conn.putheader("content-length", "300000")
    conn.endheaders()
    response = conn.getresponse()
    assert response.status == 413 and json.loads(response.read())["code"] == "body_too_large"
    conn.close()
    # Chunked, no Content-Length: still stopped.
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("POST", "/v1/estimate", body=iter([b"{" + b" " * 65536] * 5),
                 headers={"content-type": "application/json", "transfer-encoding": "chunked"},
                 encode_chunked=True)
    assert conn.getresponse().status == 413
    conn.close()


def test_web_form_over_http(server):
    status, headers, raw = request(server, "GET", "/")
    assert status == 200 and b'<form method="post" action="/"' in raw
    assert "text/html" in headers["content-type"]
    form = b"model_source=params&params=13B&gpu=A100-80GB&gpus_per_node=8&nodes=1&seq_len=4096"
    status, _, raw = request(server, "POST", "/", form,
                             {"content-type": "application/x-www-form-urlencoded"})
    assert status == 200 and b'id="ranking"' in raw and b'id="memory-chart"' in raw


def test_concurrent_clients_all_succeed(server):
    jobs = [{"params": p * 1e9, "gpus": g} for p in (1, 7, 13, 70) for g in ("8xA100", "2x8xH100")]

    def call(job):
        return post_json(server, "/v1/recommend", job)[0]

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(call, jobs * 2)) == [200] * (2 * len(jobs))


def test_worst_case_recommend_over_http_answers(server):
    """Inputs at their bounds get an answer over real HTTP (within the client's timeout); the
    time of the worst cases is measured by `python benchmarks/speed.py` (target 1 s)."""
    status, _, body = post_json(server, "/v1/recommend", {"params": 1e13, "gpus": "65536xH100",
                                                          "seq_len": 1048576, "tokens": 1e16})
    assert status in (200, 422)
    assert status == 422 or body["estimates"]


def test_cors_origins_from_the_environment():
    with serve(env={"ADVISOR_CORS_ORIGINS": "https://tools.internal"}) as base:
        status, headers, _ = request(base, "OPTIONS", "/v1/estimate", headers={
            "origin": "https://tools.internal", "access-control-request-method": "POST"})
        assert status == 200
        assert headers["access-control-allow-origin"] == "https://tools.internal"


def test_several_workers_answer_without_delayed_ack_stalls():
    # With Nagle's algorithm on (uvicorn's own multi-worker socket), every keep-alive response
    # waited ~40 ms for the client's delayed ACK; advisor serve binds a TCP_NODELAY-able socket.
    with serve("--workers", "2") as base:
        host, port = base.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        body = json.dumps({"params": 7e9, "gpus": "8xA100"})
        times = []
        for _ in range(21):
            start = time.perf_counter()
            conn.request("POST", "/v1/estimate", body=body, headers={"content-type": "application/json"})
            response = conn.getresponse()
            response.read()
            assert response.status == 200
            times.append(time.perf_counter() - start)
        conn.close()
        assert sorted(times)[10] < 0.030, f"median {1e3 * sorted(times)[10]:.1f} ms"
