"""Qwen3-TTS-shaped speech checkpoints made here: talker, code predictor and the 12 Hz vocoder
(speech_tokenizer/) with random weights, scaled so that codes are peaked and speech is at
speech level; with --thinker, an omni talker reading that text model's hidden states."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omni_edge.export.checkpoint import preset_of, seed_everything, train_tokenizer, write_record
from omni_edge.export.corpus import stdlib_corpus
from omni_edge.export.models.qwen3_tts.reference import Qwen3Tts


@dataclass(frozen=True)
class TtsPreset:
    text_vocab: int
    text_hidden: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    predictor_layers: int
    codebook: int
    vocoder_hidden: int
    vocoder_layers: int
    vocoder_decoder_dim: int
    head_gain: float = 10.0  # random heads scaled up: peaked code distributions, like a trained model's


TTS_PRESETS: dict[str, TtsPreset] = {
    # Qwen3-TTS-12Hz-0.6B has a 1024-wide 28-layer talker, a 5-layer predictor, 2048 codes per
    # codebook and a 1536-wide decoder; tiny keeps every structure at a fraction of the width.
    "tiny": TtsPreset(1024, 64, 128, 2, 4, 2, 32, 384, 2, 256, 64, 2, 96),
    "small": TtsPreset(4096, 256, 256, 4, 8, 4, 32, 768, 3, 1024, 128, 4, 192),
}


def tts_configs(p: TtsPreset, text_pad_id: int) -> tuple[dict[str, Any], dict[str, Any]]:
    decoder = {"vocab_size": p.codebook + 3, "hidden_size": p.hidden, "intermediate_size": p.intermediate,
               "num_hidden_layers": p.layers, "num_attention_heads": p.heads, "num_key_value_heads": p.kv_heads,
               "head_dim": p.head_dim, "max_position_embeddings": 8192, "rope_theta": 1_000_000.0,
               "rms_norm_eps": 1e-6, "tie_word_embeddings": False}
    predictor = {**decoder, "vocab_size": p.codebook, "num_hidden_layers": p.predictor_layers,
                 "num_code_groups": 16, "max_position_embeddings": 64}
    config = {"model_type": "qwen3_tts", "architectures": ["Qwen3TTSForConditionalGeneration"],
              "text_pad_token_id": text_pad_id,
              "talker_config": {"codebook_size": p.codebook, "text_vocab_size": p.text_vocab,
                                "text_hidden_size": p.text_hidden, "decoder": decoder, "code_predictor": predictor},
              "frame_rate": 12.5, "sample_rate": 24000}
    vocoder = {"codebook_size": p.codebook, "hidden_size": p.vocoder_hidden, "num_attention_heads": 4,
               "num_key_value_heads": 4, "intermediate_size": 2 * p.vocoder_hidden,
               "num_hidden_layers": p.vocoder_layers, "decoder_dim": p.vocoder_decoder_dim, "sliding_window": 72,
               "num_quantizers": 16, "upsample_rates": [8, 5, 4, 3], "upsampling_ratios": [2, 2]}
    return config, vocoder


def make_checkpoint(out: Path, preset: str = "tiny", seed: int = 0, thinker: Path | None = None) -> Path:
    """config.json + model.safetensors + tokenizer.json + speech_tokenizer/ (the vocoder).

    With `thinker` (a Qwen3 checkpoint directory) the talker is an omni one: its text side is
    the thinker's (tokenizer, vocabulary, hidden width), so it can read the thinker's hidden
    states through its text projection."""
    import torch
    from transformers import PreTrainedTokenizerFast


    p = preset_of(TTS_PRESETS, preset, "qwen3-tts")
    seed_everything(seed)
    if thinker is not None:
        from tokenizers import Tokenizer

        if not (thinker / "config.json").is_file() or not (thinker / "tokenizer.json").is_file():
            raise ValueError(f"{thinker}: not a checkpoint directory (config.json and tokenizer.json)")
        text = json.loads((thinker / "config.json").read_text())
        # A multimodal thinker keeps its decoder's sizes under text_config (a release: under thinker_config).
        text = text.get("thinker_config", text)
        text = text.get("text_config", text)
        tokenizer = Tokenizer.from_file(str(thinker / "tokenizer.json"))
        p = dataclasses.replace(p, text_vocab=int(text["vocab_size"]), text_hidden=int(text["hidden_size"]))
    else:
        tokenizer = train_tokenizer(stdlib_corpus(), p.text_vocab)
    pad = tokenizer.token_to_id("<|endoftext|>")
    if pad is None:
        raise ValueError("the text tokenizer has no <|endoftext|> token for the text pad")
    config, vocoder = tts_configs(p, pad)
    model = Qwen3Tts(config, vocoder)
    with torch.no_grad():
        model.talker.codec_head.weight.mul_(p.head_gain)
        for head in model.talker.code_predictor.lm_head:
            head.weight.mul_(p.head_gain)
        # A random decoder whispers (RMS ~1e-6): scale its output conv so that random codes come
        # out at speech level (RMS 0.1, -20 dBFS), which is what the PCM path must carry.
        probe = torch.randint(0, p.codebook, (1, 16, 50), generator=torch.Generator().manual_seed(seed))
        rms = float(model.vocoder(probe).pow(2).mean().sqrt())
        out_conv = model.vocoder.decoder[-1].conv
        out_conv.weight.mul_(0.1 / max(rms, 1e-12))
        out_conv.bias.mul_(0.1 / max(rms, 1e-12))
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    fast_class: Any = PreTrainedTokenizerFast
    fast_class(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>").save_pretrained(out)
    write_record(out, {"arch": "qwen3-tts", "preset": preset, "seed": seed, "head_gain": p.head_gain,
                       "thinker": str(thinker) if thinker is not None else None})
    return out
