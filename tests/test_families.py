"""Every model family the advisor reads, against transformers' own classes (tests/real/hf_counts.py
builds each config's model on the meta device): the exact total and active parameter counts and
the decoder layer class; presets equal to their config.json; refusals in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.core.errors import InvalidInput
from advisor.core.hf_config import SUPPORTED, from_hf_config
from advisor.core.model import model_presets
from tests.real.hf_counts import counts
from tests.real.make_presets import PRESETS

CONFIGS = Path(__file__).parent / "data" / "hf_configs"
FILES = sorted(p.stem for p in CONFIGS.glob("*.json"))


def _config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


@pytest.fixture(scope="module")
def truth() -> dict[str, dict]:
    return {name: counts(_config(name)) for name in FILES}


@pytest.mark.parametrize("name", FILES)
def test_counts_equal_transformers_own_model(truth, name):
    spec, real = from_hf_config(_config(name)), truth[name]
    assert spec.params == real["total"]
    assert spec.active_params == real["active"]
    assert spec.decoder_layer_class == real["decoder_layer_class"]
    assert spec.vocab * spec.hidden == real["embedding"]  # the token embedding (learned positions apart)
    assert spec.dense_layer_params in real["per_layer"] or spec.dense_layers == 0
    if spec.moe is not None:
        assert spec.moe_layer_params == max(real["per_layer"])
        assert spec.moe.experts == real["moe"]["experts"] and spec.moe.top_k == real["moe"]["top_k"]


def test_every_family_has_a_real_shaped_config():
    families = {from_hf_config(_config(n)).family for n in FILES}
    expected = {"llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma2", "gemma3_text",
                "phi3", "gpt_neox", "falcon", "gpt2", "olmo2", "deepseek_v2", "deepseek_v3", "gpt_oss",
                "mpt"}
    assert expected <= families


@pytest.mark.parametrize(("name", "published"), [
    # published totals, rounded as the model cards give them
    ("mixtral-8x7b", 46.7e9), ("deepseek-v3", 671e9), ("gpt-neox-20b", 20.55e9),
    ("qwen3-30b-a3b", 30.5e9), ("deepseek-v2-lite", 15.7e9),
])
def test_moe_and_neox_totals_match_the_model_cards(name, published):
    assert from_hf_config(_config(name)).params == pytest.approx(published, rel=0.005)


def test_active_parameters_of_moe_models():
    # Mixtral: 2 of 8 experts per token; Qwen3-30B-A3B: "A3B" = 3.3B active
    assert from_hf_config(_config("mixtral-8x7b")).active_params == 12_879_925_248
    assert from_hf_config(_config("qwen3-30b-a3b")).active_params == pytest.approx(3.3e9, rel=0.02)


def test_multimodal_gemma3_is_read_as_its_text_model():
    spec = from_hf_config(_config("gemma-3-12b"))
    assert spec.family == "gemma3_text" and spec.decoder_layer_class == "Gemma3DecoderLayer"
    assert spec.vocab == 262208  # Gemma3TextConfig's default: the text_config leaves it out
    assert spec.sliding_layers == 40 and spec.sliding_window == 1024  # 5 local : 1 global


def test_sliding_windows_and_softcapping_are_described():
    gemma2 = from_hf_config(_config("gemma-2-9b"))
    assert (gemma2.sliding_window, gemma2.sliding_layers) == (4096, 21)  # every other of 42
    assert (gemma2.attn_softcap, gemma2.logit_softcap) == (50.0, 30.0) and gemma2.norms_per_layer == 4
    assert from_hf_config(_config("mistral-7b-v0.1")).sliding_layers == 32
    assert from_hf_config(_config("llama-3-8b")).sliding_window is None


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_equal_their_config_json(name):
    """The presets written by `python -m tests.real.make_presets` from tests/data/hf_configs/."""
    loaded, preset = from_hf_config(_config(PRESETS[name][0])), model_presets()[name]
    assert loaded.params == preset.params
    assert loaded.model_dump(exclude={"name", "source"}) == preset.model_dump(exclude={"name", "source"})


def test_unknown_family_is_refused_naming_it_and_the_supported_ones():
    config = _config("llama-3-8b") | {"model_type": "somenewmodel"}
    with pytest.raises(InvalidInput) as error:
        from_hf_config(config)
    assert error.value.field == "hf_config" and "somenewmodel" in error.value.message
    assert error.value.allowed == SUPPORTED and "mixtral" in SUPPORTED and "deepseek_v3" in SUPPORTED


def test_a_config_without_model_type_is_refused():
    config = {k: v for k, v in _config("llama-3-8b").items() if k != "model_type"}
    with pytest.raises(InvalidInput, match="no model_type"):
        from_hf_config(config)


@pytest.mark.parametrize(("name", "key"), [
    ("llama-3-8b", "hidden_size"), ("gpt2", "n_layer"), ("mpt-7b", "d_model"),
    ("falcon-7b", "num_hidden_layers"), ("mixtral-8x7b", "num_local_experts"),
    ("qwen3-30b-a3b", "num_experts"), ("deepseek-v3", "n_routed_experts"), ("gemma-2-9b", "vocab_size"),
])
def test_missing_required_key_is_named_with_the_familys_required_keys(name, key):
    config = _config(name)
    del config[key]
    with pytest.raises(InvalidInput) as error:
        from_hf_config(config)
    assert error.value.field == "hf_config" and key in error.value.message
    assert key in (error.value.allowed or "")


def test_heads_not_dividing_hidden_without_head_dim_is_refused():
    config = _config("llama-3-8b") | {"num_attention_heads": 30, "num_key_value_heads": 30}
    with pytest.raises(InvalidInput) as error:
        from_hf_config(config)
    assert "heads" in error.value.message and "hidden" in error.value.message


def test_out_of_range_and_non_integer_values_name_the_key():
    with pytest.raises(InvalidInput, match="layers"):
        from_hf_config(_config("qwen2.5-7b") | {"num_hidden_layers": 0})
    with pytest.raises(InvalidInput, match="n_embd"):
        from_hf_config(_config("gpt2") | {"n_embd": "768"})


def test_falcon_new_architecture_has_two_norms_and_grouped_kv():
    # Falcon-40B shape: new_decoder_architecture, 8 KV heads (kv_dim 8 x 64 = 512), one
    # LayerNorm each for attention and MLP, untied head (published as 41.8B).
    config = {"model_type": "falcon", "hidden_size": 8192, "num_attention_heads": 128,
              "num_hidden_layers": 60, "num_kv_heads": 8, "new_decoder_architecture": True,
              "parallel_attn": True, "vocab_size": 65024, "tie_word_embeddings": False}
    spec = from_hf_config(config)
    assert spec.kv_heads == 8 and spec.norms_per_layer == 2 and spec.parallel_block
    # 2 * 65024*8192 + 60 * (2*8192^2 + 2*8192*512 + 2*8192*32768 + 2*2*8192) + 2*8192
    assert spec.params == 41_835_970_560


def test_qwen2_biases_q_k_v_only():
    spec = from_hf_config(_config("qwen2.5-7b"))
    assert spec.qkv_bias and not spec.out_bias and not spec.mlp_bias


@pytest.mark.parametrize(("params", "hidden", "heads", "kv_heads"), [
    (7e9, 4096, 32, 32),    # the Llama-2-7B shape (the old rule gave 31 x 4224 with 33 heads)
    (13e9, 5120, 40, 40),   # Llama-2-13B: 40 layers
    (70e9, 8192, 64, 8),    # Llama-2-70B: 64 heads, GQA 8 (the old rule gave 71 heads)
    (405e9, 16384, 128, 8),
])
def test_params_alone_infers_the_public_shape_of_that_size(params, hidden, heads, kv_heads):
    from advisor.core.model import infer_from_params

    m = infer_from_params(params)
    assert (m.hidden, m.heads, m.kv_heads) == (hidden, heads, kv_heads)
    assert m.params == int(params)  # the count stays exact
    assert abs(m.shape_params / params - 1) < 0.02


@pytest.mark.parametrize("params", [1e8, 1e9, 2.5e9, 20e9, 150e9, 1e12, 1e13])
def test_every_inferred_shape_has_head_dim_128_and_heads_a_multiple_of_8(params):
    from advisor.core.model import infer_from_params

    m = infer_from_params(params)
    assert m.head_dim == 128 and m.heads % 8 == 0 and m.heads % m.kv_heads == 0


def test_an_moe_estimate_says_it_has_no_expert_parallelism():
    from tests.helpers import run

    est = run("fsdp", "8xH100", "mixtral-8x7b")
    assert any("all 8 experts" in n and "no expert parallelism" in n for n in est.notes)
    assert est.model.active_params < est.model.params and est.model.experts == 8
