"""Measurements -> overrides of the priors, each with a relative 1-sigma uncertainty.

Stages, each using the advisor's own formulas with what the earlier stages fitted:
1. Compute. GEMM efficiency by hidden size = achieved FLOP/s of one layer's matmuls / the dense
   peak, divided by the micro-batch factor t / (t + half_tokens) that compute.py multiplies back.
   A layer is more than its matmuls (norms, rotary, pointwise, kernel launches), so the curve is
   scaled by k = (compute time the raw curve predicts for the calibration model) / (its measured
   forward + backward): the probe gives the shape over sizes, the real layer the level. The
   attention-kernel ratio is SDPA's achieved rate over the matmuls' at the model's hidden size.
2. Collectives, per tier, communication.py's alpha-beta model: per call t = latency + bus bytes
   / (link bandwidth * efficiency), fitted by relative least squares over all-reduce,
   all-gather and reduce-scatter and every message size.
3. Memory-bound and host terms: copy bandwidth / HBM datasheet, host<->device / PCIe datasheet,
   CPU Adam per node, NVMe / the node's NVMe figure.
4. Overheads: GPU: CUDA context and NCCL bytes from device memory not reserved by torch,
   fragmentation = peak reserved / peak allocated - 1 per engine. CPU mode has no CUDA context,
   no NCCL and no caching allocator: all 0.
5. Interference, overlap and hook overhead, from the strategy runs. DDP (no hooks, its bucketed
   all-reduce hidden behind backward at the shipped overlap) gives the collective interference:
   the fraction in [0, 1] of its communication time that makes the predicted step equal the
   measured one. Then per engine (FSDP2, DeepSpeed) the overlap in [0, 1] that does the same
   (hook overhead 0); what overlap 0 cannot explain goes to the hook overhead per module. The
   two are not separable from step times alone; this order keeps the hand-set hook priors out
   of the fitted numbers.

Without a catalog entry for the device (CPU mode, or a GPU the catalog lacks) the datasheet is
replaced by a measured stand-in (advisor/profiles/standin.py): peaks are the best measured rates, so
efficiencies are relative to what this machine showed, never to invented datasheet numbers.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from advisor.core import compute
from advisor.core.context import Context
from advisor.core.hardware import Cluster
from advisor.core.layout import ParallelLayout
from advisor.core.priors import Priors, default_priors
from advisor.core.protocol import make_context
from advisor.core.timing import step_parts
from advisor.profiles.schema import FitTerm, apply_overrides, with_stand_in
from advisor.profiles.standin import measured_device_spec, profile_cluster, run_model_spec, run_workload
from advisor.strategies import get_strategy

BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n}
ENGINE_RUNS = {"fsdp2": ("fsdp",), "deepspeed": ("zero2", "zero1")}
"""Which strategy run fits each engine's overlap (first one present)."""
INTERFERENCE_RUN = "ddp"
"""The strategy run that fits collective.interference (DDP's overlap stays the shipped prior)."""


def _spread(samples: list[float]) -> float:
    mid = statistics.median(samples)
    return statistics.median(abs(x - mid) for x in samples) / mid if len(samples) > 1 else 0.0


def solve(f: Callable[[float], float], lo: float, hi: float) -> float:
    """Root of a non-increasing f on [lo, hi] by bisection (clamped to the ends)."""
    if f(lo) <= 0:
        return lo
    if f(hi) >= 0:
        return hi
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
    return (lo + hi) / 2


class Fit:
    """Accumulates overrides and fit terms; `priors` is the shipped priors with all so far."""

    def __init__(self, base: Priors, name: str):
        self.base, self.name = base, name
        self.overrides: dict = {}
        self.terms: list[FitTerm] = []

    def add(self, path: str, value, sigma: float, samples: int, how: str, layout=None) -> None:
        *tables, key = path.split(".")
        node = self.overrides
        for t in tables:
            node = node.setdefault(t, {})
        node[key] = value if layout is None else layout
        self.terms.append(FitTerm(term=path, value=value, sigma=sigma, samples=samples, how=how))

    @property
    def priors(self) -> Priors:
        return apply_overrides(self.base, self.overrides, self.name)


