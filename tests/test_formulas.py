"""Exact values, with the arithmetic, for each formula module."""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor.core import activations, compute
from advisor.core.communication import Collective, bytes_per_gpu, collective_time_s
from advisor.core.errors import Infeasible
from advisor.core.hardware import ClusterOverrides, parse_cluster
from advisor.core.layout import Group, ParallelLayout
from advisor.core.model import preset
from advisor.core.priors import Curve, default_priors
from advisor.core.results import InfeasiblePlan
from advisor.core.units import parse_count
from advisor.core.workload import Workload, optimizer_step_bytes_per_param
from tests.helpers import context, run

LLAMA2_7B = 6_738_415_616


def test_flops_per_token_llama_2_7b():
    m = preset("llama-2-7b")
    # 6 * 6,738,415,616 + 12 * 32 layers * 4096 hidden * 4096 seq
    assert m.mfu_flops_per_token(4096) == 6 * LLAMA2_7B + 12 * 32 * 4096 * 4096 == 46_872_944_640
    # Executed matmuls: the 32000 x 4096 input embedding is a lookup, and the 65 RMSNorm
    # weights (2 per layer + final) of 4096 are not matmuls
    assert m.dense_flops_per_token() == 6 * (LLAMA2_7B - 131_072_000 - 65 * 4096)
    assert m.attention_flops_per_token(4096) == 12 * 32 * 4096 * 4096
    # tied (gpt2): the embedding is the output head, so every weight is in a matmul except the
    # learned positions and 25 LayerNorms (weight + bias, 2 x 768)
    assert preset("gpt2").dense_flops_per_token() == 6 * (124_439_808 - 1024 * 768 - 25 * 1536)


def test_activation_bytes_llama_2_7b():
    m = preset("llama-2-7b")
    w = Workload(seq_len=4096, micro_batch=1)
    bf16 = 2  # residual stream of a bf16 module (FSDP mixed precision, DeepSpeed)
    # per token per layer, bytes: 2 RMSNorms x (4 fp32 upcast + 2 normalized + 2 output) x 4096
    # = 65,536; q,k,v,out 2 x (4096 + 2 x 4096 + 4096) = 32,768; gated MLP 2 x 4 x 11008 = 88,064
    per_token = 65_536 + 32_768 + 88_064
    assert activations.layer_bytes(m, w, bf16) == 4096 * per_token == 763_363_328
    assert activations.stack_bytes(m, w, bf16) == 32 * 763_363_328
    # full checkpointing: 32 layer inputs of 2 x 4096 x 4096 bytes + one layer recomputed
    full = w.model_copy(update={"act_ckpt": "full"})
    assert activations.stack_bytes(m, full, bf16) == 32 * 2 * 4096 * 4096 + 763_363_328
    # selective: input + 2 norm outputs + q,k,v,out + gate,up outputs, 2 bytes each
    sel = w.model_copy(update={"act_ckpt": "selective"})
    kept = 4096 + 2 * 4096 + 4 * 4096 + 2 * 11008
    assert activations.stack_bytes(m, sel, bf16) == 32 * 2 * 4096 * kept
    # compiled (fused) norms keep 2 B input + 2 B output instead of 4 + 2 + 2
    compiled = w.model_copy(update={"compile": True})
    assert activations.layer_bytes(m, compiled, bf16) == 4096 * (per_token - 2 * 4 * 4096)
    # no flash attention: + fp32 softmax and its bf16 copy, 6 * heads * s^2
    eager = w.model_copy(update={"flash_attention": False})
    assert activations.layer_bytes(m, eager, bf16) == 763_363_328 + 6 * 32 * 4096**2
    # DDP under autocast: the module and residual stream stay fp32; each norm keeps fp32 input
    # and output (8 B) and a bf16 cast per consuming matmul: (8 + 2 x 3) + (8 + 2 x 2) = 26 B
    ddp = 4096 * ((8 + 6 + 8 + 4) * 4096 + 32_768 + 88_064)
    assert activations.layer_bytes(m, w, 4) == ddp
    # pure fp32: every saved tensor is 4 B; norms 4 + 4 + 4
    fp32 = Workload(seq_len=4096, precision="fp32")
    assert activations.layer_bytes(m, fp32, 4) == 4096 * (2 * 12 * 4096 + 2 * 32_768 + 2 * 88_064)


