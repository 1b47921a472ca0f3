"""Load benchmark: N concurrent clients against `advisor serve` on loopback.

Starts the server (or targets --url), warms it up, then sends a fixed number of requests per
endpoint from N keep-alive clients and prints p50 / p90 / p99 / max latency, requests/s, errors
and the server's CPU time per request, against the targets (p50 <= 10 ms for /v1/estimate,
p99 <= 100 ms for /v1/recommend at 32 clients, no errors). The client is asyncio over raw
HTTP/1.1 (stdlib only) so that it takes as little as possible of the CPU it shares with the
server. Latency depends on whatever else runs on the machine; CPU per request does not.

Jobs cycle through a fixed set of realistic requests, so after warm-up the server answers from
its result cache (what repeated calls from dashboards and CI cost). --distinct makes every
request unique (a different `tokens` value: the same search cost, a new cache key) to measure
the cost of the search itself.

    python benchmarks/load.py                       # both endpoints, 32 clients, 2000 requests each
    python benchmarks/load.py --distinct --workers 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from itertools import cycle, product
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[1]
TARGETS = {"estimate": ("p50", 10.0), "recommend": ("p99", 100.0)}  # ms, at 32 clients
STRATEGIES = ("ddp", "zero1", "zero2", "zero3", "zero3-offload", "fsdp", "fsdp-grad-op", "hsdp")
CLUSTERS = ("8xA100", "2x8xH100", "8xL40S", "4x8xH100", "8xA100-40GB", "16x8xH200")
MODELS = ({"params": 1.3e9}, {"params": 7e9}, {"model": "llama-3-8b"}, {"params": 13e9},
          {"model": "mistral-7b"}, {"model": "llama-3-70b"}, {"params": 30e9}, {"model": "qwen2.5-14b"})


def jobs(endpoint: str) -> list[dict]:
    """48 distinct realistic requests per endpoint."""
    out = []
    for i, (model, gpus) in enumerate(product(MODELS, CLUSTERS)):
        job = {**model, "gpus": gpus, "seq_len": (2048, 4096, 8192)[i % 3]}
        if endpoint == "estimate":
            job["strategy"] = STRATEGIES[i % len(STRATEGIES)]
        out.append(job)
    return out


def payloads(endpoint: str, count: int, distinct: bool, offset: int) -> list[bytes]:
    base = cycle(jobs(endpoint))
    return [json.dumps({**next(base), **({"tokens": 1e12 + offset + i} if distinct else {})}).encode()
            for i in range(count)]


class Client:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> int:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self.writer.write(f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: "
                          f"application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        await self.writer.drain()
        status = int((await self.reader.readline()).split()[1])
        length, close = 0, False
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
            elif name.lower() == "connection" and value.strip().lower() == "close":
                close = True
        await self.reader.readexactly(length)
        if close:
            await self.close()
        return status

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


async def run_load(url: str, path: str, bodies: list[bytes], clients: int) -> tuple[list[float], int, float]:
    """Send every body once from `clients` concurrent connections; latencies in seconds."""
    parts = urlsplit(url)
    queue = iter(bodies)
    latencies: list[float] = []
    errors = 0

    async def worker() -> None:
        nonlocal errors
        client = Client(parts.hostname, parts.port)
        for body in queue:
            start = time.perf_counter()
            try:
                status = await client.post(path, body)
            except (OSError, ValueError, asyncio.IncompleteReadError):
                status = 0
                await client.close()
            latencies.append(time.perf_counter() - start)
            errors += status != 200
        await client.close()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    return latencies, errors, time.perf_counter() - start


def percentile(sorted_values: list[float], q: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(q / 100 * len(sorted_values)) - 1))
    return sorted_values[index]


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of `pid` and its direct children (uvicorn's workers), from
    /proc: unlike latency, it does not depend on what else runs on the machine."""
    if pid is None or not Path("/proc/self/stat").exists():
        return None
    tick, total = os.sysconf("SC_CLK_TCK"), 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(stat.parent.name) == pid or int(fields[1]) == pid:  # fields[1]: ppid
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def start_server(workers: int) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "advisor.cli.main", "serve", "--port", str(port),
                             "--workers", str(workers), "--log-level", "warning"], cwd=REPO)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1):
                return proc, url
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise SystemExit("advisor serve did not start")


def report(endpoint: str, latencies: list[float], errors: int, wall_s: float, clients: int,
           cpu_s: float | None) -> bool:
    ms = sorted(1e3 * t for t in latencies)
    stats = {q: percentile(ms, q) for q in (50, 90, 99)}
    which, limit = TARGETS[endpoint]
    value = stats[int(which[1:])]
    ok = value <= limit and errors == 0
    print(f"/v1/{endpoint:<9} clients {clients:>3}  requests {len(ms):>6}  p50 {stats[50]:7.2f} ms  "
          f"p90 {stats[90]:7.2f} ms  p99 {stats[99]:7.2f} ms  max {ms[-1]:7.2f} ms  "
          f"{len(ms) / wall_s:8.1f} req/s  errors {errors}")
    if cpu_s is not None:
        print(f"  server CPU {1e3 * cpu_s / len(ms):.3f} ms per request (the capacity of one core: "
              f"{len(ms) / cpu_s if cpu_s else float('inf'):,.0f} req/s)")
    verdict = "meets" if ok else "MISSES"
    print(f"  target {which} <= {limit:g} ms, 0 errors (at 32 clients): {verdict} ({value:.2f} ms)")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="an already running server (default: start advisor serve)")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn workers when starting one")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=2000, help="timed requests per endpoint")
    parser.add_argument("--warmup", type=int, default=200, help="untimed requests per endpoint")
    parser.add_argument("--endpoint", choices=("estimate", "recommend", "both"), default="both")
    parser.add_argument("--distinct", action="store_true",
                        help="every request unique: measures the search, not the cache")
    args = parser.parse_args(argv)
    if not (1 <= args.clients <= 1024 and 1 <= args.requests <= 1_000_000 and args.warmup >= 0):
        parser.error("--clients 1..1024, --requests 1..1e6, --warmup >= 0")

    proc, url = (None, args.url) if args.url else start_server(args.workers)
    endpoints = ("estimate", "recommend") if args.endpoint == "both" else (args.endpoint,)
    mode = "distinct requests (cold cache)" if args.distinct else "a cycle of 48 requests (cached)"
    print(f"advisor serve at {url}, {os.cpu_count()} CPUs, {mode}")
    all_ok = True
    try:
        for endpoint in endpoints:
            path = f"/v1/{endpoint}"
            warm = payloads(endpoint, args.warmup, args.distinct, offset=0)
            asyncio.run(run_load(url, path, warm, min(args.clients, max(1, len(warm)))))
            timed = payloads(endpoint, args.requests, args.distinct, offset=args.warmup)
            pid = proc.pid if proc is not None else None
            cpu_before = cpu_seconds(pid)
            latencies, errors, wall = asyncio.run(run_load(url, path, timed, args.clients))
            cpu_after = cpu_seconds(pid)
            cpu = cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else None
            all_ok &= report(endpoint, latencies, errors, wall, args.clients, cpu)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
    print("reproduce: python " + shlex.join(["benchmarks/load.py", *(argv if argv is not None
                                                                      else sys.argv[1:])]))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
