"""Plain-language reasons: why the chosen plan, what dominates it, what would change it, and how
it compares with the rule of thumb (the cheapest fix of a misfit is advisor/search/fixes.py)."""

from __future__ import annotations

from advisor.core.hardware import Cluster
from advisor.core.model import ModelSpec
from advisor.core.results import Estimate, InfeasiblePlan
from advisor.core.units import gib_text
from advisor.search.fixes import TIE_FRACTION

RULE_OF_THUMB = ("FSDP below 10B params or with NVLink, DeepSpeed ZeRO-3 above 10B on limited "
                 "GPUs, ZeRO-Infinity offload when nothing else fits")


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%"


def _dominant(e: Estimate) -> str:
    t = e.time
    parts = {"compute": t.compute_s, "framework hooks": t.framework_s,
             "exposed communication": t.exposed_comm_s,
             "the optimizer step": t.optimizer_s, "offload transfers and the CPU optimizer": t.offload_s}
    name, value = max(parts.items(), key=lambda kv: kv[1])
    return f"{name} is {_share(value, t.step_s)} of the {t.step_s:.2f} s step"


def rule_of_thumb_pick(cluster: Cluster, model: ModelSpec, resident_fits: bool) -> str:
    """What the rule of thumb would pick: ZeRO-Infinity when no GPU-resident plan fits, else
    FSDP below 10B params or with NVLink, else ZeRO-3."""
    if not resident_fits:
        return "zero3-nvme"
    nvlink = "pcie" not in cluster.gpu.intra_node_link.lower()
    return "fsdp" if model.params < 10e9 or nvlink else "zero3"


def explain(chosen: Estimate | None, ranked: list[Estimate | InfeasiblePlan], cluster: Cluster,
            model: ModelSpec) -> tuple[list[str], str]:
    """Summary sentences and the rule-of-thumb comparison."""
    fitting = [e for e in ranked if isinstance(e, Estimate) and e.fits]
    resident = any(e.offload == "none" for e in fitting)
    rule_pick = rule_of_thumb_pick(cluster, model, resident)
    if chosen is None:
        closest = min((e for e in ranked if isinstance(e, Estimate)),
                      key=lambda e: e.memory.per_gpu_bytes.total, default=None)
        lines = [f"Nothing fits on {cluster.num_gpus} x {cluster.gpu.name}."]
        if closest is not None:
            lines.append(f"Closest: {closest.strategy}, {closest.reason}; fix: {closest.fix}.")
        return lines, (f"Rule of thumb ({RULE_OF_THUMB}) says {rule_pick}; the model finds that "
                       "nothing fits here, so the fixes above (each re-checked) are the way on.")
    s, m, tp = chosen.workload, chosen.memory.per_gpu_bytes, chosen.throughput
    first = (f"{chosen.strategy} at micro-batch {s.micro_batch} x grad-accum {s.grad_accum} with "
             f"{s.act_ckpt} checkpointing: {tp.tokens_per_s_per_gpu:,.0f} tokens/s/GPU, MFU "
             f"{100 * tp.mfu:.0f}%, {gib_text(m.total)} of {gib_text(chosen.memory.capacity_bytes)} "
             f"per GPU; {_dominant(chosen)}.")
    others = []
    runner = next((e for e in fitting if e is not chosen), None)
    if runner is not None and tp.tokens_per_s_per_gpu > 0:
        gap = 1 - runner.throughput.tokens_per_s_per_gpu / tp.tokens_per_s_per_gpu
        if gap < 0:  # chosen over a faster offload plan: a tie (search.prefer_resident)
            others.append(f"next is {runner.strategy}, {100 * -gap:.1f}% faster, a tie within the "
                          f"model's error; {chosen.strategy} needs no offload to host memory")
        else:
            others.append(f"next is {runner.strategy}, {100 * gap:.0f}% slower"
                          + (" (a tie within the model's error)" if gap < TIE_FRACTION else ""))
    misfits = [e.strategy for e in ranked if not e.fits]
    if misfits:
        verb = "does" if len(misfits) == 1 else "do"
        others.append(f"{', '.join(misfits)} {verb} not fit or cannot run here (reasons below)")
    second = "; ".join(others)
    second = (second[0].upper() + second[1:] + ".") if second else ""
    change = _what_would_change(chosen)
    verdict = "agrees" if rule_pick == chosen.strategy else "differs"
    rule = (f"Rule of thumb ({RULE_OF_THUMB}) picks {rule_pick} for {model.params / 1e9:.1f}B "
            f"params on {cluster.gpu.intra_node_link}; the model {verdict}")
    if verdict == "differs":
        pick = next((e for e in ranked if e.strategy == rule_pick), None)
        if isinstance(pick, Estimate) and pick.fits:
            rule += (f": {rule_pick} predicts {pick.throughput.tokens_per_s_per_gpu:,.0f} "
                     f"tokens/s/GPU vs {tp.tokens_per_s_per_gpu:,.0f}")
        elif pick is not None:
            rule += f": {rule_pick} {pick.reason}"
    return [line for line in (first, second, change) if line], rule + "."


def _what_would_change(e: Estimate) -> str:
    t, s = e.time, e.workload
    logits = e.memory.per_gpu_bytes.logits
    if not s.fused_loss and logits > 0.15 * e.memory.per_gpu_bytes.total:
        return (f"The loss holds {gib_text(logits)} per GPU (HF's fp32 logits): the fused loss "
                "(--fused-loss, advisor_ac.py in the plan) frees most of it, for a larger "
                "micro-batch or less checkpointing.")
    if t.offload_s > 0.3 * t.step_s:
        return "More GPU memory or more GPUs would remove the offload, which is the bottleneck."
    if t.exposed_comm_s > 0.2 * t.step_s:
        return ("Faster inter-node links or a larger micro-batch / global batch would hide more "
                "communication.")
    if s.act_ckpt != "none":
        return (f"More memory per GPU would allow less recomputation than {s.act_ckpt} "
                "checkpointing and a higher throughput.")
    return "The plan is compute-bound: only faster GPUs or better kernels (--compile) raise it much."
