"""One estimate: a pure function of (cluster, model, workload, strategy, priors) -> Estimate,
or an InfeasiblePlan when the strategy cannot run there at all."""

from __future__ import annotations

from dataclasses import replace

from advisor.core import compute
from advisor.core.communication import bytes_per_gpu
from advisor.core.context import Context
from advisor.core.engines import Offload
from advisor.core.errors import Infeasible
from advisor.core.hardware import Cluster
from advisor.core.memory import does_not_fit, memory_breakdown
from advisor.core.model import ModelSpec
from advisor.core.priors import Priors
from advisor.core.protocol import Strategy, make_context
from advisor.core.results import (
    ClusterInfo,
    CollectiveReport,
    CommBytes,
    Communication,
    Estimate,
    InfeasiblePlan,
    Memory,
    ModelInfo,
    StepTime,
    Throughput,
)
from advisor.core.timing import StepInputs, combine, step_inputs
from advisor.core.units import gib_text
from advisor.core.workload import Workload


def cluster_info(cluster: Cluster) -> ClusterInfo:
    return ClusterInfo(spec=cluster.spec, gpu=cluster.gpu.name, num_gpus=cluster.num_gpus,
                       nodes=cluster.nodes, gpus_per_node=cluster.gpus_per_node,
                       gpu_memory_bytes=cluster.gpu_memory_bytes,
                       intra_node_link=cluster.gpu.intra_node_link,
                       inter_node_bytes_per_s=cluster.inter_node_bytes_per_s,
                       nvme_bytes_per_s_per_node=cluster.nvme_bytes_per_s_per_node,
                       notes=list(cluster.notes))


def model_info(model: ModelSpec) -> ModelInfo:
    moe = model.moe
    return ModelInfo(name=model.name, family=model.family, params=model.params,
                     active_params=model.active_params, experts=moe.experts if moe else None,
                     top_k=moe.top_k if moe else None, layers=model.layers,
                     hidden=model.hidden, heads=model.heads, kv_heads=model.kv_heads,
                     ffn=model.ffn, vocab=model.vocab, gated_mlp=model.gated_mlp,
                     tied_embeddings=model.tied_embeddings, inferred=model.inferred,
                     decoder_layer_class=model.decoder_layer_class, source=model.source,
                     architecture=model)


def _communication(ctx: Context, inputs: StepInputs) -> Communication:
    """Bytes by tier and time per collective, from the step's already-timed collectives."""
    ga = ctx.workload.grad_accum
    reports, intra, inter = [], 0.0, 0.0
    for c, seconds in inputs.collectives:
        count = ga if c.per_micro_batch else 1
        tiers = bytes_per_gpu(c.op, c.group, c.buffer_bytes)
        reports.append(CollectiveReport(
            what=c.what, op=c.op, phase=c.phase, group_size=c.group.size,
            ranks_per_node=c.group.ranks_per_node, nodes=c.group.nodes,
            count_per_step=count, buffer_bytes=c.buffer_bytes,
            intra_node_bytes=count * tiers.intra_node, inter_node_bytes=count * tiers.inter_node,
            time_s=count * seconds))
        intra += count * tiers.intra_node
        inter += count * tiers.inter_node
    host = inputs.host
    return Communication(
        per_gpu_bytes_per_step=CommBytes(total=intra + inter, intra_node=intra, inter_node=inter),
        collectives=reports,
        pcie_bytes_per_step=host.pcie_overlappable_bytes + host.pcie_exposed_bytes,
        nvme_bytes_per_step=host.nvme_bytes, time_s=inputs.comm_total_s)


def _sync_fix(ctx: Context, strategy: Strategy) -> str | None:
    """For an FSDP plan that accumulates with the sync skipped and does not fit: syncing every
    micro-batch, when that alone makes it fit (the unsharded gradient buffer goes)."""
    w = ctx.workload
    if strategy.family != "fsdp" or w.grad_accum == 1 or w.sync_each_micro_batch:
        return None
    synced = replace(ctx, workload=w.model_copy(update={"sync_each_micro_batch": True}))
    memory = memory_breakdown(synced, strategy)
    if does_not_fit(memory, ctx.priors.offload.host_ram_usable_fraction) is not None:
        return None
    return (f"reduce gradients every micro-batch (--sync-each-micro-batch, Accelerate's "
            f"sync_each_batch): no unsharded gradient buffer, {gib_text(memory.per_gpu_bytes.total)} "
            "per GPU")


def feasible_context(cluster: Cluster, model: ModelSpec, workload: Workload, strategy: Strategy,
                     priors: Priors) -> Context | InfeasiblePlan:
    """The context the strategy runs in, or an InfeasiblePlan saying why it cannot run here."""
    try:
        ctx = make_context(cluster, model, workload, priors, strategy)
        ctx.layout.check(cluster.num_gpus, cluster.gpus_per_node)
        strategy.check(ctx)
        cluster.gpu.peak_flops(workload.precision)
    except Infeasible as exc:
        return InfeasiblePlan(strategy=strategy.name, engine=strategy.engine, reason=exc.reason,
                              fix=exc.fix, workload=workload, cluster=cluster_info(cluster),
                              model=model_info(model))
    return ctx