def test_logits_bytes():
    m = preset("llama-3-8b")
    w = Workload(seq_len=8192, micro_batch=2)
    # at the start of backward: fp32 log-softmax + two fp32 gradients, 12 B over
    # 8192 x 2 x 128256, plus the final RMSNorm's (4 + 2 + 2) B x 4096 per token
    assert activations.logits_bytes(m, w, 2) == 12 * 8192 * 2 * 128256 + 8 * 8192 * 2 * 4096
    # the plan's fused loss (advisor_ac's chunked cross-entropy): one chunk of 2^26 // 16384
    # tokens = 4096 vocab entries at (4 B fp32 + 2 B bf16), the fp32 gradient of the hidden
    # states (4 B x 4096), 20 B per token; plus the final norm
    fused = w.model_copy(update={"fused_loss": True})
    tokens = 8192 * 2
    assert activations.vocab_chunk(tokens, 128256) == 4096
    assert activations.logits_bytes(m, fused, 2) == (6 * tokens * 4096 + 4 * tokens * 4096
                                                     + 20 * tokens + 8 * tokens * 4096)
    # in pure fp32 the chunk's logits and its cast are 4 B each; norms 4 + 4 + 4
    fp32 = Workload(seq_len=8192, micro_batch=2, precision="fp32", fused_loss=True)
    assert activations.logits_bytes(m, fp32, 4) == (8 * tokens * 4096 + 4 * tokens * 4096
                                                    + 20 * tokens + 12 * tokens * 4096)


ONE_NODE, TWO_NODES, REPLICAS = Group(8, 1), Group(8, 2), Group(1, 2)


def test_ring_bytes_one_and_two_nodes():
    # all-reduce over 8: 2 * 7/8 * 1e9 inside the node
    t = bytes_per_gpu("all_reduce", ONE_NODE, 1e9)
    assert (t.intra_node, t.inter_node) == (pytest.approx(1.75e9), 0)
    # over 2 x 8: 2 * 15/16 * 1e9 in all; across nodes a 2-node ring, 2 * 1/2 * 1e9, shared by 8
    t = bytes_per_gpu("all_reduce", TWO_NODES, 1e9)
    assert t.inter_node == pytest.approx(1e9 / 8)
    assert t.intra_node + t.inter_node == pytest.approx(1.875e9)
    # all-gather: (n - 1) / n
    assert bytes_per_gpu("all_gather", ONE_NODE, 1e9).intra_node == pytest.approx(0.875e9)
    # HSDP's replica group: one GPU per node, 2 nodes
    t = bytes_per_gpu("all_reduce", REPLICAS, 1e9)
    assert (t.intra_node, t.inter_node) == (0, pytest.approx(1e9))


@pytest.mark.parametrize(("layout", "dims", "group"), [
    (ParallelLayout.replicate(16), ("dp_replicate",), Group(8, 2)),   # DDP over 2 nodes of 8
    (ParallelLayout.shard(16), ("dp_shard",), Group(8, 2)),           # FSDP / ZeRO
    (ParallelLayout.hybrid(2, 8), ("dp_shard",), Group(8, 1)),        # HSDP: shard inside a node
    (ParallelLayout.hybrid(2, 8), ("dp_replicate",), Group(1, 2)),    # ... replicate across
    (ParallelLayout.hybrid(2, 16), ("dp_shard",), Group(8, 2)),       # shard groups of 2 nodes
    (ParallelLayout.hybrid(2, 16), ("dp_replicate",), Group(1, 2)),   # 32 GPUs: rank r, r + 16
    (ParallelLayout.hybrid(4, 4), ("dp_shard",), Group(4, 1)),        # half a node per shard group
    (ParallelLayout.hybrid(4, 4), ("dp_replicate",), Group(2, 2)),    # ranks 0, 4 | 8, 12
])
def test_layout_groups_on_nodes_of_8(layout, dims, group):
    layout.check(layout.world, 8)
    assert layout.group(dims, 8) == group


