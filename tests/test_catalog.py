"""The GPU catalog, cluster-spec parsing and the model presets' exact parameter counts."""

import pytest

from advisor.core.errors import InvalidInput
from advisor.core.hardware import gpu_catalog, parse_cluster, resolve_gpu
from advisor.core.model import infer_from_params, model_presets, preset

REQUIRED_GPUS = {
    "V100-16GB", "V100-32GB", "A10G", "L4", "L40S", "A100-40GB", "A100-80GB",
    "H100-80GB", "H100-PCIe", "H200", "B200", "RTX-4090", "MI300X",
}


def test_every_gpu_file_loads_and_required_names_exist():
    catalog = gpu_catalog()
    assert set(catalog) >= REQUIRED_GPUS
    for name, gpu in catalog.items():
        assert gpu.name == name
        assert gpu.source, f"{name}: source must name the datasheet"
        assert gpu.node.gpus_per_node >= 1


def test_no_alias_or_short_name_points_at_two_gpus():
    seen: dict[str, str] = {}
    for gpu in gpu_catalog().values():
        for key in [gpu.name, *gpu.aliases, *gpu.default_for]:
            assert key.lower() not in seen, f"{key} is claimed by {seen.get(key.lower())} too"
            seen[key.lower()] = gpu.name


def test_precision_support_follows_the_architecture():
    catalog = gpu_catalog()
    assert not catalog["V100-32GB"].supports("bf16")
    assert not catalog["A100-80GB"].supports("fp8")
    assert catalog["H100-80GB"].supports("fp8")
    assert catalog["L40S"].supports("fp8")
    # fp8 dense peak is twice bf16 dense on Hopper: 1979 = 2 x 989.5
    assert catalog["H100-80GB"].peak_flops("fp8") == 2 * catalog["H100-80GB"].peak_flops("bf16")


@pytest.mark.parametrize(("short", "full"), [
    ("A100", "A100-80GB"), ("H100", "H100-80GB"), ("V100", "V100-32GB"),
])
def test_ambiguous_short_names_resolve_with_a_note(short, full):
    gpu, note = resolve_gpu(short)
    assert gpu.name == full
    assert note is not None and full in note


def test_alias_resolves_without_a_note():
    gpu, note = resolve_gpu("h100-sxm5-80gb")
    assert gpu.name == "H100-80GB"
    assert note is None


@pytest.mark.parametrize(("spec", "gpu", "nodes", "per_node"), [
    ("8xA100", "A100-80GB", 1, 8),
    ("2x8xH100", "H100-80GB", 2, 8),
    ("64xH100", "H100-80GB", 8, 8),
    ("4xA100-40GB", "A100-40GB", 1, 4),
    ("8xL40S", "L40S", 1, 8),
])
def test_parse_cluster(spec, gpu, nodes, per_node):
    cluster = parse_cluster(spec)
    assert (cluster.gpu.name, cluster.nodes, cluster.gpus_per_node) == (gpu, nodes, per_node)
    assert cluster.num_gpus == nodes * per_node


def test_l40s_cluster_talks_over_pcie():
    cluster = parse_cluster("8xL40S")
    assert cluster.gpu.intra_node_link.startswith("PCIe")
    assert cluster.intra_node_bytes_per_s == cluster.pcie_bytes_per_s  # 32 GB/s, Gen4 x16


def test_short_name_cluster_carries_the_note():
    assert any("A100-80GB" in note for note in parse_cluster("8xA100").notes)


def test_unknown_gpu_names_the_field_and_lists_the_catalog():
    with pytest.raises(InvalidInput) as error:
        parse_cluster("8xT4000")
    assert error.value.field == "gpus"
    assert "H100-80GB" in error.value.allowed and "MI300X" in error.value.allowed


def test_gpu_count_that_does_not_fill_nodes_raises():
    with pytest.raises(InvalidInput) as error:
        parse_cluster("12xH100")
    assert error.value.field == "gpus"


