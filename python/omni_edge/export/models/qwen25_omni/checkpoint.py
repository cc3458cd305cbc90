"""Qwen2.5-Omni thinker checkpoints made here (thinker-only, random weights): its media tokens at
the tokenizer's last ids, and the processors' settings in preprocessor_config.json."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omni_edge.export.checkpoint import preset_of, save_random_checkpoint, seed_everything, train_tokenizer
from omni_edge.export.corpus import stdlib_corpus
from omni_edge.export.models.qwen25_omni.reference import MEDIA_TOKENS, SPECIAL_TOKENS


@dataclass(frozen=True)
class OmniPreset:
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    mrope_section: tuple[int, int, int]  # temporal, height, width halves of the head's rotary dims
    vision_depth: int
    vision_hidden: int
    vision_heads: int
    vision_full_attention: tuple[int, ...]
    audio_layers: int
    audio_width: int
    audio_heads: int


OMNI_PRESETS: dict[str, OmniPreset] = {
    # Qwen2.5-Omni-7B: hidden 3584 (28 heads of 128, 4 KV heads, M-RoPE 16/24/24), a 32-block
    # vision encoder with full attention every 8th block, a 32-layer 1280-wide audio encoder.
    "tiny": OmniPreset(1024, 64, 2, 4, 2, 128, (2, 3, 3), 2, 32, 2, (1,), 2, 32, 2),
    "small": OmniPreset(2048, 128, 4, 4, 2, 256, (4, 6, 6), 4, 64, 4, (1, 3), 4, 64, 4),
}

# The processors' settings (preprocessor_config.json, as a release keeps both in one file); the
# audio window is the releases' 300 s (Whisper's own is 30 s).
IMAGE_PROCESSOR = {"image_processor_type": "Qwen2VLImageProcessor", "min_pixels": 56 * 56, "max_pixels": 28 * 28 * 1280,
                   "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
                   "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711]}
FEATURE_EXTRACTOR = {"feature_extractor_type": "WhisperFeatureExtractor", "feature_size": 128, "sampling_rate": 16000,
                     "hop_length": 160, "n_fft": 400, "chunk_length": 300, "n_samples": 4800000, "nb_max_frames": 30000,
                     "padding_side": "right", "padding_value": 0.0, "return_attention_mask": True}


# ---- checkpoints -----------------------------------------------------------------------------

def _thinker_config(p: OmniPreset, tokenizer: Any) -> Any:
    from transformers import Qwen2_5OmniThinkerConfig

    ids = {name: tokenizer.token_to_id(token) for name, token in MEDIA_TOKENS.items()}
    head_dim = p.hidden // p.heads
    if 2 * sum(p.mrope_section) != head_dim:
        raise ValueError(f"mrope_section {p.mrope_section} must cover half the head dim {head_dim}")
    config = Qwen2_5OmniThinkerConfig(
        text_config={"vocab_size": p.vocab, "hidden_size": p.hidden, "intermediate_size": p.intermediate,
                     "num_hidden_layers": p.layers, "num_attention_heads": p.heads, "num_key_value_heads": p.kv_heads,
                     "max_position_embeddings": 8192, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
                     "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0,
                                         "mrope_section": list(p.mrope_section)},
                     "bos_token_id": tokenizer.token_to_id("<|endoftext|>"),
                     "eos_token_id": tokenizer.token_to_id("<|im_end|>"),
                     "pad_token_id": tokenizer.token_to_id("<|endoftext|>")},
        vision_config={"depth": p.vision_depth, "hidden_size": p.vision_hidden, "num_heads": p.vision_heads,
                       "intermediate_size": 2 * p.vision_hidden, "out_hidden_size": p.hidden,
                       "fullatt_block_indexes": list(p.vision_full_attention), "window_size": 112,
                       "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2},
        audio_config={"num_mel_bins": 128, "encoder_layers": p.audio_layers, "d_model": p.audio_width,
                      "encoder_attention_heads": p.audio_heads, "encoder_ffn_dim": 2 * p.audio_width,
                      "output_dim": p.hidden, "n_window": 100, "max_source_positions": 1500},
        audio_token_index=ids["audio_token"], image_token_index=ids["image_token"],
        video_token_index=ids["video_token"], audio_start_token_id=ids["audio_bos_token"],
        audio_end_token_id=ids["audio_eos_token"])
    # Not fields of the config class, but read by its forward (get_rope_index): set explicitly.
    config.vision_start_token_id = ids["vision_bos_token"]
    config.vision_end_token_id = ids["vision_eos_token"]
    return config


def make_checkpoint(out: Path, preset: str = "tiny", seed: int = 0) -> Path:
    """A thinker-only Qwen2.5-Omni checkpoint with random weights: config.json,
    model.safetensors, tokenizer.json (its media tokens at the config's ids),
    tokenizer_config.json and preprocessor_config.json."""
    from transformers import Qwen2_5OmniThinkerForConditionalGeneration

    p = preset_of(OMNI_PRESETS, preset, "qwen2.5-omni")
    seed_everything(seed)
    tokenizer = train_tokenizer(stdlib_corpus(), p.vocab, SPECIAL_TOKENS)
    thinker_class: Any = Qwen2_5OmniThinkerForConditionalGeneration
    model: Any = thinker_class(_thinker_config(p, tokenizer)).float().eval()
    model.generation_config.do_sample = False
    # No chat template: --chat renders the user turn as Qwen2.5-Omni's ChatML.
    save_random_checkpoint(out, model, tokenizer, {"arch": "qwen2.5-omni", "preset": preset, "seed": seed},
                           eos_token="<|im_end|>", pad_token="<|endoftext|>")
    config = json.loads((out / "tokenizer_config.json").read_text())
    (out / "tokenizer_config.json").write_text(json.dumps({**config, **MEDIA_TOKENS}, indent=2) + "\n")
    (out / "preprocessor_config.json").write_text(json.dumps(
        {**IMAGE_PROCESSOR, **FEATURE_EXTRACTOR, "processor_class": "Qwen2_5OmniProcessor"}, indent=2) + "\n")
    return out