def test_layout_refuses_degrees_that_do_not_fill_the_cluster_or_align_with_nodes():
    with pytest.raises(Infeasible, match="multiply to 16"):
        ParallelLayout.shard(16).check(24, 8)
    with pytest.raises(Infeasible, match="neither fits in a node"):
        ParallelLayout.hybrid(4, 6).check(24, 8)  # shard groups of 6 straddle nodes of 8


def test_collective_time_uses_the_slower_tier():
    priors = default_priors()
    c = Collective("all_reduce", "backward", ONE_NODE, 1e9, 1e9, False, "x")  # all 8 GPUs
    c2 = Collective("all_reduce", "backward", TWO_NODES, 1e9, 1e9, False, "x")  # all 16
    one, two = parse_cluster("8xA100"), parse_cluster("2x8xA100")
    t1 = collective_time_s(c, one, priors)
    p = priors.collective
    # 1.75e9 bytes at 300 GB/s x efficiency + one call's latency
    assert t1 == pytest.approx(1.75e9 / (300e9 * p.intra_efficiency) + p.intra_latency_s)
    # With 8 x 200 Gbit/s per node, a hierarchical all-reduce sends only 1/8 of S per GPU across
    # nodes: NVLink stays the bottleneck (as in the B200 4-node busbw of reference/comm_bandwidth).
    assert collective_time_s(c2, two, priors) == pytest.approx(
        1.75e9 / (300e9 * p.intra_efficiency) + p.inter_latency_s)
    # On a 100 Gbit/s Ethernet node the network is the bottleneck: 1e9/8 B at 12.5 GB/s x eff.
    slow = parse_cluster("2x8xA100", ClusterOverrides(inter_node_gbps=100))
    assert collective_time_s(c2, slow, priors) == pytest.approx(
        1e9 / 8 / (12.5e9 / 8 * p.inter_efficiency) + p.inter_latency_s)


def test_optimizer_step_bytes():
    # AdamW mixed: read master 4 + moments 8 + fp32 grad 4, write 12, write bf16 param 2 = 30
    assert optimizer_step_bytes_per_param("bf16", "adamw") == 30
    # fp32 AdamW: read 4 + 8 + 4, write 4 + 8 = 28
    assert optimizer_step_bytes_per_param("fp32", "adamw") == 28
    # pure bf16 AdamW (no master weights): read 2 + 4 + 2, write 2 + 4 = 14
    assert optimizer_step_bytes_per_param("bf16", "adamw", master_weights=False) == 14


def test_pure_16_bit_training_keeps_no_fp32_copies():
    """llama-2-7b without master weights: DDP holds 2 + 2 + 4 B per parameter (bf16 weights,
    gradients and AdamW moments) plus 2 B of buckets and no autocast copies; FSDP shards
    2 + 2 + 4 B over 8 GPUs, half its mixed-precision 16 B; DeepSpeed refuses."""
    ddp = run("ddp", "8xA100", "llama-2-7b", master_weights=False)
    m = ddp.memory.per_gpu_bytes
    assert (m.params, m.optimizer, m.buffers) == (2 * LLAMA2_7B, 4 * LLAMA2_7B, 2 * LLAMA2_7B)
    pure = run("fsdp", "8xA100", "llama-2-7b", master_weights=False, grad_accum=2,
               sync_each_micro_batch=True)
    mixed = run("fsdp", "8xA100", "llama-2-7b", grad_accum=2, sync_each_micro_batch=True)
    p, q = pure.memory.per_gpu_bytes, mixed.memory.per_gpu_bytes
    assert (p.params, p.optimizer) == (2 * LLAMA2_7B / 8, 4 * LLAMA2_7B / 8)
    assert (q.params, q.optimizer) == (4 * LLAMA2_7B / 8, 8 * LLAMA2_7B / 8)
    assert p.grads == 2 * LLAMA2_7B / 8 and q.grads == 4 * LLAMA2_7B / 8  # accumulated shards
    zero3 = run("zero3", "8xA100", "llama-2-7b", master_weights=False)
    assert isinstance(zero3, InfeasiblePlan) and "fp32 master" in zero3.reason