def fit_compute(fit: Fit, m: dict, cluster: Cluster, arch: str) -> float:
    """Fit the GEMM curve and the attention ratio; returns the largest efficiency before the
    clamp at 1 (above 1 only when the peak used is below what the layers reach)."""
    runs, cp = m["runs"], fit.base.compute
    peak = cluster.gpu.peak_flops("bf16")
    by_hidden: dict[int, list[float]] = {}
    for g in m["gemm"]:
        factor = g["tokens"] / (g["tokens"] + cp.micro_batch_half_tokens)
        by_hidden.setdefault(g["hidden"], []).append(g["flops_per_s"] / peak / factor)
    x = sorted(by_hidden)
    raw = [statistics.mean(by_hidden[h]) for h in x]
    hidden = runs["model"]["hidden"]
    gemm_rate = statistics.mean(g["flops_per_s"] for g in m["gemm"] if g["hidden"] == hidden)
    ratio = min(2.0, max(1e-4, m["attention"]["flops_per_s"] / gemm_rate))
    att = m["attention"]
    fit.add(f"attention_efficiency.{arch}", ratio, att["spread"], len(att["seconds"]),
            "SDPA causal forward+backward FLOP/s / the layer matmuls' FLOP/s at the model's hidden size")
    # The curve's shape, at most 1 while k is found (y = raw x k does not depend on the scale:
    # the model's predicted time goes as 1 / raw, so k goes as raw).
    shape = [v / max(1.0, max(raw)) for v in raw]
    fit.overrides.setdefault("gemm_efficiency", {})[arch] = {"x": x, "y": shape}
    ctx = Context(cluster=cluster, model=run_model_spec(runs["model"]), workload=run_workload(runs),
                  priors=fit.priors, layout=ParallelLayout.shard(cluster.num_gpus))  # (compute only)
    mb = compute.micro_batch_time(ctx)
    k = (mb.forward_s + mb.backward_s) / runs["local_median_s"]
    y = [v * k for v in shape]
    top = max(y)
    y = [min(1.0, v) for v in y]  # an efficiency is a fraction of the peak (priors.Curve checks)
    sigma = max(0.02, statistics.median(g["spread"] for g in m["gemm"]), _spread(runs["local_step_s"]))
    fit.add(f"gemm_efficiency.{arch}", y, sigma, sum(len(g["seconds"]) for g in m["gemm"]),
            f"layer matmul FLOP/s / peak / micro-batch factor at hidden {x} (its shape), times "
            f"k = {k:.3g} (the calibration model's predicted / measured forward+backward)"
            + ("; clamped at 1 (the datasheet peak or the micro-batch prior is off)" if top > 1 else ""),
            layout={"x": [float(v) for v in x], "y": y})
    fit.add("uncertainty.compute_efficiency", sigma, 0.0, len(runs["local_step_s"]),
            "largest of the GEMM and layer timing spreads (MAD / median), at least 2%")
    return top


def alpha_beta(x: list[float], t: list[float]) -> tuple[float, float]:
    """(alpha, beta) of t = alpha + beta * x by least squares on relative error (weights 1/t^2,
    so 4 KiB and 1 GiB messages count alike), alpha >= 0."""
    w = [1 / v**2 for v in t]
    sw = sum(w)
    sx = sum(a * b for a, b in zip(w, x, strict=True))
    st = sum(a * b for a, b in zip(w, t, strict=True))
    sxx = sum(a * b * b for a, b in zip(w, x, strict=True))
    sxt = sum(a * b * c for a, b, c in zip(w, x, t, strict=True))
    det = sw * sxx - sx * sx
    beta = (sw * sxt - sx * st) / det if det else 0.0
    alpha = (st - beta * sx) / sw
    if alpha < 0 or beta <= 0:
        alpha = max(0.0, alpha) if beta > 0 else 0.0
        beta = (sxt - alpha * sx) / sxx
    return alpha, beta


def fit_collectives(fit: Fit, m: dict, cluster: Cluster) -> None:
    """Per tier, the alpha-beta model of communication.py: per call, t = latency + bus bytes /
    (link * efficiency), bus bytes = the ring factor times the buffer. One fit over all three
    collectives and all sizes; the per-size efficiency left after latency is kept in `how`."""
    link = {"intra": cluster.intra_node_bytes_per_s,
            "inter": cluster.inter_node_bytes_per_s / cluster.gpus_per_node}
    spreads = []
    for tier in ("intra", "inter"):
        rows = [c for c in m["collectives"] if c["tier"] == tier]
        if not rows:
            continue
        moved = [BUS_FACTOR[c["op"]](c["ranks"]) * c["bytes"] for c in rows]
        times = [min(c["seconds"]) for c in rows]
        alpha, beta = alpha_beta(moved, times)
        eff = min(1.2, max(1e-4, 1 / (beta * link[tier])))
        residual = [abs(alpha + beta * x - t) / t for x, t in zip(moved, times, strict=True)]
        spreads += [c["spread"] for c in rows]
        sigma = max(statistics.median(c["spread"] for c in rows), statistics.median(residual))
        by_size: dict[int, list[float]] = {}
        for c, x, t in zip(rows, moved, times, strict=True):
            by_size.setdefault(c["bytes"], []).append(x / t / link[tier])
        curve = ", ".join(f"{size / 2**20:g} MiB {statistics.mean(v):.2f}"
                          for size, v in sorted(by_size.items()))
        fit.add(f"collective.{tier}_latency_s", alpha, sigma, len(rows),
                "alpha of t = alpha + bus bytes * beta, relative least squares over all-reduce, "
                "all-gather, reduce-scatter and all sizes")
        fit.add(f"collective.{tier}_efficiency", eff, sigma, len(rows),
                f"1 / (beta * link {link[tier] / 1e9:.3g} GB/s); achieved bus bw / link by size: {curve}")
    if spreads:
        fit.add("uncertainty.collective_efficiency", max(0.03, statistics.median(spreads)), 0.0,
                len(spreads), "median spread (MAD / median) of the collective timings, at least 3%")


