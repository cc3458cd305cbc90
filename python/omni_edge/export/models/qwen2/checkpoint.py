"""Qwen2 checkpoints made here: random weights in the Hugging Face layout with a locally trained
ChatML tokenizer; Qwen2's q/k/v projections carry biases and its attention has no q/k norms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omni_edge.export.checkpoint import preset_of
from omni_edge.export.decoder.causal_lm import make_random_checkpoint

PRESETS: dict[str, dict[str, Any]] = {"tiny": dict(hidden_size=96, intermediate_size=256, num_hidden_layers=2, num_attention_heads=6,
                        num_key_value_heads=2, vocab_size=1024, max_position_embeddings=4096)}


def make_checkpoint(out: Path, preset: str = "tiny", seed: int = 0) -> Path:
    from transformers import Qwen2Config

    config = Qwen2Config(**preset_of(PRESETS, preset, "qwen2"), rms_norm_eps=1e-6, tie_word_embeddings=False,
                         rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0})
    return make_random_checkpoint(out, config, {"arch": "qwen2", "preset": preset, "seed": seed}, 1024, seed)
