"""One reader per model family: a Hugging Face config.json (its `model_type`) -> ModelSpec fields.

advisor/core/hf_config.py picks the reader; a family not listed here is refused with one line
naming it and the supported ones (never read as a Llama). Adding a family: a reader in the module
of its kind (dense.py, moe.py, gpt.py) and a line here (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from advisor.core.families import dense, gpt, moe
from advisor.core.families.common import Reader

FAMILIES: dict[str, tuple[Reader, tuple[str, ...]]] = {
    # model_type: (reader, the keys a config of the family must have)
    "llama": (dense.llama, dense.REQUIRED),
    "granite": (dense.granite, dense.REQUIRED),
    "mistral": (dense.mistral, dense.REQUIRED),
    "qwen2": (dense.qwen2, dense.REQUIRED),
    "qwen3": (dense.qwen3, dense.REQUIRED),
    "olmo2": (dense.olmo2, dense.REQUIRED),
    "phi3": (dense.phi3, dense.REQUIRED),
    "gemma2": (dense.gemma2, dense.REQUIRED),
    "gemma3_text": (dense.gemma3_text, dense.REQUIRED_GEMMA3),
    "mixtral": (moe.mixtral, moe.REQUIRED + ("num_local_experts",)),
    "qwen2_moe": (moe.qwen2_moe, moe.REQUIRED + ("num_experts",)),
    "qwen3_moe": (moe.qwen3_moe, moe.REQUIRED + ("num_experts",)),
    "deepseek_v2": (moe.deepseek_v2, moe.REQUIRED + ("n_routed_experts",)),
    "deepseek_v3": (moe.deepseek_v3, moe.REQUIRED + ("n_routed_experts",)),
    "gpt_oss": (moe.gpt_oss, moe.REQUIRED + ("num_local_experts",)),
    "gpt2": (gpt.gpt2, gpt.REQUIRED_GPT2),
    "gpt_neox": (gpt.gpt_neox, gpt.REQUIRED_NEOX),
    "falcon": (gpt.falcon, gpt.REQUIRED_FALCON),
    "mpt": (gpt.mpt, gpt.REQUIRED_MPT),
}
TEXT_MODELS = {"gemma3": "gemma3_text"}
"""Multimodal configs whose nested `text_config` is the language model trained here."""