# Exact published parameter counts (Hugging Face model cards / `sum(p.numel())`).
EXACT_PARAMS = {
    # llama-2-7b: embed 32000*4096 + 32 * (4*4096^2 + 3*4096*11008 + 2*4096)
    #             + final norm 4096 + head 32000*4096
    #           = 131,072,000 + 32 * 202,383,360 + 4,096 + 131,072,000 = 6,738,415,616
    "llama-2-7b": 6_738_415_616,
    "granite-7b": 6_738_415_616,  # the Llama-2-7B shape
    "gpt2": 124_439_808,
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3-8b": 8_030_261_248,
    "llama-3-70b": 70_553_706_496,
    "llama-3.1-405b": 405_853_388_800,
    "mistral-7b": 7_241_732_096,
    "falcon-7b": 6_921_720_704,
    "mpt-7b": 6_649_286_656,
    # mpt-30b: 50432*7168 + 48 * (12*7168^2 + 2*7168) + 7168 = 29,957,200,896
    "mpt-30b": 29_957_200_896,
    "qwen2.5-7b": 7_615_616_512,
    "qwen2.5-14b": 14_770_033_664,
    "qwen2.5-32b": 32_763_876_352,
    "qwen2.5-72b": 72_706_203_648,
}


def test_every_preset_is_checked():
    """Here by its published count, or in tests/test_families.py against transformers' own
    model built from its config.json (the presets tests/real/make_presets.py writes)."""
    from tests.real.make_presets import PRESETS

    assert set(model_presets()) == set(EXACT_PARAMS) | set(PRESETS)


@pytest.mark.parametrize(("name", "params"), sorted(EXACT_PARAMS.items()))
def test_preset_params_are_exact(name, params):
    assert preset(name).params == params


def test_llama_2_7b_arithmetic():
    layer = 4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096
    assert preset("llama-2-7b").layer_params == layer == 202_383_360


def test_infer_from_params_13b_is_llama_13b_shaped():
    # hidden = (128 * 13e9 / 12)^(1/3) = 5175 -> 40 x 128 = 5120; 40 layers of 5120 is Llama-13B
    spec = infer_from_params(13e9)
    assert (spec.hidden, spec.layers) == (5120, 40)
    assert spec.params == 13_000_000_000
    assert spec.inferred


# ---- the GPUs people train on beyond the first catalog ----------------------------------------

NEW_GPUS = {
    # spec string -> (catalog id, nodes, GPUs per node)
    "8xH800": ("H800", 1, 8),
    "8xH20": ("H20", 1, 8),
    "8xA800": ("A800", 1, 8),
    "8xH100-NVL": ("H100-NVL", 1, 8),
    "8xB300": ("B300", 1, 8),
    "72xGB200": ("GB200", 1, 72),
    "72xGB300": ("GB300", 1, 72),
    "4xGH200": ("GH200-96GB", 1, 4),
    "2xGH200-144GB": ("GH200-144GB", 2, 1),
    "8xMI325X": ("MI325X", 1, 8),
    "8xMI355X": ("MI355X", 1, 8),
    "4xRTX3090": ("RTX-3090", 1, 4),
    "8xA5000": ("RTX-A5000", 1, 8),
    "8xA6000": ("RTX-A6000", 1, 8),
    "8xRTX6000Ada": ("RTX-6000-Ada", 1, 8),
    "8xL40": ("L40", 1, 8),
    "4xT4": ("T4", 1, 4),
}


@pytest.mark.parametrize(("spec", "expected"), sorted(NEW_GPUS.items()))
def test_new_gpus_parse_from_a_spec_string(spec, expected):
    cluster = parse_cluster(spec)
    assert (cluster.gpu.name, cluster.nodes, cluster.gpus_per_node) == expected
    assert cluster.gpu.source


def test_nvl72_is_one_nvlink_domain():
    # An NVL72 rack is one "node" of 72 GPUs: its host RAM is the 36 Grace CPUs' 480 GB each.
    for name in ("GB200", "GB300"):
        one = parse_cluster(f"72x{name}")
        assert (one.nodes, one.gpus_per_node) == (1, 72)
        assert one.gpu.intra_node_link.startswith("NVLink5")
        assert one.gpu.node.cpu_ram_in_GiB == 16093  # 36 x 480e9 B / 2^30 = 16,093.3 GiB
        two = parse_cluster(f"144x{name}")
        assert (two.nodes, two.gpus_per_node) == (2, 72)


def test_gh200_short_name_resolves_to_the_96gb_part_with_a_note():
    gpu, note = resolve_gpu("GH200")
    assert gpu.name == "GH200-96GB"
    assert note is not None and "GH200-144GB" in note


