"""Reading a local Hugging Face config.json gives the same model as the preset."""

import json
from pathlib import Path

import pytest

from advisor.core.errors import InvalidInput
from advisor.core.hf_config import from_hf_config, load_hf_config
from advisor.core.model import preset

CONFIGS = Path(__file__).parent / "data" / "hf_configs"
FIXTURES = ["llama-3-8b", "qwen2.5-7b", "gpt2", "falcon-7b", "mpt-7b"]
# The fields that decide the parameter count and the FSDP wrap unit.
SHAPE = ["layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "gated_mlp", "tied_embeddings",
         "norm", "norm_bias", "qkv_bias", "out_bias", "mlp_bias", "parallel_block",
         "position_embedding", "decoder_layer_class"]


def _config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


@pytest.mark.parametrize("name", FIXTURES)
def test_config_json_matches_the_preset(name):
    loaded = load_hf_config(str(CONFIGS / f"{name}.json"))
    expected = preset(name)
    assert loaded.params == expected.params
    assert {f: getattr(loaded, f) for f in SHAPE} == {f: getattr(expected, f) for f in SHAPE}
    assert loaded.name == name
    assert str(CONFIGS) in loaded.source


def test_config_json_folder_names_the_model(tmp_path):
    folder = tmp_path / "Meta-Llama-3-8B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_config("llama-3-8b")))
    assert load_hf_config(str(folder / "config.json")).name == "Meta-Llama-3-8B"


def test_qwen2_biases_q_k_v_only():
    spec = from_hf_config(_config("qwen2.5-7b"))
    assert spec.qkv_bias and not spec.out_bias and not spec.mlp_bias


def test_falcon_new_architecture_has_two_norms_and_grouped_kv():
    # Falcon-40B shape: new_decoder_architecture, 8 KV heads (kv_dim 8 x 64 = 512), one
    # LayerNorm each for attention and MLP, untied head (published as 41.8B).
    config = {"model_type": "falcon", "hidden_size": 8192, "num_attention_heads": 128,
              "num_hidden_layers": 60, "num_kv_heads": 8, "new_decoder_architecture": True,
              "parallel_attn": True, "vocab_size": 65024, "tie_word_embeddings": False}
    spec = from_hf_config(config)
    assert spec.kv_heads == 8
    assert not spec.parallel_block  # two norms per layer
    # 2 * 65024*8192 + 60 * (2*8192^2 + 2*8192*512 + 2*8192*32768 + 2*2*8192) + 2*8192
    assert spec.params == 41_835_970_560


def test_unknown_model_type_is_read_as_llama_and_says_so():
    config = _config("llama-3-8b") | {"model_type": "somenewmodel"}
    del config["tie_word_embeddings"]
    spec = from_hf_config(config)
    assert spec.params == preset("llama-3-8b").params
    assert "somenewmodel" in spec.source and "assumed untied" in spec.source


def test_missing_file_is_invalid_input(tmp_path):
    with pytest.raises(InvalidInput) as error:
        load_hf_config(str(tmp_path / "nope" / "config.json"))
    assert error.value.field == "hf_config"


def test_bad_json_is_invalid_input(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama", ')
    with pytest.raises(InvalidInput) as error:
        load_hf_config(str(path))
    assert error.value.field == "hf_config"
    assert "JSON" in error.value.message


def test_json_that_is_not_an_object_is_invalid_input(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("[1, 2]")
    with pytest.raises(InvalidInput) as error:
        load_hf_config(str(path))
    assert error.value.field == "hf_config"


@pytest.mark.parametrize(("name", "key"), [
    ("llama-3-8b", "hidden_size"), ("gpt2", "n_layer"), ("mpt-7b", "d_model"),
    ("falcon-7b", "num_hidden_layers"),
])
def test_missing_required_key_is_invalid_input(name, key):
    config = _config(name)
    del config[key]
    with pytest.raises(InvalidInput) as error:
        from_hf_config(config)
    assert error.value.field == "hf_config"
    assert key in error.value.message


def test_heads_not_dividing_hidden_is_invalid_input():
    config = _config("llama-3-8b") | {"num_attention_heads": 30, "num_key_value_heads": 30}
    with pytest.raises(InvalidInput) as error:
        from_hf_config(config)
    assert error.value.field == "hf_config"
    assert "heads" in error.value.message and "hidden" in error.value.message


def test_out_of_range_value_names_the_field():
    config = _config("qwen2.5-7b") | {"num_hidden_layers": 0}
    with pytest.raises(InvalidInput) as error:
        from_hf_config(config)
    assert error.value.field == "hf_config"
    assert "layers" in error.value.message


def test_non_integer_count_is_invalid_input():
    config = _config("gpt2") | {"n_embd": "768"}
    with pytest.raises(InvalidInput) as error:
        from_hf_config(config)
    assert "n_embd" in error.value.message
