"""Model states against the ZeRO paper, DeepSpeed's own estimators, and invariants."""

from __future__ import annotations

import pytest

from advisor.core.results import InfeasiblePlan
from advisor.strategies import get_strategy
from advisor.strategies.zero import straddle_surplus
from tests.helpers import context, run

P_7_5B = 7.5e9
ZERO_STAGES = ("ddp", "zero1", "zero2", "zero3")


@pytest.mark.parametrize(("strategy", "paper_gb"), [
    ("ddp", 120.0),   # (2 + 2 + 12) * 7.5e9 = 120e9
    ("zero1", 31.4),  # 4 * 7.5e9 + 12 * 7.5e9 / 64 = 30e9 + 1.406e9
    ("zero2", 16.6),  # 2 * 7.5e9 + 14 * 7.5e9 / 64 = 15e9 + 1.641e9
    ("zero3", 1.9),   # 16 * 7.5e9 / 64 = 1.875e9
    ("fsdp", 1.9),    # FULL_SHARD: 4 (fp32 shard) + 4 (fp32 grads) + 8 (moments) over 64
])
def test_zero_paper_worked_example(strategy, paper_gb):
    """ZeRO paper (Rajbhandari et al. 2020) Figure 1: 7.5B params, 64 GPUs, K=12, GB = 1e9."""
    ctx = context("64xA100", P_7_5B)
    states = get_strategy(strategy).model_states(ctx)
    assert states.paper_total / 1e9 == pytest.approx(paper_gb, abs=0.05)


def test_deepspeed_keeps_more_gradient_bytes_than_the_paper():
    """At the optimizer step DeepSpeed flattens the 16-bit gradient partition into an fp32 copy
    (4P/N, per sub-group for stage 3), which the paper does not count; ZeRO-2's 16-bit partition
    also holds whole the tensors cut by its edges (2 B x the straddle surplus). Both measured on
    real runs in tests/test_real_runs.py."""
    ctx = context("64xA100", P_7_5B)
    shard = P_7_5B / 64
    surplus = 2 * straddle_surplus(ctx.model, 64)
    for name, extra in (("zero1", 4 * shard), ("zero2", 4 * shard + surplus), ("zero3", 4 * shard)):
        s = get_strategy(name).model_states(ctx)
        assert s.gpu_total - s.paper_total == pytest.approx(extra)


ds_stage12 = pytest.importorskip("deepspeed.runtime.zero.stage_1_and_2")
ds_stage3 = pytest.importorskip("deepspeed.runtime.zero.stage3")


@pytest.mark.parametrize(("model", "gpus"), [("llama-2-7b", "8xA100"), ("llama-3-70b", "4x8xH100"),
                                             ("qwen2.5-14b", "2x8xA100-40GB")])
def test_zero2_matches_deepspeed_estimator(model, gpus):
    ctx = context(gpus, model)
    nodes, per_node = ctx.cluster.nodes, ctx.cluster.gpus_per_node
    _, ds_gpu = ds_stage12.estimate_zero2_model_states_mem_needs(
        ctx.P, per_node, nodes, cpu_offload=False)
    # DeepSpeed's 2P + 18P/N, plus the whole gradients of the tensors its partition edges cut,
    # which copy_grads_in_partition allocates and the estimator leaves out
    surplus = 2 * straddle_surplus(ctx.model, ctx.dp)
    assert get_strategy("zero2").model_states(ctx).gpu_total == pytest.approx(ds_gpu + surplus, abs=1)
    _, ds_gpu_off = ds_stage12.estimate_zero2_model_states_mem_needs(
        ctx.P, per_node, nodes, cpu_offload=True)
    assert get_strategy("zero2-offload").model_states(ctx).gpu_total == pytest.approx(ds_gpu_off)


