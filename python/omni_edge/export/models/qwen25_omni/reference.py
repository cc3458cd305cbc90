"""Qwen2.5-Omni thinkers: the loader of real and local checkpoints, and the transformers reference
for multimodal requests (image and audio placeholders, ChatML).

The thinker (transformers' `Qwen2_5OmniThinkerForConditionalGeneration`) is a Whisper-style
audio encoder (128 mel bins, 25 tokens per second), a Qwen2.5-VL vision encoder (14-pixel
patches, 2x2 merge, windowed attention with full-attention blocks) and a Qwen2 decoder with
multimodal RoPE (three position rows). Every size and special token id is read from the
checkpoint's config, never assumed: a release's ids (151646 ...) and a local checkpoint's
(the tokenizer's last ids) go through the same code.

A checkpoint directory is either thinker-only (`model_type` "qwen2_5_omni_thinker", as
`save_pretrained` writes it) or a whole Qwen2.5-Omni release (`model_type` "qwen2_5_omni": the
thinker's weights under `thinker.`; its talker and token2wav are skipped, and said so)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from omni_edge.runtime.media import read_wav

# The release tokenizer's names for its multimodal tokens (tokenizer_config.json of Qwen2.5-Omni).
MEDIA_TOKENS = {"audio_token": "<|AUDIO|>", "audio_bos_token": "<|audio_bos|>", "audio_eos_token": "<|audio_eos|>",
                "image_token": "<|IMAGE|>", "video_token": "<|VIDEO|>", "vision_bos_token": "<|vision_bos|>",
                "vision_eos_token": "<|vision_eos|>"}
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", *MEDIA_TOKENS.values())
THINKER_TYPE, RELEASE_TYPE = "qwen2_5_omni_thinker", "qwen2_5_omni"


# ---- loading a checkpoint --------------------------------------------------------------------

@dataclass
class Thinker:
    """A loaded thinker, its config (the thinker's, also for a release) and what was skipped."""

    model: Any
    config: Any
    skipped: dict[str, int]  # a release's other parts: weight-name prefix -> tensors not loaded


def checkpoint_kind(checkpoint: Path) -> str:
    """THINKER_TYPE or RELEASE_TYPE, or a ValueError naming what the directory is instead."""
    path = checkpoint / "config.json"
    if not path.is_file():
        raise ValueError(f"{checkpoint}: no config.json (not a checkpoint directory)")
    kind = json.loads(path.read_text()).get("model_type")
    if kind not in (THINKER_TYPE, RELEASE_TYPE):
        raise ValueError(f"{checkpoint}: model_type {kind!r} is not a Qwen2.5-Omni thinker "
                         f"({THINKER_TYPE!r}) or release ({RELEASE_TYPE!r})")
    return str(kind)


def load_thinker(checkpoint: Path) -> Thinker:
    """The thinker of a thinker-only directory or of a whole release (weights under `thinker.`,
    renamed by transformers' own conversion mapping; the other parts' weights are not read)."""
    import torch
    from safetensors import safe_open
    from transformers import AutoConfig, Qwen2_5OmniThinkerForConditionalGeneration

    config: Any = None
    skipped: dict[str, int] = {}
    if checkpoint_kind(checkpoint) == RELEASE_TYPE:
        full = AutoConfig.from_pretrained(checkpoint)
        config = full.thinker_config
        for name in ("vision_start_token_id", "vision_end_token_id"):
            if getattr(config, name, None) is None:  # read by get_rope_index; some configs keep them outside
                setattr(config, name, getattr(full, name, None))
        for file in sorted(checkpoint.glob("*.safetensors")):
            with safe_open(str(file), framework="pt") as f:
                for name in f.keys():  # noqa: SIM118 (safe_open is not a mapping)
                    head = name.partition(".")[0]
                    if head != "thinker":
                        skipped[head] = skipped.get(head, 0) + 1
    model: Any = Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained(checkpoint, config=config,
                                                                            dtype=torch.float32)
    return Thinker(model.eval(), model.config, skipped)


# ---- the reference: transformers' processors, placeholders, generate -------------------------

@dataclass
class Processors:
    image: Any  # Qwen2VLImageProcessorPil (the processor that needs no torchvision)
    audio: Any  # WhisperFeatureExtractor
    merge_size: int
    sampling_rate: int


def processors(checkpoint: Path) -> Processors:
    """The checkpoint's image processor and audio feature extractor, from preprocessor_config.json."""
    from transformers import WhisperFeatureExtractor
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    config = json.loads((checkpoint / "preprocessor_config.json").read_text())
    image_keys = ("min_pixels", "max_pixels", "patch_size", "temporal_patch_size", "merge_size", "image_mean", "image_std")
    image = Qwen2VLImageProcessorPil(**{k: config[k] for k in image_keys if k in config})
    audio_keys = ("feature_size", "sampling_rate", "hop_length", "chunk_length", "n_fft", "padding_value")
    extractor: Any = WhisperFeatureExtractor
    audio = extractor(**{k: config[k] for k in audio_keys if k in config})
    return Processors(image, audio, int(config.get("merge_size", 2)), int(audio.sampling_rate))


def resample(x: np.ndarray, rate: int, target: int) -> np.ndarray:
    """The reference resampler: polyphase, Kaiser-windowed (scipy's resample_poly)."""
    from math import gcd

    from scipy.signal import resample_poly  # type: ignore[import-untyped]

    if rate == target:
        return x
    g = gcd(rate, target)
    out: np.ndarray = resample_poly(x, target // g, rate // g).astype(np.float32)
    return out


def audio_tokens(feature_frames: int) -> int:
    """Thinker tokens of an audio of `feature_frames` mel frames: two stride-2 stages (conv, pool)."""
    after_conv = (feature_frames - 1) // 2 + 1
    return (after_conv - 2) // 2 + 1


def media_ids(config: Any, kind: str, n: int) -> list[int]:
    """The placeholders of one media item as the thinker reads them: start, n tokens, end."""
    if kind == "image":
        return [config.vision_start_token_id, *[config.image_token_index] * n, config.vision_end_token_id]
    return [config.audio_start_token_id, *[config.audio_token_index] * n, config.audio_end_token_id]


def render_ids(tokenizer: Any, config: Any, media: list[tuple[str, int]], prompt: str, chat: bool,
               system: str | None = None) -> list[int]:
    """The prompt's ids: media placeholders in order, then the text; with `chat` the user turn as
    Qwen2.5-Omni's ChatML renders it (no system turn unless `system`), then the assistant's start."""
    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False))

    ids: list[int] = []
    if chat and system:
        ids += encode(f"<|im_start|>system\n{system}<|im_end|>\n")
    if chat:
        ids += encode("<|im_start|>user\n")
    for kind, n in media:
        ids += media_ids(config, kind, n)
    ids += encode(prompt + ("<|im_end|>\n<|im_start|>assistant\n" if chat else ""))
    return ids


