"""A MiniCPM-o 4.5 checkpoint's config.json, read into what the thinker's parts need.

A release (openbmb/MiniCPM-o-4_5) and a checkpoint made here share one layout: `model_type`
"minicpmo" with `version` "4.5"; the LLM's fields at the top level (a Qwen3 decoder: vLLM-Omni
builds Qwen3 whenever `attention_bias` is false, Qwen2 otherwise); `vision_config` (SigLIP),
`audio_config` (Whisper), `tts_config` (the talker), `slice_config`, and the resampler's
`query_num`. MiniCPM-o 2.6 has the same model_type and is told apart by `version`, as
vLLM-Omni's pipeline does (its 2.6 model is another architecture, refused by name)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODEL_TYPE = "minicpmo"
VERSION = "4.5"


@dataclass(frozen=True)
class VisionConfig:
    hidden: int
    intermediate: int
    layers: int  # after drop_vision_last_layer
    heads: int
    patch: int
    positions_per_side: int  # image_size // patch: the learned position table is its square
    eps: float


@dataclass(frozen=True)
class AudioConfig:
    width: int
    layers: int
    heads: int
    ffn: int
    mel_bins: int
    max_positions: int
    pool_step: int
    chunk_frames: int  # block-causal attention: encoder frames per block (audio_chunk_length s x 50)


@dataclass(frozen=True)
class SliceConfig:
    max_slices: int
    scale_resolution: int  # config.image_size: the area a slice is resized to (about its square)
    patch: int
    query_num: int         # resampler queries: placeholders per slice
    use_image_id: bool


@dataclass(frozen=True)
class ThinkerConfig:
    raw: dict[str, Any]
    hidden: int
    vision: VisionConfig
    audio: AudioConfig
    slices: SliceConfig

    def llm_config(self) -> Any:
        """The decoder's transformers config (Qwen3, as vLLM-Omni builds it from the same dict)."""
        from transformers import Qwen3Config

        fields = {k: v for k, v in self.raw.items() if k not in ("architectures", "auto_map", "model_type")
                  and not (k == "rope_scaling" and v is None)}
        return Qwen3Config(**fields)


def version_error(config: dict[str, Any], where: object) -> str | None:
    """Why a minicpmo config is not MiniCPM-o 4.5 (None when it is)."""
    version = str(config.get("version", ""))
    if version == VERSION:
        if config.get("attention_bias", False) is not False:
            return f"{where}: MiniCPM-o 4.5 with attention_bias (a Qwen2 decoder) is not supported: its LLM is Qwen3"
        return None
    named = f"MiniCPM-o {version}" if version else "a MiniCPM-o checkpoint without a version"
    return f"{where}: {named} is not supported (only MiniCPM-o {VERSION}, whose config.json says version \"{VERSION}\")"


def _int(section: dict[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = section.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{where}.{key}: a positive integer, got {value!r}")
    return value


def read_config(checkpoint: Path) -> ThinkerConfig:
    """The thinker's config of a MiniCPM-o 4.5 checkpoint directory, or a ValueError naming the
    field that is missing or out of range (or the version that is not 4.5)."""
    path = checkpoint / "config.json"
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable config ({exc})") from None
    if not isinstance(raw, dict) or raw.get("model_type") != MODEL_TYPE:
        raise ValueError(f"{path}: not a MiniCPM-o config (model_type {MODEL_TYPE!r})")
    error = version_error(raw, path)
    if error:
        raise ValueError(error)
    v, a, s = (raw.get(k) or {} for k in ("vision_config", "audio_config", "slice_config"))
    for name, section in (("vision_config", v), ("audio_config", a), ("slice_config", s)):
        if not isinstance(section, dict):
            raise ValueError(f"{path}: {name} is not an object")
    layers = _int(v, "num_hidden_layers", "vision_config")
    vision = VisionConfig(
        hidden=_int(v, "hidden_size", "vision_config"), intermediate=_int(v, "intermediate_size", "vision_config"),
        layers=layers - 1 if raw.get("drop_vision_last_layer", True) else layers,
        heads=_int(v, "num_attention_heads", "vision_config"), patch=_int(v, "patch_size", "vision_config"),
        positions_per_side=_int(v, "image_size", "vision_config") // _int(v, "patch_size", "vision_config"),
        eps=float(v.get("layer_norm_eps", 1e-6)))
    ffn = _int(a, "encoder_ffn_dim", "audio_config")
    width = _int(a, "d_model", "audio_config")
    if ffn // 4 != width:  # the projector reads encoder_ffn_dim // 4 features (vLLM-Omni)
        raise ValueError(f"{path}: audio_config.encoder_ffn_dim // 4 ({ffn // 4}) must equal d_model ({width})")
    chunk_seconds = float(raw.get("audio_chunk_length", 1.0))
    audio = AudioConfig(width=width, layers=_int(a, "encoder_layers", "audio_config"),
                        heads=_int(a, "encoder_attention_heads", "audio_config"), ffn=ffn,
                        mel_bins=_int(a, "num_mel_bins", "audio_config"),
                        max_positions=_int(a, "max_source_positions", "audio_config"),
                        pool_step=_int(raw, "audio_pool_step", "config", 5),
                        chunk_frames=int(chunk_seconds * 50) if chunk_seconds > 0 else 0)
    slices = SliceConfig(max_slices=_int(s, "max_slice_nums", "slice_config", 9),
                         scale_resolution=_int(raw, "image_size", "config", 448), patch=vision.patch,
                         query_num=_int(raw, "query_num", "config", 64),
                         use_image_id=bool(raw.get("use_image_id", True)))
    hidden = _int(raw, "hidden_size", "config")
    if hidden % 128:
        raise ValueError(f"{path}: hidden_size {hidden} is not a multiple of 128 (the resampler's heads are 128 wide)")
    return ThinkerConfig(raw, hidden, vision, audio, slices)