@pytest.mark.parametrize(("model", "gpus"), [("llama-2-7b", "8xA100"), ("llama-3-70b", "4x8xH100")])
def test_zero3_matches_deepspeed_estimator(model, gpus):
    """DeepSpeed's ZeRO-3 estimate is 4 * largest_layer + 18P/N on the GPU (2 params16 + 4 fp32
    grads + 12 optimizer). Its gathered largest module is our buffer of that name. We count
    2P/N more: the persistent gradient partition in the bf16 grad-accumulation dtype, besides
    the fp32 copy step() makes, measured on real DeepSpeed runs (tests/test_real_runs.py);
    the fp32 copy is per sub-group, so it is capped at 4 B x sub_group_size (1e9)."""
    ctx = context(gpus, model)
    nodes, per_node = ctx.cluster.nodes, ctx.cluster.gpus_per_node
    largest = ctx.model.largest_layer_params
    gathered = "gathered largest module, params + grads"
    for name, offload in (("zero3", False), ("zero3-offload", True)):
        strategy = get_strategy(name)
        ds_cpu, ds_gpu, _ = ds_stage3.estimate_zero3_model_states_mem_needs(
            ctx.P, largest, per_node, nodes, cpu_offload=offload, cpu_offload_params=offload,
            zero_init=True)
        ours = strategy.model_states(ctx).gpu_total + strategy.buffers(ctx).items[gathered]
        shard = ctx.P / ctx.dp
        extra = 0 if offload else 2 * shard - 4 * max(0.0, shard - 1e9)
        assert ours == pytest.approx(ds_gpu + extra, abs=1)
        if offload:
            # Host per node: 18P/nodes (2 params16 + 4 fp32 grads + 12 optimizer) x 1.5 buffer.
            est = run(name, gpus, model)
            assert est.memory.cpu_per_node_bytes == pytest.approx(ds_cpu, rel=1e-9)


def test_zero2_offload_host_memory_vs_deepspeed():
    """DeepSpeed's ZeRO-2 offload host estimate, P * max(4 * GPUs, 16) * 1.5, also counts each
    rank's full fp32 model at load time (4 B/param/GPU); we count the steady-state partitions,
    (4 master + 8 moments + 4 fp32 grads) * P / nodes * 1.5, so ours is lower by design."""
    est = run("zero2-offload", "8xA100", "llama-2-7b")
    P = 6_738_415_616
    assert est.memory.cpu_per_node_bytes == pytest.approx(16 * P * 1.5)
    ds_cpu, _ = ds_stage12.estimate_zero2_model_states_mem_needs(P, 8, 1, cpu_offload=True)
    assert ds_cpu == pytest.approx(32 * P * 1.5) and est.memory.cpu_per_node_bytes < ds_cpu


@pytest.mark.parametrize("model", ["gpt2", "llama-2-7b", "llama-3-70b", 13e9])
@pytest.mark.parametrize("gpus", ["8xA100", "4x8xH100", "2x8xL40S"])
def test_sharding_order(model, gpus):
    """ZeRO-3 <= ZeRO-2 <= ZeRO-1 <= DDP per-GPU model-state memory (paper and real)."""
    ctx = context(gpus, model)
    states = [get_strategy(n).model_states(ctx) for n in ZERO_STAGES]
    for attr in ("paper_total", "gpu_total"):
        values = [getattr(s, attr) for s in reversed(states)]
        assert values == sorted(values), attr


@pytest.mark.parametrize("name", ["zero1", "zero2", "zero3", "fsdp", "fsdp-grad-op"])
def test_sharded_state_scales_as_one_over_n(name):
    ctx8, ctx16 = context("8xA100"), context("16xA100")
    s8, s16 = get_strategy(name).model_states(ctx8), get_strategy(name).model_states(ctx16)
    assert s16.optimizer == pytest.approx(s8.optimizer / 2)
    # More GPUs never raise per-GPU model states.
    previous = float("inf")
    for gpus in ("8xH100", "16xH100", "32xH100", "64xH100", "512xH100"):
        total = get_strategy(name).model_states(context(gpus)).gpu_total
        assert total <= previous
        previous = total


@pytest.mark.parametrize(("base", "offloaded"), [("zero2", "zero2-offload"),
                                                 ("zero3", "zero3-offload"),
                                                 ("zero3", "zero3-nvme"),
                                                 ("fsdp", "fsdp-offload")])
def test_offload_lowers_gpu_memory_and_adds_pcie_traffic(base, offloaded):
    a = run(base, "8xA100", "llama-2-13b", act_ckpt="full")
    b = run(offloaded, "8xA100", "llama-2-13b", act_ckpt="full")
    assert b.memory.per_gpu_bytes.total < a.memory.per_gpu_bytes.total
    assert a.communication.pcie_bytes_per_step == 0
    assert b.communication.pcie_bytes_per_step > 0
    assert b.memory.cpu_per_node_bytes > a.memory.cpu_per_node_bytes == 0


def test_nvme_strategy_puts_states_on_nvme():
    est = run("zero3-nvme", "8xA100", "llama-2-13b", act_ckpt="full")
    P = 13_015_864_320
    # 2 (16-bit params) + 12 (master + moments) bytes per param, all 8 ranks of the node.
    assert est.memory.nvme_bytes == pytest.approx(14 * P)
    assert est.communication.nvme_bytes_per_step > 0


