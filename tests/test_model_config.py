"""advisor/emitters/model_config.py: a ModelSpec as the config.json transformers builds it from.

Read back by the family readers, the config gives the spec again, field for field (every preset,
every real config in tests/data/hf_configs/, the shapes `--params` infers, and variants that take
each writer's other branches); built by transformers' own config and model classes on the meta
device (tests/real/hf_counts.py), it has exactly the spec's parameters, layer by layer, and the
spec's decoder layer class. A family without a writer, or a spec its family's config cannot
express, is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.core.errors import InvalidInput
from advisor.core.families import FAMILIES
from advisor.core.hf_config import from_hf_config
from advisor.core.model import ModelSpec, infer_from_params, model_presets, preset
from advisor.emitters.model_config import SUPPORTED, WRITERS, to_hf_config
from tests.real.hf_counts import counts

CONFIGS = Path(__file__).parent / "data" / "hf_configs"
FILES = sorted(p.stem for p in CONFIGS.glob("*.json"))
NOT_ARCHITECTURE = {"name", "source", "params_override"}
INFERRED = (3e6, 1e9, 7e9, 13e9, 34e9, 70e9, 405e9, 2e12)


def _config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


# Shapes the readers give that no preset has: each takes a writer branch the presets do not.
VARIANTS: dict[str, dict] = {
    # Granite-3.0-8B's shape (model_type granite: GraniteConfig, GraniteDecoderLayer)
    "granite-3-8b": {"model_type": "granite", "hidden_size": 4096, "num_hidden_layers": 40,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 12800,
                     "vocab_size": 49155, "tie_word_embeddings": True, "max_position_embeddings": 4096},
    # Qwen1.5-MoE-A2.7B's shape: 60 experts, 4 per token, a gated shared expert
    "qwen1.5-moe-a2.7b": {"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24,
                          "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 5632,
                          "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
                          "num_experts": 60, "num_experts_per_tok": 4, "vocab_size": 151936,
                          "max_position_embeddings": 8192},
    "qwen3-moe-two-dense": _config("qwen3-30b-a3b") | {"mlp_only_layers": [5, 7]},
    "qwen3-moe-sparse-step-2": _config("qwen3-30b-a3b") | {"decoder_sparse_step": 2},
    "deepseek-v2-all-dense": _config("deepseek-v2-lite") | {"first_k_dense_replace": 27},
    "deepseek-v2-q-lora": _config("deepseek-v2-lite") | {"q_lora_rank": 768, "attention_bias": True},
    "falcon-40b": {"model_type": "falcon", "hidden_size": 8192, "num_attention_heads": 128,
                   "num_hidden_layers": 60, "num_kv_heads": 8, "new_decoder_architecture": True,
                   "parallel_attn": True, "vocab_size": 65024, "tie_word_embeddings": False},
    "falcon-sequential-alibi": {"model_type": "falcon", "hidden_size": 1024, "num_attention_heads": 16,
                                "num_hidden_layers": 4, "multi_query": False, "parallel_attn": False,
                                "bias": True, "alibi": True, "vocab_size": 1000},
    "falcon-two-norms": _config("falcon-7b") | {"num_ln_in_parallel_attn": 2},
    "neox-sequential": _config("pythia-1.4b") | {"use_parallel_residual": False, "attention_bias": False},
    "gpt2-untied": _config("gpt2") | {"tie_word_embeddings": False, "n_inner": 2048, "n_positions": 2048},
    "qwen2-sliding": _config("qwen2.5-7b") | {"use_sliding_window": True, "sliding_window": 4096,
                                              "max_window_layers": 20},
    "qwen3-all-sliding": _config("qwen3-8b") | {"use_sliding_window": True, "sliding_window": 8192,
                                                "max_window_layers": 0, "attention_bias": True},
    "llama-biased": _config("llama-3.2-1b") | {"attention_bias": True, "mlp_bias": True},
    "olmo2-biased": _config("olmo-2-7b") | {"attention_bias": True},
    "mixtral-windowed": _config("mixtral-8x7b") | {"sliding_window": 4096},
    "mistral-windowless": _config("mistral-7b-v0.1") | {"sliding_window": None},
    "phi3-windowed": _config("phi-4") | {"sliding_window": 2048},
    "gemma2-all-global": _config("gemma-2-9b") | {"layer_types": ["full_attention"] * 42},
    "gemma2-capless": _config("gemma-2-9b") | {"attn_logit_softcapping": None,
                                               "final_logit_softcapping": None},
    "gemma3-20-local": _config("gemma-3-1b") | {"layer_types": ["sliding_attention"] * 20
                                                + ["full_attention"] * 6},
    "gpt-oss-all-global": _config("gpt-oss-20b") | {"layer_types": ["full_attention"] * 24},
}
CASES: dict[str, ModelSpec] = {
    **{f"preset:{name}": spec for name, spec in sorted(model_presets().items())},
    **{f"config:{name}": from_hf_config(_config(name)) for name in FILES},
    **{f"inferred:{p:g}": infer_from_params(p) for p in INFERRED},
    **{f"variant:{name}": from_hf_config(config, name=name) for name, config in VARIANTS.items()},
}


def test_every_family_the_readers_know_has_a_writer():
    assert set(WRITERS) == set(FAMILIES)
    assert SUPPORTED.split(", ") == sorted(FAMILIES)
    # and every family is exercised below
    assert {spec.family for spec in CASES.values()} == set(FAMILIES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_config_reads_back_as_the_same_spec(name):
    spec = CASES[name]
    config = to_hf_config(spec)
    assert json.loads(json.dumps(config)) == config  # JSON-ready: config.json as written
    assert config["model_type"] == spec.family
    assert config["architectures"] == [WRITERS[spec.family][0]]
    back = from_hf_config(config)
    assert back.model_dump(exclude=NOT_ARCHITECTURE) == spec.model_dump(exclude=NOT_ARCHITECTURE)
    assert back.shape_params == spec.shape_params


@pytest.mark.parametrize("name", sorted(model_presets()))
def test_every_preset_reads_back_field_for_field(name):
    spec = preset(name)
    back = from_hf_config(to_hf_config(spec))
    for field in type(spec).model_fields:
        if field not in NOT_ARCHITECTURE:
            assert getattr(back, field) == getattr(spec, field), field
    assert back.params == spec.params


@pytest.mark.parametrize("name", FILES)
def test_a_published_config_and_its_rewrite_build_the_same_model(name):
    """The rewrite names the class the published config names (MPT's remote code spells it
    MPTForCausalLM) and builds the same layers (Qwen-MoE's dense layers are written first)."""
    raw = _config(name)
    config = to_hf_config(from_hf_config(raw))
    if raw["model_type"] == config["model_type"]:  # gemma3's multimodal wrapper: its text model
        assert [a.lower() for a in raw["architectures"]] == [a.lower() for a in config["architectures"]]
    published, rewritten = counts(raw), counts(config)
    assert rewritten["total"] == published["total"] and rewritten["active"] == published["active"]
    assert sorted(rewritten["per_layer"]) == sorted(published["per_layer"])
    assert rewritten["decoder_layer_class"] == published["decoder_layer_class"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_transformers_builds_exactly_the_spec(name):
    spec = CASES[name]
    config = to_hf_config(spec)
    real = counts(config)  # AutoConfig.for_model(**config), the CausalLM on the meta device
    expected = spec.shape_params if spec.inferred else spec.params
    assert real["total"] == expected
    assert real["active"] == expected - (spec.params - spec.active_params)
    assert real["model_class"] == config["architectures"][0]
    assert real["decoder_layer_class"] == spec.decoder_layer_class
    assert real["tied"] == spec.tied_embeddings
    assert real["embedding"] == spec.vocab * spec.hidden
    # layer by layer: ModelSpec counts its dense layers first, and so is the config written
    assert real["per_layer"] == [spec.dense_layer_params] * spec.dense_layers \
        + [spec.moe_layer_params] * spec.moe_layers
    if spec.moe is not None:
        assert (real["moe"]["experts"], real["moe"]["top_k"]) == (spec.moe.experts, spec.moe.top_k)
        assert real["moe"]["params_per_expert"] == spec.moe.expert_params(spec.hidden)
    else:
        assert real["moe"] is None


def test_published_totals_of_the_variants():
    """Two shapes checked against their model cards, not only against the writer's own reader."""
    assert CASES["variant:qwen1.5-moe-a2.7b"].params == pytest.approx(14.3e9, rel=0.01)
    assert CASES["variant:qwen1.5-moe-a2.7b"].active_params == pytest.approx(2.7e9, rel=0.03)
    assert CASES["variant:falcon-40b"].params == 41_835_970_560
    assert counts(to_hf_config(CASES["variant:falcon-40b"]))["total"] == 41_835_970_560


@pytest.mark.parametrize("name", ["llama-3-8b", "gemma-2-9b", "gemma-3-1b", "qwen2.5-7b", "mixtral-8x7b",
                                  "deepseek-v3", "gpt-oss-20b", "gpt2", "mpt-7b", "falcon-7b", "phi-4"])
def test_a_dry_run_can_cut_the_layers(name):
    """What the plan's dry run does with model_config.json: fewer layers, same classes."""
    spec = preset(name)
    small = counts(to_hf_config(spec), layers=2)
    assert small["layers"] == 2 and small["decoder_layer_class"] == spec.decoder_layer_class
    assert small["total"] < spec.params


def test_written_keys_of_three_families():
    """The exact keys, so a reader that changed its defaults could not hide a missing key."""
    llama = to_hf_config(preset("llama-3-8b"))
    assert {k: llama[k] for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                  "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size",
                                  "tie_word_embeddings", "attention_bias", "mlp_bias")} == {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 14336, "vocab_size": 128256,
        "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False}
    v3 = to_hf_config(preset("deepseek-v3"))
    assert (v3["first_k_dense_replace"], v3["n_routed_experts"], v3["n_shared_experts"],
            v3["moe_intermediate_size"], v3["q_lora_rank"], v3["kv_lora_rank"]) \
        == (3, 256, 1, 2048, 1536, 512)
    assert "head_dim" not in v3
    qwen = to_hf_config(CASES["variant:qwen3-moe-two-dense"])
    assert qwen["mlp_only_layers"] == [0, 1] and qwen["decoder_sparse_step"] == 1
    assert to_hf_config(CASES["variant:gemma3-20-local"])["layer_types"][19:21] == [
        "sliding_attention", "full_attention"]
    assert "layer_types" not in to_hf_config(preset("gemma-3-1b"))  # the class default pattern


def _spec(name: str, **changes) -> ModelSpec:
    return ModelSpec(**(preset(name).model_dump() | changes))


def test_a_family_without_a_writer_is_refused_in_one_line():
    with pytest.raises(InvalidInput) as error:
        to_hf_config(_spec("llama-3-8b", family="somenewmodel"))
    assert error.value.field == "model" and "somenewmodel" in error.value.message
    assert error.value.allowed == f"supported families {SUPPORTED}"
    assert "llama" in SUPPORTED and "deepseek_v3" in SUPPORTED and "\n" not in str(error.value)


@pytest.mark.parametrize(("name", "changes", "named"), [
    ("llama-3-8b", {"norm": "layernorm"}, "norm"),                    # LlamaConfig has no LayerNorm
    ("llama-3-8b", {"qkv_bias": True}, "out_bias"),                  # attention_bias covers q, k, v, o
    ("qwen2.5-7b", {"qkv_bias": False}, "qkv_bias"),                 # Qwen2 always biases q, k, v
    ("mixtral-8x7b", {"ffn": 4096}, "expert_ffn"),                   # intermediate_size is the expert's
    ("qwen3-30b-a3b", {"moe": None}, "dense"),                       # every Qwen3-MoE layer is routed
    ("deepseek-v3", {"mla": None}, "mla"),
    ("mpt-7b", {"ffn": 3 * 4096}, "4 x hidden"),                     # MptMLP is always 4 x d_model
    ("gpt2", {"kv_heads": 4}, "kv_heads"),
    ("llama-3-8b", {"hidden": 4100, "head_dim": 128}, "heads"),      # LlamaConfig: heads divide hidden
])
def test_a_spec_its_family_cannot_express_is_refused_naming_the_field(name, changes, named):
    with pytest.raises(InvalidInput) as error:
        to_hf_config(_spec(name, **changes))
    assert error.value.field == "model" and named in error.value.message
    assert "\n" not in str(error.value)