def test_new_precision_support_follows_the_hardware():
    catalog = gpu_catalog()
    for name in ("T4", "V100-32GB"):
        assert not catalog[name].supports("bf16") and not catalog[name].supports("fp8")
    for name in ("A800", "RTX-3090", "RTX-A5000", "RTX-A6000"):  # Ampere: bf16, no fp8
        assert catalog[name].supports("bf16") and not catalog[name].supports("fp8")
    for name in ("H800", "H20", "H100-NVL", "GH200-96GB", "GH200-144GB", "B300", "GB200", "GB300",
                 "RTX-6000-Ada", "L40", "MI325X", "MI355X"):
        assert catalog[name].supports("fp8"), name
    assert catalog["T4"].architecture == "turing" and catalog["MI355X"].architecture == "cdna4"


def test_export_variants_keep_the_compute_and_lose_the_link():
    catalog = gpu_catalog()
    h100, h800 = catalog["H100-80GB"], catalog["H800"]
    assert h800.peak_bf16_dense_in_TFLOPS == h100.peak_bf16_dense_in_TFLOPS
    assert h800.intra_node_bandwidth_in_GB_per_sec == 200  # NVLink 400 GB/s bidirectional / 2
    a100, a800 = catalog["A100-80GB"], catalog["A800"]
    assert a800.peak_bf16_dense_in_TFLOPS == a100.peak_bf16_dense_in_TFLOPS
    assert a800.intra_node_bandwidth_in_GB_per_sec == 200
    assert catalog["H20"].intra_node_bandwidth_in_GB_per_sec == 450  # full 900 GB/s NVLink


def test_published_spec_numbers():
    catalog = gpu_catalog()
    # H100 NVL datasheet: 1,671 TFLOPS BF16 and 3,341 TFLOPS FP8 with sparsity (dense = half),
    # 60 TFLOPS FP32, 94 GB HBM3 at 3.9 TB/s; nvidia-smi shows 95830 MiB = 93.58 GiB.
    nvl = catalog["H100-NVL"]
    assert nvl.peak_bf16_dense_in_TFLOPS == 1671 / 2 == 835.5
    assert nvl.peak_fp8_dense_in_TFLOPS == 3341 / 2 == 1670.5
    assert (nvl.peak_fp32_in_TFLOPS, nvl.hbm_bandwidth_in_GB_per_sec) == (60, 3900)
    assert nvl.memory_in_GiB == round(95830 / 1024, 2) == 93.58
    # GB200 NVL72 datasheet, per GPU = rack / 72: 360 PFLOPS FP16/BF16 with sparsity -> 5 PFLOPS
    # sparse, 2.5 dense; 5,760 TFLOPS FP32 -> 80; 576 TB/s HBM3e -> 8 TB/s; NVLink 1.8 TB/s
    # bidirectional -> 900 GB/s per direction.
    gb = catalog["GB200"]
    assert gb.peak_bf16_dense_in_TFLOPS == 360_000 / 72 / 2 == 2500
    assert gb.peak_fp32_in_TFLOPS == 5760 / 72 == 80
    assert gb.hbm_bandwidth_in_GB_per_sec == 576_000 / 72 == 8000
    assert gb.intra_node_bandwidth_in_GB_per_sec == 1800 / 2
    # T4 datasheet: 65 TFLOPS FP16 mixed precision (Turing: no sparsity, so dense), 8.1 FP32.
    assert (catalog["T4"].peak_fp16_dense_in_TFLOPS, catalog["T4"].peak_fp32_in_TFLOPS) == (65, 8.1)


def test_a_t4_request_defaults_to_fp16_with_a_note():
    from advisor.requests.jobs import run_estimate
    from advisor.requests.models import EstimateRequest

    est = run_estimate(EstimateRequest(params=1e9, gpus="4xT4", strategy="zero2", seq_len=1024))
    assert est.workload.precision == "fp16"
    assert any("T4 has no bf16" in note for note in est.cluster.notes)


def test_zero3_offload_on_four_rtx_3090s_answers(capsys):
    import json

    from advisor.cli.main import main

    code = main(["estimate", "--params", "7e9", "--gpus", "4xRTX3090", "--strategy", "zero3-offload",
                 "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cluster"]["gpu"] == "RTX-3090" and out["strategy"] == "zero3-offload"
    assert out["memory"]["per_gpu_bytes"]["total"] > 0