def test_full_shard_moves_one_and_a_half_times_ddp():
    """FULL_SHARD: all-gather (fwd) + all-gather (bwd) + reduce-scatter = 3 (N-1)/N P B; DDP
    all-reduce = 2 (N-1)/N P B. In fp32 both move 4-byte elements: ratio exactly 1.5. (With bf16
    autocast DDP reduces fp32 gradients while FSDP moves bf16, so the ratio is 0.75.)"""
    for name in ("fsdp", "zero3"):
        shard = run(name, "2x8xA100", "llama-2-7b", precision="fp32")
        ddp = run("ddp", "2x8xA100", "llama-2-7b", precision="fp32")
        ratio = (shard.communication.per_gpu_bytes_per_step.total
                 / ddp.communication.per_gpu_bytes_per_step.total)
        assert ratio == pytest.approx(1.5)
    bf16 = run("fsdp", "2x8xA100", "llama-2-7b").communication.per_gpu_bytes_per_step.total
    ddp16 = run("ddp", "2x8xA100", "llama-2-7b").communication.per_gpu_bytes_per_step.total
    assert bf16 / ddp16 == pytest.approx(0.75)


def test_gradient_accumulation_per_strategy():
    """DDP and FSDP (no_sync) reduce once per step; ZeRO-2 reduces and ZeRO-3 / FULL_SHARD
    gather every micro-batch; ZeRO-1 reduces at the boundary."""
    def volume(name, ga):
        return run(name, "8xA100", "llama-2-7b", grad_accum=ga).communication.per_gpu_bytes_per_step.total
    assert volume("ddp", 4) == pytest.approx(volume("ddp", 1))
    assert volume("zero1", 4) == pytest.approx(volume("zero1", 1))
    # ZeRO-2: reduce-scatter x4, all-gather x1 -> (4 + 1) / (1 + 1)
    assert volume("zero2", 4) == pytest.approx(volume("zero2", 1) * 5 / 2)
    assert volume("zero3", 4) == pytest.approx(volume("zero3", 1) * 4)
    # FSDP: all-gathers x4 each (2 per micro-batch), one reduce-scatter -> (8 + 1) / (2 + 1)
    assert volume("fsdp", 4) == pytest.approx(volume("fsdp", 1) * 3)


def test_sync_each_micro_batch_trades_fsdp_memory_for_reduce_scatters():
    """Accumulating 4 micro-batches on 8 GPUs, llama-2-7b (P = 6,738,415,616): with the sync
    skipped FSDP holds 2P bytes of unsharded bf16 gradients and reduce-scatters once; synced
    every micro-batch it holds the 4P/8 fp32 shards and reduce-scatters 4 times."""
    P = 6_738_415_616
    ctx = context("8xA100", "llama-2-7b", grad_accum=4)
    synced = context("8xA100", "llama-2-7b", grad_accum=4, sync_each_micro_batch=True)
    fsdp = get_strategy("fsdp")
    assert fsdp.buffers(ctx).items["unsharded gradients (no_sync accumulation)"] == 2 * P
    assert "unsharded gradients (no_sync accumulation)" not in fsdp.buffers(synced).items
    assert fsdp.model_states(ctx).grads_at_backward_start == 0
    assert fsdp.model_states(synced).grads_at_backward_start == 4 * P / 8
    no_sync = run("fsdp", "8xA100", "llama-2-7b", grad_accum=4)
    each = run("fsdp", "8xA100", "llama-2-7b", grad_accum=4, sync_each_micro_batch=True)
    assert no_sync.memory.per_gpu_bytes.total - each.memory.per_gpu_bytes.total > 2 * P - 4 * P / 8 - 2**30
    # bytes per step: 8 all-gathers + 1 reduce-scatter vs 8 + 4, each (7/8) x 2P
    vol = no_sync.communication.per_gpu_bytes_per_step.total
    assert each.communication.per_gpu_bytes_per_step.total == pytest.approx(vol * 12 / 9)
    # without accumulation the flag changes nothing
    assert (run("fsdp", "8xA100", "llama-2-7b", sync_each_micro_batch=True).memory.per_gpu_bytes.total
            == run("fsdp", "8xA100", "llama-2-7b").memory.per_gpu_bytes.total)
    # DDP: the all-reduce runs every micro-batch, memory is the same (gradients are whole anyway)
    ddp, ddp_each = (run("ddp", "8xA100", 1e9, grad_accum=4, sync_each_micro_batch=s) for s in (False, True))
    assert ddp_each.communication.per_gpu_bytes_per_step.total == pytest.approx(
        4 * ddp.communication.per_gpu_bytes_per_step.total)
    assert ddp_each.memory.per_gpu_bytes.total == ddp.memory.per_gpu_bytes.total