def test_ddp_memory_by_component():
    e = run("ddp", "8xA100", "llama-2-7b")
    m = e.memory.per_gpu_bytes
    # autocast keeps the module in fp32: 4 B params, 4 B grads, 8 B AdamW moments
    assert (m.params, m.optimizer) == (4 * LLAMA2_7B, 8 * LLAMA2_7B)
    # peak at backward start: no gradients yet (zero_grad sets them to None) ...
    assert m.grads == 0 and e.memory.peak_phase == "backward_start"
    # ... DDP's fp32 gradient buckets (4 B) + autocast bf16 copies of the matmul weights (2 B;
    # not the 32000 x 4096 embedding, nor the 65 norms of 4096)
    assert m.buffers == 4 * LLAMA2_7B + 2 * (LLAMA2_7B - 131_072_000 - 65 * 4096)
    assert m.total == pytest.approx(sum(getattr(m, k) for k in (
        "params", "grads", "optimizer", "activations", "logits", "buffers", "overhead")))


def test_optimizer_variants_change_state_bytes():
    adam = run("fsdp", "8xA100", "llama-2-7b").memory.per_gpu_bytes.optimizer
    adam8 = run("fsdp", "8xA100", "llama-2-7b", optimizer="adam8bit").memory.per_gpu_bytes.optimizer
    sgd = run("fsdp", "8xA100", "llama-2-7b", optimizer="sgd").memory.per_gpu_bytes.optimizer
    # FSDP keeps fp32 shards as the parameters; moments: 8 / 2 / 4 B per param over 8 GPUs
    assert (adam, adam8, sgd) == (8 * LLAMA2_7B / 8, 2 * LLAMA2_7B / 8, 4 * LLAMA2_7B / 8)


def test_efficiency_is_data_and_size_dependent():
    small, large = context(model="gpt2", seq_len=1024), context(model="llama-3-70b")
    assert compute.dense_efficiency(small) < compute.dense_efficiency(large)
    curve = Curve(x=[1024, 4096], y=[0.2, 0.6])
    assert curve(2048) == pytest.approx(0.4)  # halfway in log2
    assert (curve(10), curve(1e9)) == (0.2, 0.6)  # clamped


def test_fp8_uses_fp8_peak_and_compile_speeds_up():
    bf16 = run("fsdp", "8xH100", "llama-3-8b")
    fp8 = run("fsdp", "8xH100", "llama-3-8b", precision="fp8")
    compiled = run("fsdp", "8xH100", "llama-3-8b", compile=True)
    assert fp8.time.compute_s < bf16.time.compute_s
    assert compiled.time.compute_s < bf16.time.compute_s
    assert compiled.memory.per_gpu_bytes.activations < bf16.memory.per_gpu_bytes.activations


