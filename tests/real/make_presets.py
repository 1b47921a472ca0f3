"""Write the model presets (advisor/data/models/<id>.toml) from the config.json files of
tests/data/hf_configs/, read by the advisor's own family readers: a preset is exactly what its
config.json gives (tests/test_families.py checks it).

    python -m tests.real.make_presets          # rewrites the presets listed in PRESETS
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from advisor.core.hf_config import from_hf_config

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests" / "data" / "hf_configs"
MODELS = ROOT / "advisor" / "data" / "models"
PRESETS = {  # preset id: (config.json, hub repository)
    "llama-2-7b": ("llama-2-7b", "meta-llama/Llama-2-7b-hf"),
    "llama-3-8b": ("llama-3-8b", "meta-llama/Meta-Llama-3-8B"),
    "llama-3.1-8b": ("llama-3.1-8b", "meta-llama/Llama-3.1-8B"),
    "llama-3.1-70b": ("llama-3.1-70b", "meta-llama/Llama-3.1-70B"),
    "llama-3.2-1b": ("llama-3.2-1b", "meta-llama/Llama-3.2-1B"),
    "mistral-7b": ("mistral-7b-v0.1", "mistralai/Mistral-7B-v0.1"),
    "mistral-nemo-12b": ("mistral-nemo-12b", "mistralai/Mistral-Nemo-Base-2407"),
    "mixtral-8x7b": ("mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1"),
    "qwen2-7b": ("qwen2-7b", "Qwen/Qwen2-7B"),
    "qwen2.5-7b": ("qwen2.5-7b", "Qwen/Qwen2.5-7B"),
    "qwen3-8b": ("qwen3-8b", "Qwen/Qwen3-8B"),
    "qwen3-30b-a3b": ("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B"),
    "gemma-2-9b": ("gemma-2-9b", "google/gemma-2-9b"),
    "gemma-3-1b": ("gemma-3-1b", "google/gemma-3-1b-pt"),
    "gemma-3-12b": ("gemma-3-12b", "google/gemma-3-12b-pt (the text model)"),
    "phi-3-mini": ("phi-3-mini-4k", "microsoft/Phi-3-mini-4k-instruct"),
    "phi-3.5-mini": ("phi-3.5-mini", "microsoft/Phi-3.5-mini-instruct"),
    "phi-4": ("phi-4", "microsoft/phi-4"),
    "gpt-neox-20b": ("gpt-neox-20b", "EleutherAI/gpt-neox-20b"),
    "pythia-1.4b": ("pythia-1.4b", "EleutherAI/pythia-1.4b"),
    "olmo-2-7b": ("olmo-2-7b", "allenai/OLMo-2-1124-7B"),
    "deepseek-v2-lite": ("deepseek-v2-lite", "deepseek-ai/DeepSeek-V2-Lite"),
    "deepseek-v3": ("deepseek-v3", "deepseek-ai/DeepSeek-V3"),
    "gpt-oss-20b": ("gpt-oss-20b", "openai/gpt-oss-20b"),
    "falcon-7b": ("falcon-7b", "tiiuae/falcon-7b"),
    "gpt2": ("gpt2", "openai-community/gpt2"),
    "mpt-7b": ("mpt-7b", "mosaicml/mpt-7b"),
}


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    return json.dumps(v)  # a TOML basic string is a JSON string


def toml_text(fields: dict[str, Any]) -> str:
    """Flat keys first, then one table per nested model (moe, mla)."""
    flat = [f"{k} = {_value(v)}" for k, v in fields.items() if not isinstance(v, dict)]
    tables = [f"\n[{k}]\n" + "\n".join(f"{kk} = {_value(vv)}" for kk, vv in v.items() if vv is not None)
              for k, v in fields.items() if isinstance(v, dict)]
    return "\n".join(flat) + "\n" + "".join(t + "\n" for t in tables)


def main() -> None:
    for preset, (config, hub) in PRESETS.items():
        spec = from_hf_config(json.loads((CONFIGS / f"{config}.json").read_text()), name=preset,
                              source=f"{hub} config.json")
        fields = spec.model_dump(exclude_none=True, exclude={"params_override"})
        defaults = {k: f.default for k, f in type(spec).model_fields.items()}
        keep = {"name", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "source", "family",
                "decoder_layer_class", "max_position_embeddings"}
        fields = {k: v for k, v in fields.items() if k in keep or v != defaults.get(k)}
        (MODELS / f"{preset}.toml").write_text(toml_text(fields))
        print(f"{preset}: {spec.params:,} params")


if __name__ == "__main__":
    main()