def test_hsdp_shards_within_a_node_and_reduces_across_nodes():
    hsdp = run("hsdp", "4x8xH100", "llama-3-70b", act_ckpt="full")
    fsdp = run("fsdp", "4x8xH100", "llama-3-70b", act_ckpt="full")
    # sharded over 8 instead of 32 ranks: 4x the sharded state
    assert hsdp.memory.per_gpu_bytes.optimizer == pytest.approx(4 * fsdp.memory.per_gpu_bytes.optimizer)
    inter = hsdp.communication.per_gpu_bytes_per_step.inter_node
    assert 0 < inter < fsdp.communication.per_gpu_bytes_per_step.inter_node
    one_node = run("hsdp", "8xH100", "llama-3-8b")
    assert isinstance(one_node, InfeasiblePlan) and "2 nodes" in one_node.reason


def test_straddle_surplus_by_hand():
    """gpt2 on 2 ranks: tensors in order wte 38,597,376, wpe 786,432, then per layer
    [ln1 w, ln1 b, ...]. Total 124,439,808 -> partition 62,219,904 elements; rank 0 holds whole
    every tensor starting before 62,219,904 and rank 1 the one cut at that edge too, so the
    surplus is the largest of (rank's whole tensors - P/2)."""
    from advisor.core.model import preset

    m = preset("gpt2")
    sizes = m.parameter_tensors()
    assert sum(sizes) == 124_439_808
    edge, start, cut = 62_219_904, 0, None
    for size in sizes:
        if start < edge < start + size:
            cut = (start, size)
        start += size
    assert cut is not None
    rank0 = cut[0] + cut[1]  # everything up to the end of the cut tensor
    rank1 = sum(sizes) - cut[0]  # the cut tensor and everything after
    assert straddle_surplus(m, 2) == max(rank0, rank1) - 124_439_808 // 2
    assert straddle_surplus(m, 1) == 0


def test_parameter_tensors_add_up_to_the_parameter_count():
    """The tensor list DeepSpeed partitions is the same model as the exact count."""
    from advisor.core.model import model_presets

    for name, spec in model_presets().items():
        assert sum(spec.parameter_tensors()) == spec.shape_params, name


def test_an_fsdp_estimate_that_only_the_no_sync_buffer_breaks_names_the_fix():
    """llama-2-13b, 8 x A100-40GB, accumulation 8, full checkpointing: the 2P unsharded gradient
    buffer takes it over 40 GB; the estimate's fix is syncing every micro-batch, which fits."""
    held = run("fsdp", "8xA100-40GB", "llama-2-13b", grad_accum=8, act_ckpt="full")
    assert not held.fits and "--sync-each-micro-batch" in held.fix
    synced = run("fsdp", "8xA100-40GB", "llama-2-13b", grad_accum=8, act_ckpt="full",
                 sync_each_micro_batch=True)
    assert synced.fits and f"{synced.memory.per_gpu_bytes.total / 2**30:.1f} GiB" in held.fix
    # no fix offered where syncing would not be enough (70B on the same GPUs)
    assert run("fsdp", "8xA100-40GB", "llama-3-70b", grad_accum=8, act_ckpt="full").fix is None


@pytest.mark.parametrize("world", [1, 2, 3, 8, 100, 4096])
def test_straddle_surplus_matches_a_rank_by_rank_count(world):
    """straddle_surplus finds the largest rank at the points where tensor ranges begin or end;
    counting every rank's tensors one by one gives the same answer."""
    from advisor.core.model import preset

    for name in ("gpt2", "llama-2-7b", "llama-3-70b"):
        model = preset(name)
        sizes = model.parameter_tensors()
        total = sum(sizes)
        partition = -(-total // (2 * world)) * 2
        held, start = [0] * world, 0
        for size in sizes:
            for rank in range(start // partition, min((start + size - 1) // partition, world - 1) + 1):
                held[rank] += size
            start += size
        assert straddle_surplus(model, world) == max(0, max(held) - total // world), (name, world)
