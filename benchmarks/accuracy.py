"""How far the advisor's throughput predictions are from published measurements.

    python benchmarks/accuracy.py     # or, from the repository root: python -m benchmarks.accuracy

Runs the model, with the shipped priors and no per-row tuning, over every row of
benchmarks/data/throughput.csv it can express, and prints the error distribution of
tokens/s/GPU and MFU (median, p90, max |%|) overall, by GPU and by model size; the
cross-validated error of the fit (benchmarks/fit_priors.py); the Granite-7B FSDP vs ZeRO-3
head-to-head; how often the measured value falls inside the low/high range; and the predicted
peak memory of the published runs against their GPUs' memory; torchtitan's FSDP2 runs, held
out of the fit; and, from one user's DeepSpeed
issue, memory and relative step time of FSDP and ZeRO-2/3 with and without offload.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date

from advisor.core.estimate import estimate
from advisor.core.priors import default_priors

if __package__:  # imported as benchmarks.accuracy, or `python -m benchmarks.accuracy`
    from .fit_priors import ARCHES, cross_validate, summary
    from .reference import (
        FALCON_ISSUE_NOTE,
        Case,
        falcon_issue_runs,
        granite_cases,
        llm_foundry_cases,
        torchtitan_cases,
        torchtitan_rows,
    )
else:  # run as `python benchmarks/accuracy.py`: its folder is on sys.path
    from fit_priors import ARCHES, cross_validate, summary
    from reference import (
        FALCON_ISSUE_NOTE,
        Case,
        falcon_issue_runs,
        granite_cases,
        llm_foundry_cases,
        torchtitan_cases,
        torchtitan_rows,
    )


def evaluate(cases: list[Case], priors) -> list[dict]:
    out = []
    for c in cases:
        e = estimate(c.cluster, c.model, c.workload, c.strategy, priors)
        tokens = e.throughput.tokens_per_step / c.cluster.num_gpus
        out.append({
            "case": c,
            "tps_err": e.throughput.tokens_per_s_per_gpu / c.tokens_per_s_per_gpu - 1,
            "mfu_err": (e.throughput.mfu / c.mfu - 1) if c.mfu else None,
            "inside": tokens / e.time.high_s <= c.tokens_per_s_per_gpu <= tokens / e.time.low_s,
            "estimate": e,
        })
    return out


def grouped(results: list[dict], key) -> None:
    groups = defaultdict(list)
    for r in results:
        groups[key(r["case"])].append(r["tps_err"])
    for name, errs in sorted(groups.items(), key=lambda kv: kv[0]):
        print(f"  {name:22s} {summary(errs)}")


def main() -> None:
    priors = default_priors()
    print(f"# advisor accuracy report, {date.today()}: python benchmarks/accuracy.py")
    print(f"priors: {priors.source}\n")
    cases = llm_foundry_cases()
    results = evaluate(cases, priors)
    print(f"MosaicML llm-foundry (FSDP1, MPT 125M-70B, {len(cases)} rows)")
    print(f"  tokens/s/GPU           {summary([r['tps_err'] for r in results])}")
    print(f"  MFU                    {summary([r['mfu_err'] for r in results if r['mfu_err'] is not None])}")
    print("by GPU:")
    grouped(results, lambda c: c.gpu + (" fp8" if c.workload.precision == "fp8" else ""))
    print("by model size:")
    grouped(results, lambda c: c.model.name)
    fractions = sorted(r["estimate"].memory.per_gpu_bytes.total / r["estimate"].memory.capacity_bytes
                       for r in results)
    planned = sum(r["estimate"].fits for r in results)
    print(f"predicted peak memory of these runs (they trained, so it must fit): at most "
          f"{fractions[-1]:.2f} of the GPU's memory, median {fractions[len(fractions) // 2]:.2f}; "
          f"{planned}/{len(results)} inside the 5% safety margin")
    inside = sum(r["inside"] for r in results)
    print(f"measured inside the predicted low-high range: {inside}/{len(results)} "
          f"({100 * inside / len(results):.0f}%)\n")

    base = default_priors(fitted=False).model_copy(update={"collective": priors.collective})
    attention = {arch: priors.attention_efficiency[arch] for arch in ARCHES}
    print("cross-validation of the fit (fit on the rest, error on the held-out rows; the attention")
    print("ratios, interference and collective terms stay at the full fit's values):")
    by_size = cross_validate(cases, base, attention, lambda c: c.model.name)
    by_gpu = cross_validate(cases, base, attention, lambda c: c.gpu)
    print(f"  leave one model size out {summary(by_size)}")
    print(f"  leave one GPU type out   {summary(by_gpu)}\n")

    print("Granite-7B on 4 x A100, batch 8, bf16 (HF blog 'From DeepSpeed to FSDP and Back Again')")
    head = evaluate(granite_cases(), priors)
    for r in head:
        c, e = r["case"], r["estimate"]
        print(f"  {c.label:36s} measured {c.tokens_per_s_per_gpu:7.1f}  predicted "
              f"{e.throughput.tokens_per_s_per_gpu:7.1f} tok/s/GPU ({100 * r['tps_err']:+.1f}%), "
              f"MFU {e.throughput.mfu:.2f} vs {c.mfu:.2f}; fits: {e.fits}")
    measured_order = [r["case"].label for r in sorted(head, key=lambda r: -r["case"].tokens_per_s_per_gpu)]
    predicted_order = [r["case"].label for r in sorted(
        head, key=lambda r: -r["estimate"].throughput.tokens_per_s_per_gpu)]
    gap = (head[0]["estimate"].throughput.tokens_per_s_per_gpu
           / head[1]["estimate"].throughput.tokens_per_s_per_gpu - 1)
    print(f"  same ranking as measured (FSDP {100 * (3158.7 / 3094.5 - 1):.1f}% faster): "
          f"{measured_order == predicted_order} (predicted FSDP vs ZeRO-3: {100 * gap:+.1f}%)")
    print(f"  assumptions: {granite_cases()[0].note}")
    everything = [r["tps_err"] for r in results + head]
    print(f"  all {len(everything)} expressible rows (llm-foundry + Granite): {summary(everything)}")
    held_out(priors)
    falcon_issue(priors)


def held_out(priors) -> None:
    """torchtitan's FSDP2 runs: a model family, framework and attention kernel the fit never saw."""
    cases = torchtitan_cases()
    skipped = len(torchtitan_rows()) - len(cases)
    print(f"\nHeld out, not in the fit: torchtitan FSDP2 on 64 x A100-80GB (docs/performance.md; "
          f"{skipped} 'selective layer' rows not expressible)")
    results = evaluate(cases, priors)
    for r in results:
        c, e = r["case"], r["estimate"]
        fraction = e.memory.per_gpu_bytes.total / e.memory.capacity_bytes
        print(f"  {c.label:52s} measured {c.tokens_per_s_per_gpu:6.0f}  predicted "
              f"{e.throughput.tokens_per_s_per_gpu:6.0f} ({100 * r['tps_err']:+5.1f}%)  MFU "
              f"{e.throughput.mfu:.3f} vs {c.mfu:.3f}; predicted memory {fraction:.2f} of the GPU")
    print(f"  tokens/s/GPU           {summary([r['tps_err'] for r in results])}")


def falcon_issue(priors) -> None:
    """DeepSpeed issue #3901: memory per GPU and step time relative to FSDP, strategy by strategy."""
    cluster, model, runs = falcon_issue_runs()
    print("\nFalcon-7B, s=4096, 8 x A100-40GB (DeepSpeed issue #3901, one user's report, low trust)")
    base = {}
    for run in runs:
        e = estimate(cluster, model, run.workload, run.strategy, priors)
        total = e.memory.per_gpu_bytes.total / 1e9
        if not base:  # the first row, FSDP with fp32 master weights
            base = {"measured": run.step_s, "predicted": e.time.step_s}
        measured_mem = "OOM" if run.memory_gb is None else f"{run.memory_gb:4.1f} GB"
        predicted_mem = f"{total:4.1f} GB{'' if e.fits else ' (does not fit)'}"
        step = ""
        if run.step_s and e.fits:
            step = (f"; step / FSDP's: measured {run.step_s / base['measured']:.2f}, "
                    f"predicted {e.time.step_s / base['predicted']:.2f}")
        print(f"  {run.label:46s} memory measured {measured_mem:8s} predicted {predicted_mem}{step}")
    print(f"  {FALCON_ISSUE_NOTE}")


if __name__ == "__main__":
    main()
