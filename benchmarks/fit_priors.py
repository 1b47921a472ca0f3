"""Fit the compute-efficiency priors to the published llm-foundry measurements.

    python benchmarks/fit_priors.py            # fit, cross-validate, print
    python benchmarks/fit_priors.py --write    # ... and write advisor/data/fitted_priors.toml
    python benchmarks/fit_priors.py --refit-cv # ... and cross-validate refitting everything per fold

(or `python -m benchmarks.fit_priors [--write] [--refit-cv]` from the repository root.) Reads
benchmarks/data/throughput.csv and comm_bandwidth.csv (copied with their sources, data/README.md).

What is fitted (physically meaningful terms, few parameters, no per-row tuning):
- per GPU architecture, the GEMM efficiency curve at 4 hidden sizes (768, 2048, 4096, 8192),
  by linear least squares on each row's implied efficiency (the scale of the compute prior
  that makes the model hit the measured tokens/s/GPU, found by bisection through the whole
  step-time model, communication and overlap included);
- per GPU architecture, the attention kernel's efficiency as a fraction of the GEMM efficiency,
  by grid search (it sets how long sequences cost; FlashAttention-2 reaches a lower fraction
  of H100's peak than of A100's);
- the fp8 efficiency ratio (fp8 GEMMs only; attention stays bf16), median over the fp8 rows of
  the ratio that matches each;
- the collective interference (the fraction of overlapped collective time that still costs,
  timing.py), by grid search, alternating with the attention ratios;
- the collective alpha-beta terms (latency, achieved fraction of the link) per tier, by
  weighted least squares on time over the NCCL all-reduce sweeps of
  benchmarks/data/comm_bandwidth.csv (B200, one node and four nodes, 1 MiB and up).
Cross-validation: leave one model size out (every row of that MPT size held out, its curve
value interpolated from the other sizes), and leave one GPU type out for the A100 40/80 GB
pair (same architecture).
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import statistics
from collections.abc import Callable
from datetime import date
from pathlib import Path

import numpy as np

from advisor.core.hardware import gpu_catalog
from advisor.core.priors import Curve, Priors, default_priors
from advisor.core.timing import step_parts
from advisor.profiles.fit import solve

if __package__:  # imported as benchmarks.fit_priors (tests, `python -m benchmarks.fit_priors`)
    from .reference import DATA, Case, llm_foundry_cases
else:  # run as `python benchmarks/fit_priors.py`: its folder is on sys.path
    from reference import DATA, Case, llm_foundry_cases

KNOTS = [768.0, 2048.0, 4096.0, 8192.0]
ARCHES = ("ampere", "hopper")
FITTED = Path(__file__).parents[1] / "advisor" / "data" / "fitted_priors.toml"


def _bytes(payload: str) -> int:
    value, unit = re.match(r"(\d+)(KiB|MiB|GiB)", payload).groups()
    return int(value) * {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[unit]


def _alpha_beta(sizes: np.ndarray, seconds: np.ndarray) -> tuple[float, float]:
    """(alpha, seconds per byte) minimising relative error of t = alpha + bytes * slope."""
    w = 1 / seconds
    a = np.vstack([np.ones_like(sizes), sizes]).T * w[:, None]
    (alpha, slope), *_ = np.linalg.lstsq(a, seconds * w, rcond=None)
    return float(alpha), float(slope)


def fit_collectives() -> dict[str, float]:
    """Alpha-beta per tier from the B200 all-reduce sweeps (one node: NVLink5 at 900 GB/s per
    direction; four nodes: 8 x 50 GB/s EFA per node, the hierarchical model's NIC share)."""
    with open(DATA / "comm_bandwidth.csv") as f:
        rows = [r for r in csv.DictReader(f)
                if "B200" in r["hardware"] and "all_reduce_bench" in r["collective"]]
    b200 = gpu_catalog()["B200"]
    out = {}
    for nodes, tier in (("1", "intra"), ("4", "inter")):
        picked = [r for r in rows if r["nodes"] == nodes and _bytes(r["payload"]) >= 2**20]
        sizes = np.array([float(_bytes(r["payload"])) for r in picked])
        n, k = int(picked[0]["num_gpus"]), int(nodes)
        seconds = 2 * (n - 1) / n * sizes / np.array([float(r["busbw_GBps"]) * 1e9 for r in picked])
        if tier == "intra":
            link, per_gpu_bytes = b200.intra_node_bandwidth_in_GB_per_sec * 1e9, 2 * (n - 1) / n * sizes
        else:  # bytes each GPU sends across nodes: a ring over k nodes, shared by the node's 8 NICs
            link, per_gpu_bytes = 8 * 50e9 / 8, 2 * (k - 1) / k * sizes / 8
        alpha, slope = _alpha_beta(per_gpu_bytes, seconds)
        out[f"{tier}_latency_s"] = round(alpha, 7)
        out[f"{tier}_efficiency"] = round(1 / (slope * link), 3)
    return out


def predicted_tps(case: Case, priors: Priors, compute_scale: float = 1.0) -> float:
    ctx = case.context(priors)
    parts = step_parts(ctx, case.strategy, compute_scale=compute_scale)
    return case.workload.tokens_per_step(case.cluster.num_gpus) / parts.step_s / case.cluster.num_gpus


def implied_scale(case: Case, priors: Priors) -> float:
    """Compute-efficiency scale at which the model matches the measurement (bisection, log)."""
    return math.exp(solve(lambda x: case.tokens_per_s_per_gpu - predicted_tps(case, priors, math.exp(x)),
                          math.log(0.05), math.log(20.0)))


def _weights(hidden: float) -> np.ndarray:
    """Linear-interpolation weights of the knots at `hidden` (log2 space, clamped)."""
    w = np.zeros(len(KNOTS))
    if hidden <= KNOTS[0]:
        w[0] = 1
    elif hidden >= KNOTS[-1]:
        w[-1] = 1
    else:
        j = next(i for i in range(1, len(KNOTS)) if hidden <= KNOTS[i])
        t = (math.log2(hidden) - math.log2(KNOTS[j - 1])) / (math.log2(KNOTS[j]) - math.log2(KNOTS[j - 1]))
        w[j - 1], w[j] = 1 - t, t
    return w


def fit_curve(samples: list[tuple[float, float]]) -> list[float]:
    """Least-squares knot values from (hidden, implied efficiency) samples."""
    a = np.array([_weights(h) for h, _ in samples])
    b = np.array([v for _, v in samples])
    values, *_ = np.linalg.lstsq(a, b, rcond=None)
    # Knots without data keep the neighbours' value; efficiencies stay physical.
    return [float(min(0.95, max(0.05, v))) for v in values]


def with_fit(priors: Priors, curves: dict[str, list[float]], attention: dict[str, float],
             fp8: float | None = None) -> Priors:
    gemm = dict(priors.gemm_efficiency)
    gemm.update({arch: Curve(x=KNOTS, y=ys) for arch, ys in curves.items()})
    compute = {} if fp8 is None else {"fp8_efficiency_ratio": fp8}
    return priors.model_copy(update={"gemm_efficiency": gemm,
                                     "attention_efficiency": {**priors.attention_efficiency, **attention},
                                     "compute": priors.compute.model_copy(update=compute)})


def implied_efficiencies(cases: list[Case], priors: Priors) -> list[float]:
    """Each row's implied efficiency at its hidden size, on the un-scaled prior curve."""
    return [priors.gemm_efficiency[c.cluster.gpu.architecture](c.model.hidden) * implied_scale(c, priors)
            for c in cases]


def fit(cases: list[Case], base: Priors, attention: dict[str, float]) -> tuple[Priors, list[float]]:
    """Fit the curves on bf16 rows and the fp8 ratio on fp8 rows, for given attention ratios."""
    priors = with_fit(base, {}, attention)
    implied = implied_efficiencies(cases, priors)
    curves = {}
    for arch in ARCHES:
        samples = [(c.model.hidden, v) for c, v in zip(cases, implied, strict=True)
                   if c.cluster.gpu.architecture == arch and c.workload.precision == "bf16"]
        if samples:
            curves[arch] = fit_curve(samples)
    fitted = with_fit(base, curves, attention)
    fp8_ratios = [implied_fp8_ratio(c, fitted) for c in cases if c.workload.precision == "fp8"]
    fp8 = statistics.median(fp8_ratios) if fp8_ratios else None
    return with_fit(base, curves, attention, fp8), implied


def implied_fp8_ratio(case: Case, priors: Priors) -> float:
    """The fp8 ratio (it scales the fp8 GEMMs only, not bf16 attention) at which the model
    matches an fp8 row (bisection)."""
    def gap(ratio: float) -> float:
        trial = priors.model_copy(update={"compute": priors.compute.model_copy(
            update={"fp8_efficiency_ratio": ratio})})
        return case.tokens_per_s_per_gpu - predicted_tps(case, trial)

    return solve(gap, 0.05, 1.0)


def errors(cases: list[Case], priors: Priors) -> list[float]:
    """Signed relative error of tokens/s/GPU per case."""
    return [predicted_tps(c, priors) / c.tokens_per_s_per_gpu - 1 for c in cases]


def summary(errs: list[float]) -> str:
    a = sorted(abs(e) for e in errs)
    if not a:
        return "no rows"
    p90 = a[min(len(a) - 1, int(0.9 * len(a)))]
    return (f"n={len(a):3d}  median |err| {100 * statistics.median(a):5.1f}%  p90 {100 * p90:5.1f}%  "
            f"max {100 * a[-1]:5.1f}%  bias {100 * statistics.median(errs):+5.1f}%")


def held_out_errors(cases: list[Case], key, fit_fold: Callable[[list[Case]], Priors]) -> list[float]:
    """Hold out each group given by `key`, fit on the rest with `fit_fold`, collect the held-out
    rows' errors."""
    held = []
    for group in sorted({key(c) for c in cases}):
        train = [c for c in cases if key(c) != group]
        test = [c for c in cases if key(c) == group]
        if train and test:
            held.extend(errors(test, fit_fold(train)))
    return held


def cross_validate(cases: list[Case], base: Priors, attention: dict[str, float], key) -> list[float]:
    """Held-out errors refitting the curves and the fp8 ratio per fold; the attention ratios and
    `base`'s collective terms stay as given."""
    return held_out_errors(cases, key, lambda train: fit(train, base, attention)[0])


def cross_validate_refit(cases: list[Case], key) -> list[float]:
    """As cross_validate, but every fold refits everything (`fit_all`: attention ratios and
    interference too), so nothing fitted on the held-out rows reaches their predictions."""
    return held_out_errors(cases, key, lambda train: fit_all(train)[1])


def rms_log(errs: list[float]) -> float:
    """Root mean square of log(predicted / measured): the least-squares criterion of the grids."""
    return math.sqrt(sum(math.log1p(e) ** 2 for e in errs) / len(errs))


def best_attention(cases: list[Case], base: Priors) -> dict[str, float]:
    """Per architecture, the grid ratio whose fit has the lowest RMS log error on its rows
    (each architecture's curve and rows are independent of the other's)."""
    grid = [round(0.2 + 0.05 * i, 2) for i in range(17)]
    best = {}
    for arch in ARCHES:
        rows = [c for c in cases if c.cluster.gpu.architecture == arch]
        if not rows:
            continue
        scored = []
        for ratio in grid:
            priors, _ = fit(rows, base, {arch: ratio})
            scored.append((rms_log(errors(rows, priors)), ratio))
        best[arch] = min(scored)[1]
    return best


def with_interference(priors: Priors, interference: float) -> Priors:
    return priors.model_copy(update={"collective": priors.collective.model_copy(
        update={"interference": interference})})


def best_interference(cases: list[Case], base: Priors, attention: dict[str, float]) -> float:
    """The grid value of collective.interference whose fit has the lowest RMS log error."""
    scored = []
    for interference in [round(0.1 * i, 1) for i in range(11)]:
        priors, _ = fit(cases, with_interference(base, interference), attention)
        scored.append((rms_log(errors(cases, priors)), interference))
    return min(scored)[1]


def write(priors: Priors, n_rows: int) -> None:
    lines = [f"# Written by `python benchmarks/fit_priors.py --write` on {date.today()} from "
             f"{n_rows} llm-foundry rows", "# of benchmarks/data/throughput.csv. Do not edit by "
             "hand: rerun the script. Overrides priors.toml.", ""]
    for arch in ARCHES:
        c = priors.gemm_efficiency[arch]
        lines += [f"[gemm_efficiency.{arch}]", f"hidden = {[int(x) for x in c.x]}",
                  f"efficiency = {[round(y, 4) for y in c.y]}", ""]
    c = priors.collective
    lines += ["[collective]", f"intra_latency_s = {c.intra_latency_s}",
              f"inter_latency_s = {c.inter_latency_s}", f"intra_efficiency = {c.intra_efficiency}",
              f"inter_efficiency = {c.inter_efficiency}", f"interference = {c.interference}", ""]
    lines += ["[attention_efficiency]"]
    lines += [f"{arch} = {priors.attention_efficiency[arch]}" for arch in ARCHES]
    lines += ["", "[compute]",
              f"fp8_efficiency_ratio = {round(priors.compute.fp8_efficiency_ratio, 4)}", ""]
    FITTED.write_text("\n".join(lines))
    print(f"wrote {FITTED}")


def fit_all(cases: list[Case]) -> tuple[Priors, Priors, dict[str, float]]:
    """(base, fitted, attention): the hand priors with the fitted collective terms, the fully
    fitted priors, and the attention ratios, as `--write` writes them."""
    base = default_priors(fitted=False)
    base = base.model_copy(update={"collective": base.collective.model_copy(update=fit_collectives())})
    # Coordinate descent: attention at the hand interference, interference, attention again.
    attention = best_attention(cases, base)
    base = with_interference(base, best_interference(cases, base, attention))
    attention = best_attention(cases, base)
    fitted, _ = fit(cases, base, attention)
    return base, fitted, attention


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write advisor/data/fitted_priors.toml")
    parser.add_argument("--refit-cv", action="store_true",
                        help="also cross-validate refitting everything per fold (~3 min)")
    args = parser.parse_args()
    cases = llm_foundry_cases()
    hand = default_priors(fitted=False)
    print(f"{len(cases)} llm-foundry rows; hand priors: {summary(errors(cases, hand))}")
    base, fitted, attention = fit_all(cases)
    print(f"collectives (alpha-beta, B200 NCCL sweeps): {base.collective}")
    print(f"fitted: attention ratio by architecture {attention}, collective interference "
          f"{base.collective.interference}, fp8 ratio {fitted.compute.fp8_efficiency_ratio:.3f}")
    for arch in ARCHES:
        print(f"  {arch:7s} efficiency at hidden {[int(k) for k in KNOTS]}: "
              f"{[round(y, 3) for y in fitted.gemm_efficiency[arch].y]}")
    print(f"in-sample                  {summary(errors(cases, fitted))}")
    by_size = cross_validate(cases, base, attention, lambda c: c.model.name)
    by_gpu = cross_validate(cases, base, attention, lambda c: c.gpu)
    print(f"CV leave one model size out {summary(by_size)}")
    print(f"CV leave one GPU type out  {summary(by_gpu)}"
          "   (H100 held out has no same-arch training rows: the hand prior stays)")
    if args.refit_cv:
        print("CV with everything refit per fold (attention ratios and interference too):")
        print(f"  leave one model size out {summary(cross_validate_refit(cases, lambda c: c.model.name))}")
        print(f"  leave one GPU type out   {summary(cross_validate_refit(cases, lambda c: c.gpu))}")
    if args.write:
        write(fitted, len(cases))


if __name__ == "__main__":
    main()
