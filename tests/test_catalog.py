"""The GPU catalog, cluster-spec parsing and the model presets' exact parameter counts."""

import pytest

from advisor.errors import InvalidInput
from advisor.hardware import gpu_catalog, parse_cluster, resolve_gpu
from advisor.model import infer_from_params, model_presets, preset

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
    assert set(model_presets()) == set(EXACT_PARAMS)


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