def test_fp8_speeds_up_the_linear_layers_only():
    """fp8 (Transformer Engine) runs the dense GEMMs at the fp8 peak times the fp8 ratio;
    attention stays bf16, so its seconds are the bf16 run's, exactly."""
    bf16, fp8 = (context("8xH100", "llama-3-8b", seq_len=8192, precision=p) for p in ("bf16", "fp8"))
    m, s = bf16.model, 8192
    gpu, priors = bf16.cluster.gpu, bf16.priors

    def split(ctx):
        total = compute.micro_batch_time(ctx).forward_s * 3
        dense = m.dense_flops_per_token() * s / (gpu.peak_flops(ctx.workload.precision)
                                                 * compute.dense_efficiency(ctx))
        return dense, total - dense

    dense16, attention16 = split(bf16)
    dense8, attention8 = split(fp8)
    assert attention8 == pytest.approx(attention16) and attention16 > 0
    ratio = gpu.peak_flops("fp8") / gpu.peak_flops("bf16") * priors.compute.fp8_efficiency_ratio
    assert dense16 / dense8 == pytest.approx(ratio)


def test_attention_efficiency_is_per_architecture():
    """The same model and sequence on A100 and H100: attention seconds scale with each
    architecture's attention ratio (flash attention reaches a lower fraction of H100's peak)."""
    priors = default_priors()
    assert priors.attention_efficiency["hopper"] < priors.attention_efficiency["ampere"]
    ctx = context("8xH100", "llama-2-7b", seq_len=16384)

    def forward_s(factor: float) -> float:
        ratio = factor * ctx.priors.attention_efficiency["hopper"]
        priors = ctx.priors.model_copy(update={"attention_efficiency": {
            **ctx.priors.attention_efficiency, "hopper": ratio}})
        return compute.micro_batch_time(replace(ctx, priors=priors)).forward_s

    # t(k) = dense + attention / k: doubling the ratio saves attention / 2, quadrupling 3/4 of it
    attention = 2 * (forward_s(1) - forward_s(2))
    assert attention > 0
    assert forward_s(1) - forward_s(4) == pytest.approx(0.75 * attention)


def test_overlapped_collectives_cost_the_interference_fraction():
    """exposed = max(interference x comm, comm - overlap x window) per phase: FSDP on one node
    with a long compute window hides everything but the interference fraction."""
    from advisor.core.timing import step_inputs, step_parts
    from advisor.strategies import get_strategy

    ctx = context("8xA100", "llama-2-7b", micro_batch=8, act_ckpt="full")
    x = step_inputs(ctx, get_strategy("fsdp"))
    assert x.every_s["forward"] < x.overlap * x.forward_s  # the window could hide it all
    comm = sum(x.every_s.values()) + sum(x.once_s.values())
    parts = step_parts(ctx, get_strategy("fsdp"))
    assert parts.exposed_comm_s == pytest.approx(ctx.priors.collective.interference * comm)
    none = ctx.priors.model_copy(update={"collective": ctx.priors.collective.model_copy(
        update={"interference": 0.0})})
    assert step_parts(replace(ctx, priors=none),
                      get_strategy("fsdp")).exposed_comm_s == 0.0


def test_full_checkpointing_trades_memory_for_time():
    none = run("fsdp", "8xA100", "llama-2-7b")
    full = run("fsdp", "8xA100", "llama-2-7b", act_ckpt="full")
    assert full.memory.per_gpu_bytes.activations < none.memory.per_gpu_bytes.activations
    # recompute adds one forward: compute 4/3 of the no-checkpointing time
    assert full.time.compute_s == pytest.approx(none.time.compute_s * 4 / 3)
    assert full.throughput.hfu == pytest.approx(full.throughput.mfu * 4 / 3)


def test_parse_count():
    assert parse_count("13e9") == 13e9 and parse_count("7B") == 7e9 and parse_count("300B") == 3e11
    assert parse_count("4M", binary=True) == 4 * 2**20
    with pytest.raises(ValueError):
        parse_count("seven")


def test_time_range_brackets_the_estimate():
    e = run("zero3", "2x8xH100", "llama-3-8b")
    assert e.time.low_s < e.time.step_s < e.time.high_s