def estimate(cluster: Cluster, model: ModelSpec, workload: Workload, strategy: Strategy,
             priors: Priors, tokens_to_train: float | None = None) -> Estimate | InfeasiblePlan:
    """Memory, communication, step time (with its low/high range) and throughput of one plan,
    fitting or not; an InfeasiblePlan when the strategy cannot run here at all."""
    ctx = feasible_context(cluster, model, workload, strategy, priors)
    if isinstance(ctx, InfeasiblePlan):
        return ctx
    memory = memory_breakdown(ctx, strategy)
    inputs = step_inputs(ctx, strategy)
    parts = combine(inputs)
    sigma_compute = 1 + priors.uncertainty["compute_efficiency"]
    sigma_comm = 1 + priors.uncertainty["collective_efficiency"]
    low = combine(inputs, sigma_compute, sigma_comm)
    high = combine(inputs, 1 / sigma_compute, 1 / sigma_comm)
    time = StepTime(step_s=parts.step_s, compute_s=parts.compute_s, framework_s=parts.framework_s,
                    exposed_comm_s=parts.exposed_comm_s, optimizer_s=parts.optimizer_s,
                    offload_s=parts.offload_s, low_s=low.step_s, high_s=high.step_s)
    tokens_per_step = workload.tokens_per_step(ctx.dp)
    tps_gpu = tokens_per_step / parts.step_s / cluster.num_gpus
    peak = cluster.gpu.peak_flops(workload.precision)
    throughput = Throughput(
        tokens_per_step=tokens_per_step, tokens_per_s_per_gpu=tps_gpu,
        mfu=model.mfu_flops_per_token(workload.seq_len) * tps_gpu / peak,
        hfu=compute.hardware_flops_per_token(ctx) * tps_gpu / peak,
        time_to_train_s=(tokens_to_train / (tps_gpu * cluster.num_gpus)
                         if tokens_to_train else None))
    reason = does_not_fit(memory, priors.offload.host_ram_usable_fraction)
    fix = _sync_fix(ctx, strategy) if reason else None
    notes = ([moe_note(model)] if model.moe else []) + assumption_notes(cluster, memory, strategy.offload)
    return Estimate(strategy=strategy.name, engine=strategy.engine, fits=reason is None,
                    reason=reason, fix=fix, workload=workload, layout=ctx.layout,
                    engine_config=strategy.engine_config(ctx), offload=strategy.offload,
                    cluster=cluster_info(cluster), model=model_info(model), memory=memory,
                    communication=_communication(ctx, inputs), time=time, throughput=throughput,
                    notes=notes)


def moe_note(model: ModelSpec) -> str:
    """What an MoE estimate assumes about the experts."""
    moe = model.moe
    if moe is None:
        raise ValueError(f"{model.name} is not a mixture of experts")
    return (f"mixture of experts: every GPU holds (or shards) all {moe.experts} experts of each of "
            f"the {moe.moe_layers} MoE layers and computes {moe.top_k} per token; the plan has no "
            "expert parallelism (not modelled yet)")


def assumption_notes(cluster: Cluster, memory: Memory, offload: Offload) -> list[str]:
    """The cluster defaults this plan's verdict or speed rests on, each with the flag that sets
    it: host RAM when it holds offloaded state, NVMe for ZeRO-Infinity, the network across nodes."""
    node, gpu, notes = cluster.gpu.node, cluster.gpu.name, []
    typical = f"a typical {gpu} server"
    if memory.cpu_per_node_bytes > 0 and "cpu_ram_gib" in cluster.assumed:
        notes.append(f"assumed {node.cpu_ram_in_GiB:,.0f} GiB of host RAM per node ({typical}); "
                     "pass --cpu-ram-gib")
    if offload == "nvme" and "nvme_tib" in cluster.assumed:
        notes.append(f"assumed {node.nvme_capacity_in_TiB:g} TiB of NVMe per node ({typical}); "
                     "pass --nvme-tib")
    if offload == "nvme" and "nvme_gbps" in cluster.assumed:
        notes.append(f"assumed {node.nvme_in_Gbit_per_sec:,.0f} Gbit/s of NVMe bandwidth per node "
                     f"({typical}); pass --nvme-gbps")
    if cluster.nodes > 1 and "inter_node_gbps" in cluster.assumed:
        notes.append(f"assumed {node.inter_node_in_Gbit_per_sec:,.0f} Gbit/s of network per node "
                     f"({typical}); pass --inter-node-gbps")
    return notes