def reference_inputs(checkpoint: Path, thinker: Thinker, media: list[tuple[str, Path]], prompt: str, chat: bool,
                     system: str | None = None) -> dict[str, Any]:
    """transformers' inputs for a request: each image through the image processor, each audio
    (resampled to the extractor's rate) through the feature extractor, in the order given."""
    import torch
    from PIL import Image
    from transformers import AutoTokenizer

    proc = processors(checkpoint)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    images = [Image.open(path).convert("RGB") for kind, path in media if kind == "image"]
    audios = []
    for kind, path in media:
        if kind == "audio":
            x, rate = read_wav(path)
            audios.append(resample(x, rate, proc.sampling_rate))
    inputs: dict[str, Any] = {}
    counts: dict[str, list[int]] = {"image": [], "audio": []}
    if images:
        got = proc.image(images=images, return_tensors="pt")
        inputs |= {"pixel_values": got["pixel_values"], "image_grid_thw": got["image_grid_thw"]}
        counts["image"] = [int(t.prod()) // proc.merge_size ** 2 for t in got["image_grid_thw"]]
    if audios:
        got = proc.audio(audios, sampling_rate=proc.sampling_rate, return_attention_mask=True, padding="max_length",
                         return_tensors="pt")
        inputs |= {"input_features": got["input_features"], "feature_attention_mask": got["attention_mask"]}
        counts["audio"] = [audio_tokens(int(n)) for n in got["attention_mask"].sum(-1)]
    order = {"image": iter(counts["image"]), "audio": iter(counts["audio"])}
    ids = render_ids(tokenizer, thinker.config, [(kind, next(order[kind])) for kind, _ in media], prompt, chat, system)
    inputs["input_ids"] = torch.tensor([ids])
    inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
    return inputs


def reference_generate(checkpoint: Path, thinker: Thinker, media: list[tuple[str, Path]], prompt: str,
                       max_new_tokens: int, chat: bool = False, system: str | None = None) -> list[int]:
    """transformers' greedy `generate` on the request: the new token ids."""
    import torch

    inputs = reference_inputs(checkpoint, thinker, media, prompt, chat, system)
    with torch.no_grad():
        out = thinker.model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
    return [int(t) for t in out[0, inputs["input_ids"].shape[1]:]]
