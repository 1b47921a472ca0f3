"""Predicted vs measured: per-GPU peak memory and step time of real strategy runs, with the
advisor's shipped priors (before) and a profile's (after), as a table, markdown or HTML.

What "measured memory" is, the worst rank's, against the advisor's per-GPU total:
    GPU       peak reserved bytes plus device memory torch did not reserve (CUDA context, NCCL)
    CPU mode  the peak of live tensor bytes (torch's MemTracker, calibration/strategy_runs.py).
              The host has no CUDA context, NCCL or caching allocator: the calibrated overheads
              are 0, while the shipped priors (before) still add a GPU's.

No torch here: `advisor validate` imports this and runs the strategies through torchrun.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import jinja2

from advisor.core.engines import DdpConfig, EngineConfig, FsdpConfig, ZeroConfig
from advisor.core.hardware import ClusterOverrides, parse_cluster
from advisor.core.model import ModelSpec
from advisor.core.priors import Priors, default_priors
from advisor.core.protocol import make_context
from advisor.core.units import GiB, MiB
from advisor.core.workload import Workload
from advisor.profiles import standin as device
from advisor.profiles.schema import Profile, apply_overrides, architecture_of, with_stand_in
from advisor.strategies import STRATEGY_NAMES, get_strategy


def runnable(config: EngineConfig) -> bool:
    """Whether calibration/strategy_runs.py can run this engine config: DDP, FSDP2 FULL_SHARD on
    the GPU, DeepSpeed ZeRO-1/2/3 with at most the optimizer offloaded to the CPU."""
    if isinstance(config, FsdpConfig):
        return config.version == 2 and config.sharding == "FULL_SHARD" and not config.cpu_offload
    if isinstance(config, ZeroConfig):
        return config.offload_params is None and config.offload_optimizer in (None, "cpu")
    return isinstance(config, DdpConfig)


def engine_config_of(name: str, model: ModelSpec, world: int) -> EngineConfig:
    """The engine config strategy `name` asks for, for `model` on `world` ranks of one node."""
    strategy = get_strategy(name)
    cluster = parse_cluster(f"{world}xA100", ClusterOverrides(gpus_per_node=world))
    return strategy.engine_config(make_context(cluster, model, Workload(), default_priors(), strategy))


@cache
def runnable_strategies() -> tuple[str, ...]:
    """Strategies calibration/strategy_runs.py can run (advisor names), in registry order. Any
    small model gives the same answer: runnable() reads only the kind of config."""
    probe = ModelSpec(name="probe", layers=1, hidden=64, heads=1, kv_heads=1, ffn=128, vocab=256)
    return tuple(n for n in STRATEGY_NAMES if runnable(engine_config_of(n, probe, 2)))
CPU_MEMORY_TOLERANCE = 0.15
"""Stated bound on |predicted - measured| / measured, calibrated, for the CPU runs of ddp, fsdp,
zero1-3 (tests). zero2-offload is outside it in CPU mode: its "offloaded" state stays in the
same host memory, which the model counts on the CPU side."""


@dataclass(frozen=True, slots=True)
class Row:
    strategy: str
    measured_memory_bytes: float
    memory_before_bytes: float
    memory_after_bytes: float
    measured_step_s: float
    step_before_s: float
    step_after_s: float
    step_low_s: float
    """Low end of the calibrated prediction's range (1 sigma)."""
    step_high_s: float

    @staticmethod
    def error(predicted: float, measured: float) -> float:
        """Signed relative error, (predicted - measured) / measured."""
        return (predicted - measured) / measured


@dataclass(frozen=True, slots=True)
class Validation:
    profile: str
    device: str
    model: str
    workload: str
    memory_kind: str
    rows: list[Row]
    notes: list[str]


def priors_pair(profile: Profile) -> tuple[Priors, Priors]:
    """(shipped priors, profile's priors). A measured stand-in device has no shipped values:
    the 'ampere' ones stand in before calibration."""
    before = with_stand_in(default_priors(), architecture_of(profile))
    return before, apply_overrides(before, profile.overrides, profile.name)