def fit_host(fit: Fit, m: dict, cluster: Cluster, cpu_mode: bool) -> None:
    mem = m["memory"]
    fit.add("compute.hbm_efficiency", min(1.0, mem["bytes_per_s"] / cluster.hbm_bytes_per_s),
            mem["spread"], len(mem["seconds"]), "device copy bandwidth / HBM datasheet")
    hd = m["host_device"]
    rate = min(hd["h2d_bytes_per_s"], hd["d2h_bytes_per_s"])
    fit.add("offload.pcie_efficiency", min(1.0, rate / cluster.pcie_bytes_per_s), hd["spread"], 2,
            f"{hd['kind']} copy, slower direction / PCIe datasheet")
    adam = m["cpu_adam"]
    fit.add("offload.torch_cpu_adam_params_per_s_per_node", adam["torch_params_per_s_per_node"],
            adam["spread"], adam["ranks_per_node"], "torch AdamW steps, all ranks of a node at once, summed")
    if adam.get("deepspeed_params_per_s_per_node") or cpu_mode:
        ds = adam.get("deepspeed_params_per_s_per_node") or adam["torch_params_per_s_per_node"]
        fit.add("offload.deepspeed_cpu_adam_params_per_s_per_node", ds, adam["spread"],
                adam["ranks_per_node"],
                "DeepSpeed CPU Adam" if adam.get("deepspeed_params_per_s_per_node") else
                "CPU mode: DeepSpeed runs here step a torch AdamW, so its rate is the torch one")
    if m.get("nvme"):
        nv = m["nvme"]
        node_rate = cluster.nvme_bytes_per_s_per_node
        fit.add("offload.nvme_efficiency", min(1.0, min(nv["read_bytes_per_s"], nv["write_bytes_per_s"])
                                               / node_rate), 0.1, 1, f"file in {nv['path']}: slower of "
                "read and write / the node's NVMe figure")


def fit_overheads(fit: Fit, m: dict, cpu_mode: bool) -> None:
    if cpu_mode:
        for key in ("cuda_context_bytes", "nccl_bytes_per_tier", "fragmentation.ddp",
                    "fragmentation.fsdp2", "fragmentation.deepspeed"):
            fit.add(f"overhead.{key}", 0.0, 0.0, 0, "CPU mode: no CUDA context, no NCCL, no caching "
                    "allocator (memory there is the peak of live tensor bytes)")
        return
    dm = m["device_memory"]
    fit.add("overhead.cuda_context_bytes", dm["context_bytes"], 0.05, dm["ranks"],
            "device memory in use not reserved by torch, after CUDA init and a matmul")
    fit.add("overhead.nccl_bytes_per_tier", dm["nccl_bytes"], 0.1, dm["ranks"],
            "growth of that memory over the first collective")
    for engine, runs in (("ddp", ("ddp",)), ("fsdp2", ("fsdp",)), ("deepspeed", ("zero1", "zero2", "zero3"))):
        ratios = [r["peak_reserved_bytes"] / r["peak_allocated_bytes"] - 1 for run in m["runs"]["runs"]
                  if run["strategy"] in runs for r in run["ranks"] if r["peak_allocated_bytes"]]
        if ratios:
            fit.add(f"overhead.fragmentation.{engine}", max(0.0, max(ratios)), 0.1, len(ratios),
                    "peak reserved / peak allocated - 1, worst rank")


