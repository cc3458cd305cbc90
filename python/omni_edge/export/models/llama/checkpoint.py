"""Llama checkpoints made here: random weights in the Hugging Face layout with a locally trained
tokenizer holding Llama 3's chat markers and template; the tiny preset carries what sets Llama 3.x
apart from Qwen: its RoPE scaling (with an original context short enough that the scaled
frequencies matter within a test's positions), tied embeddings and its chat format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omni_edge.export.checkpoint import preset_of
from omni_edge.export.decoder.causal_lm import LLAMA3, make_random_checkpoint

PRESETS: dict[str, dict[str, Any]] = {"tiny": dict(hidden_size=96, intermediate_size=256, num_hidden_layers=2, num_attention_heads=6,
                        num_key_value_heads=2, head_dim=16, vocab_size=1024, max_position_embeddings=4096)}


def make_checkpoint(out: Path, preset: str = "tiny", seed: int = 0) -> Path:
    from transformers import LlamaConfig

    config = LlamaConfig(**preset_of(PRESETS, preset, "llama"), rms_norm_eps=1e-5, tie_word_embeddings=True,
                         rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 64})
    return make_random_checkpoint(out, config, {"arch": "llama", "preset": preset, "seed": seed}, 1024, seed, LLAMA3)
