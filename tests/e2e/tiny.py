"""The tiny model and data the end-to-end runs train, shared by both training scripts.

The model is a real transformers Llama (its decoder layer class, LlamaDecoderLayer, is the FSDP
wrap unit the emitted configs name), with the shape that tests/test_emit_e2e.py passes to
`advisor emit` (TINY_SHAPE). The data is learnable: token t+1 = token t + 1 (mod vocab), from a
random start per sample, so a few optimizer steps visibly lower the loss.
"""

from __future__ import annotations

import torch

TINY_SHAPE = {"layers": 2, "hidden": 64, "heads": 4, "ffn": 128, "vocab": 256, "seq_len": 32}
LEARNING_RATE = 3e-3


def tiny_model():
    from transformers import AutoModelForCausalLM, LlamaConfig

    s = TINY_SHAPE
    config = LlamaConfig(vocab_size=s["vocab"], hidden_size=s["hidden"], intermediate_size=s["ffn"],
                         num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
                         num_key_value_heads=s["heads"], max_position_embeddings=s["seq_len"],
                         tie_word_embeddings=False)
    torch.manual_seed(0)
    # from_config goes through transformers' model construction: under ZeRO-3 with
    # zero3_init_flag it builds the parameters already partitioned (deepspeed.zero.Init).
    return AutoModelForCausalLM.from_config(config)


def batches(rank: int, count: int, micro_batch: int) -> list[torch.Tensor]:
    """`count` micro-batches of `micro_batch` sequences, different on every rank."""
    g = torch.Generator().manual_seed(1000 + rank)
    steps = torch.arange(TINY_SHAPE["seq_len"])
    out = []
    for _ in range(count):
        start = torch.randint(0, 8, (micro_batch, 1), generator=g)
        out.append((start + steps) % TINY_SHAPE["vocab"])
    return out