def fit_overlap(fit: Fit, m: dict, cluster: Cluster) -> None:
    runs = {r["strategy"]: r for r in m["runs"]["runs"]}
    model, workload = run_model_spec(m["runs"]["model"]), run_workload(m["runs"])

    def ctx(priors: Priors, name: str) -> Context:
        return make_context(cluster, model, workload, priors, get_strategy(name))

    def step_s(strategy: str, **tables: dict) -> float:
        """Predicted step with the fitted priors and `tables` laid over them."""
        priors = apply_overrides(fit.priors, tables, fit.name)
        return step_parts(ctx(priors, strategy), get_strategy(strategy)).step_s

    if INTERFERENCE_RUN in runs:
        run = runs[INTERFERENCE_RUN]
        timed, measured = run["ranks"][0]["step_s"], run["median_step_s"]
        interference = solve(lambda k: measured - step_s(INTERFERENCE_RUN, collective={"interference": k}),
                              0.0, 1.0)
        fit.add("collective.interference", interference, _spread(timed), len(timed),
                f"fraction of {INTERFERENCE_RUN}'s communication time that makes its predicted step "
                f"equal the measured {measured * 1e3:.3g} ms (overlap.{INTERFERENCE_RUN} as shipped)")
    for engine, names in ENGINE_RUNS.items():
        name = next((n for n in names if n in runs), None)
        if name is None:
            continue
        timed = runs[name]["ranks"][0]["step_s"]
        measured, sigma = runs[name]["median_step_s"], _spread(timed)
        kind, modules = get_strategy(name).framework_hooks(ctx(fit.priors, name))
        no_hooks = {kind: 0.0}

        def gap(o: float, name=name, engine=engine, no_hooks=no_hooks, measured=measured) -> float:
            return step_s(name, overlap={engine: o}, framework_overhead_s_per_module=no_hooks) - measured

        overlap = solve(gap, 0.0, 1.0)
        residual = -gap(overlap)
        fit.add(f"overlap.{engine}", overlap, sigma, len(timed),
                f"overlap making the predicted {name} step equal the measured {measured * 1e3:.3g} ms")
        if modules:
            fit.add(f"framework_overhead_s_per_module.{kind}", max(0.0, residual) / modules, sigma,
                    len(timed), f"{name} step time that overlap 0 leaves unexplained, per hooked "
                    f"module ({modules})")
    if "zero3" in runs:
        timed = runs["zero3"]["ranks"][0]["step_s"]
        measured = runs["zero3"]["median_step_s"]
        residual = measured - step_s("zero3", framework_overhead_s_per_module={"zero3": 0.0})
        _, modules = get_strategy("zero3").framework_hooks(ctx(fit.priors, "zero3"))
        fit.add("framework_overhead_s_per_module.zero3", max(0.0, residual) / modules, _spread(timed),
                len(timed), f"zero3 step time the fitted DeepSpeed overlap leaves unexplained, per "
                f"hooked module ({modules})")


def fit_profile(m: dict, fingerprint: dict, catalog_gpu: str | None, name: str
                ) -> tuple[dict, list[FitTerm], dict | None]:
    """(overrides, fit terms, measured device spec or None) from one calibration's measurements."""
    cpu_mode = fingerprint["device"] == "cpu"
    spec = None if catalog_gpu else measured_device_spec(m, fingerprint)
    cluster = profile_cluster(catalog_gpu, spec, fingerprint["gpus_per_node"], fingerprint["nodes"])
    arch = cluster.gpu.architecture
    if spec is not None:
        # The stand-in's peak is the best GEMM rate measured, which the fitted layer efficiency
        # can exceed (micro-batch factor, model vs measured step): raise the peak so the largest
        # efficiency is 1. Predictions are unchanged (they depend on peak x efficiency only).
        top = fit_compute(Fit(with_stand_in(default_priors(), arch), name), m, cluster, arch)
        if top > 1:
            for key in ("peak_bf16_dense_in_TFLOPS", "peak_fp16_dense_in_TFLOPS", "peak_fp32_in_TFLOPS"):
                spec[key] *= top * (1 + 1e-9)
            spec["source"] += f"; peaks raised {top:.3g}x so the fitted efficiencies stay within 1"
            cluster = profile_cluster(catalog_gpu, spec, fingerprint["gpus_per_node"], fingerprint["nodes"])
    fit = Fit(with_stand_in(default_priors(), arch), name)
    fit_compute(fit, m, cluster, arch)
    fit_collectives(fit, m, cluster)
    fit_host(fit, m, cluster, cpu_mode)
    fit_overheads(fit, m, cpu_mode)
    fit_overlap(fit, m, cluster)
    return fit.overrides, fit.terms, spec
