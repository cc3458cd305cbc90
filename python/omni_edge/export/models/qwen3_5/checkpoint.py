"""Qwen3.5 hybrid checkpoints made here: random weights in the Hugging Face layout
(`transformers.Qwen3_5ForCausalLM`) with a locally trained ChatML tokenizer. The tiny preset keeps
every feature of the architecture at test size: grouped value heads in the linear layers (more
value than key heads), more query than KV heads, partial RoPE, the 3:1 layer pattern twice.
`bench` is the Qwen3 bench checkpoint's width and depth with the hybrid's layers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omni_edge.export.checkpoint import preset_of
from omni_edge.export.decoder.causal_lm import make_random_checkpoint

PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(hidden_size=96, intermediate_size=256, num_hidden_layers=8, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4,
                 linear_key_head_dim=16, linear_value_head_dim=24, linear_conv_kernel_dim=4, vocab_size=1024,
                 max_position_embeddings=4096),
    # For the long-context benchmark: the Qwen3 bench checkpoint's width and depth (hidden 1024, MLP
    # 3072, 4 layers, 16 query / 8 KV heads of 128, vocabulary 151936 tied) with Qwen3.5's layer
    # pattern (three Gated DeltaNet layers of 8 key / 16 value heads of 128, then gated attention).
    "bench": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=4, num_attention_heads=16,
                  num_key_value_heads=8, head_dim=128, linear_num_key_heads=8, linear_num_value_heads=16,
                  linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4, vocab_size=151936,
                  max_position_embeddings=40960),
}


def make_checkpoint(out: Path, preset: str = "tiny", seed: int = 0) -> Path:
    from transformers import Qwen3_5TextConfig

    fields = preset_of(PRESETS, preset, "qwen3.5")
    config = Qwen3_5TextConfig(**fields, rms_norm_eps=1e-6, tie_word_embeddings=preset == "bench",
                               rope_parameters={"rope_type": "default", "rope_theta": 10_000_000.0,
                                                "partial_rotary_factor": 0.25})
    record = {"arch": "qwen3.5", "preset": preset, "seed": seed}
    return make_random_checkpoint(out, config, record, min(8192, fields["vocab_size"]), seed)