def compare(profile: Profile, runs: dict) -> Validation:
    """Rows for every strategy in `runs` (the `measure` JSON's "runs")."""
    per_node = min(runs["world"], profile.fingerprint.gpus_per_node)
    cluster = device.profile_cluster(profile.catalog_gpu, profile.device_spec, per_node,
                                  runs["world"] // per_node)
    before, after = priors_pair(profile)
    cpu = profile.fingerprint.device == "cpu"
    rows = []
    for run in runs["runs"]:
        est_b = device.predict(cluster, runs, run["strategy"], before)
        est_a = device.predict(cluster, runs, run["strategy"], after)
        if cpu:
            measured = max(r["peak_tracked_bytes"] for r in run["ranks"])
        else:
            measured = max(r["peak_reserved_bytes"] + r["non_torch_bytes"] for r in run["ranks"])
        rows.append(Row(strategy=run["strategy"], measured_memory_bytes=measured,
                        memory_before_bytes=est_b.memory.per_gpu_bytes.total,
                        memory_after_bytes=est_a.memory.per_gpu_bytes.total,
                        measured_step_s=run["median_step_s"], step_before_s=est_b.time.step_s,
                        step_after_s=est_a.time.step_s, step_low_s=est_a.time.low_s,
                        step_high_s=est_a.time.high_s))
    m = runs["model"]
    notes = []
    if cpu and any(r.strategy.endswith("offload") for r in rows):
        notes.append("CPU mode: offloaded optimizer state stays in the same host memory the run is "
                     "measured in, while the model counts it on the host side: offload rows read low")
    if cpu:
        notes.append("CPU mode: the shipped priors add a GPU's CUDA context and NCCL buffers, which "
                     "the host does not have; the calibrated overheads are 0")
    return Validation(
        profile=profile.name, device=f"{runs['world']} x {profile.fingerprint.gpu_name}",
        model=(f"{m['layers']} layers, hidden {m['hidden']}, heads {m['heads']}/{m['kv_heads']}, "
               f"ffn {m['ffn']}, vocab {m['vocab']}"),
        workload=(f"micro-batch {runs['micro_batch']} x sequence {runs['seq_len']}, bf16, AdamW, "
                  f"{runs['steps']} timed steps"),
        memory_kind=("peak live tensor bytes, worst rank (CPU mode: torch MemTracker; no CUDA "
                     "context, NCCL or caching allocator here)" if cpu
                     else "peak reserved + non-torch device memory, worst rank"),
        rows=rows, notes=notes)


def _bytes(n: float) -> str:
    return f"{n / GiB:.2f} GiB" if n >= GiB else f"{n / MiB:.2f} MiB"


def _pct(x: float) -> str:
    return f"{100 * x:+.0f}%"


HEADER = ("strategy", "memory measured", "predicted before", "err", "predicted after", "err",
          "step measured", "predicted before", "err", "predicted after (range)", "err")


def table_rows(v: Validation) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for r in v.rows:
        e = Row.error
        out.append((r.strategy, _bytes(r.measured_memory_bytes), _bytes(r.memory_before_bytes),
                    _pct(e(r.memory_before_bytes, r.measured_memory_bytes)), _bytes(r.memory_after_bytes),
                    _pct(e(r.memory_after_bytes, r.measured_memory_bytes)),
                    f"{r.measured_step_s * 1e3:.1f} ms", f"{r.step_before_s * 1e3:.1f} ms",
                    _pct(e(r.step_before_s, r.measured_step_s)),
                    f"{r.step_after_s * 1e3:.1f} ms ({r.step_low_s * 1e3:.1f}-{r.step_high_s * 1e3:.1f})",
                    _pct(e(r.step_after_s, r.measured_step_s))))
    return out


def markdown(v: Validation) -> str:
    lines = [f"# Predicted vs measured: profile `{v.profile}`", "",
             f"- device: {v.device}", f"- model run: {v.model}", f"- workload: {v.workload}",
             f"- memory: {v.memory_kind}",
             "- before: the shipped priors; after: the profile's fitted priors",
             *(f"- note: {n}" for n in v.notes), "",
             "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(v)]
    return "\n".join(lines) + "\n"


_HTML = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=True).from_string("""\
<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Validation: {{ v.profile }}</title>
<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td:first-child{text-align:left}</style>
</head><body>
<h1>Predicted vs measured: profile {{ v.profile }}</h1>
<ul><li>device: {{ v.device }}</li><li>model run: {{ v.model }}</li>
<li>workload: {{ v.workload }}</li><li>memory: {{ v.memory_kind }}</li>
<li>before: the shipped priors; after: the profile's fitted priors</li>
{% for n in v.notes %}<li>note: {{ n }}</li>{% endfor %}</ul>
<table><tr>{% for h in header %}<th>{{ h }}</th>{% endfor %}</tr>
{% for row in rows %}<tr>{% for cell in row %}<td>{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</table></body></html>
""")


def html(v: Validation) -> str:
    return _HTML.render(v=v, header=HEADER, rows=table_rows(v))


def measured_summary(profile: Profile) -> str:
    """What calibration measured, next to the catalog's datasheet figure where there is one."""
    m, fp = profile.measurements, profile.fingerprint
    spec = device.gpu_spec(profile.catalog_gpu, None) if profile.catalog_gpu else None
    sheet = (lambda value, unit: f"{value:,.4g} {unit}") if spec else (lambda value, unit: "-")
    best_gemm = max(m["gemm"], key=lambda g: g["flops_per_s"])
    rows = [(f"GEMM, layer matmuls bf16 (best, hidden {best_gemm['hidden']})",
             f"{best_gemm['flops_per_s'] / 1e12:,.4g} TFLOP/s",
             sheet(spec and spec.peak_flops("bf16") / 1e12, "TFLOP/s")),
            ("attention, SDPA causal fwd+bwd", f"{m['attention']['flops_per_s'] / 1e12:,.4g} TFLOP/s", "-"),
            ("memory copy", f"{m['memory']['bytes_per_s'] / 1e9:,.4g} GB/s",
             sheet(spec and spec.hbm_bandwidth_in_GB_per_sec, "GB/s"))]
    for tier in ("intra", "inter"):
        ar = [c for c in m["collectives"] if c["tier"] == tier and c["op"] == "all_reduce"]
        if ar:
            big = max(ar, key=lambda c: c["bytes"])
            link = spec and (spec.intra_node_bandwidth_in_GB_per_sec if tier == "intra"
                             else spec.node.inter_node_in_Gbit_per_sec / 8 / fp.gpus_per_node)
            rows.append((f"all-reduce bus bw, {tier}, {_bytes(big['bytes'])}",
                         f"{big['bus_bytes_per_s'] / 1e9:,.4g} GB/s", sheet(link, "GB/s")))
    hd = m["host_device"]
    rows.append((f"host<->device ({hd['kind']})", f"{hd['h2d_bytes_per_s'] / 1e9:,.4g} / "
                 f"{hd['d2h_bytes_per_s'] / 1e9:,.4g} GB/s", sheet(spec and spec.pcie_bandwidth_in_GB_per_sec,
                                                                   "GB/s")))
    adam = m["cpu_adam"]
    rows.append(("CPU Adam per node (torch)", f"{adam['torch_params_per_s_per_node'] / 1e6:,.4g} M params/s",
                 f"prior {default_priors().offload.torch_cpu_adam_params_per_s_per_node / 1e6:,.4g}"))
    if m.get("nvme"):
        rows.append(("NVMe read / write", f"{m['nvme']['read_bytes_per_s'] / 1e9:,.3g} / "
                     f"{m['nvme']['write_bytes_per_s'] / 1e9:,.3g} GB/s",
                     sheet(spec and spec.node.nvme_in_Gbit_per_sec / 8, "GB/s")))
    for run in m["runs"]["runs"]:
        if run["ranks"][0]["peak_reserved_bytes"] is not None:
            mem = _bytes(max(r["peak_reserved_bytes"] for r in run["ranks"])) + " reserved"
        else:
            mem = _bytes(max(r["peak_tracked_bytes"] for r in run["ranks"])) + " peak tracked"
        rows.append((f"run {run['strategy']}", f"{run['median_step_s'] * 1e3:,.1f} ms/step, {mem}", ""))
    unit = "processes" if fp.device == "cpu" else "GPUs"
    title = (f"Measured on {fp.nodes} node(s) x {fp.gpus_per_node} {unit}, {fp.gpu_name}"
             + (" (CPU mode: no datasheet; the profile's peaks are these measurements)" if not spec else ""))
    width = max(len(r[0]) for r in rows) + 2
    body = [f"{'':{width}}{'measured':<34}datasheet / prior"]
    body += [f"{a:{width}}{b:<34}{c}" for a, b, c in rows]
    return "\n".join([title, *body])
