"""ModelSpec from a Hugging Face `config.json` (parsed JSON; the CLI reads a local file, the API
takes the content; never the hub).

The config's `model_type` picks the family's reader (advisor/core/families/); a multimodal
config whose language model is nested in `text_config` (Gemma 3) is read as that text model.
An unknown family, a missing required key or an impossible shape is one InvalidInput naming it.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from advisor.core.errors import InvalidInput
from advisor.core.families import FAMILIES, TEXT_MODELS
from advisor.core.families.common import FIELD, Keys
from advisor.core.model import ModelSpec
from advisor.core.text import check_text

SUPPORTED = ", ".join(sorted([*FAMILIES, *TEXT_MODELS]))


def _text_model(config: dict[str, Any], model_type: str) -> tuple[dict[str, Any], str]:
    """The language model's config: a multimodal wrapper's `text_config`, with its model_type."""
    inner = config.get("text_config")
    if not isinstance(inner, dict):
        raise InvalidInput(FIELD, f"model_type {model_type!r} holds its language model in "
                           "`text_config`, which is missing", "a config.json with text_config")
    return inner, TEXT_MODELS[model_type]


ACTIVATION_KEY = {**{f: "hidden_act" for f in (
    "llama", "granite", "mistral", "qwen2", "qwen3", "olmo2", "phi3", "mixtral", "qwen2_moe",
    "qwen3_moe", "deepseek_v2", "deepseek_v3", "gpt_neox")},
    "gemma2": "hidden_activation", "gemma3_text": "hidden_activation",
    "gpt2": "activation_function", "falcon": "activation"}
"""The config key naming the MLP activation, per family (MPT's MLP is always GELU; gpt-oss
has its own clamped SwiGLU)."""


def from_hf_config(config: Any, name: str | None = None, source: str = "") -> ModelSpec:
    """ModelSpec from a parsed config.json. `name` defaults to `_name_or_path`, else model_type."""
    if not isinstance(config, dict):
        raise InvalidInput(FIELD, "config.json must hold a JSON object", f"model_type one of {SUPPORTED}")
    if "model_type" not in config:
        raise InvalidInput(FIELD, "no model_type: the family cannot be told", f"one of {SUPPORTED}")
    model_type = check_text(str(config["model_type"]), f"{FIELD}.model_type", 64).lower()
    if name is None and config.get("_name_or_path"):
        name = check_text(config["_name_or_path"], f"{FIELD}._name_or_path")
    family = model_type
    if family in TEXT_MODELS:
        config, family = _text_model(config, model_type)
    if family not in FAMILIES:
        raise InvalidInput(FIELD, f"model family {model_type!r} is not modelled (its layers are not "
                           "described, so its memory and time would be guesses)", SUPPORTED)
    reader, required = FAMILIES[family]
    fields = reader(Keys(config, family, required))
    if family in ACTIVATION_KEY and isinstance(config.get(ACTIVATION_KEY[family]), str):
        fields["activation"] = check_text(config[ACTIVATION_KEY[family]],
                                          f"{FIELD}.{ACTIVATION_KEY[family]}", 32).lower()
    text = source or "Hugging Face config.json"
    try:
        return ModelSpec(name=name or model_type, family=family, source=f"{text} ({family})", **fields)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "shape"
        message = str(first["msg"]).removeprefix("Value error, ")
        raise InvalidInput(FIELD, f"{where}: {message} (model_type {model_type!r})", SUPPORTED) from None
