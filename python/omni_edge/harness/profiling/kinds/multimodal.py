"""A multimodal plan (encoder stages before the thinker): profiled with an image and audio sent
with every request. Each encoder's preprocessing and graph time, how long the thinker waited for
their rows and how many bytes crossed, the time from the rows to the first token (the rest of the
chain), and the audio encoder's tokens per second of audio (its alignment with the audio's
timeline). Its report says the kind of its outputs: "text", or "omni" when it also speaks.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from omni_edge.harness.devices.base import Device
from omni_edge.harness.profiling.kinds.base import Event, Lines, PlanKind, Workload
from omni_edge.harness.profiling.kinds.omni import Omni
from omni_edge.harness.profiling.kinds.text import Text

MEDIA_METRICS = ("media_wait_ms", "after_media_ttft_ms", "media_tokens", "media_bytes", "image_preprocess_ms",
                 "image_encode_ms", "audio_preprocess_ms", "audio_encode_ms", "audio_tokens_per_second")
PROMPT = "What do you see and hear?"


def plan_media(plan_path: Path) -> list[str]:
    """The media a plan's encoder stages read ("image", "audio"); empty for a text-only thinker."""
    stages = json.loads(plan_path.read_text())["stages"]
    return [s["encoder"]["modality"] for s in stages if isinstance(s.get("encoder"), dict)]


def plan_image_grids(plan_path: Path) -> list[list[int]]:
    """The image patch grids a plan's vision encoder has graphs for: (t, h, w) of a Qwen2.5-Omni
    vision graph, (rows, cols) of a MiniCPM-o slice graph."""
    stages = json.loads(plan_path.read_text())["stages"]
    return [[int(v) for v in key.split("x")] for s in stages if s.get("encoder", {}).get("modality") == "image"
            for key in s["graphs"]["encoder"]["graphs"]]


def write_media(directory: Path, modalities: list[str], grid: list[int] | None, patch: int = 14,
                seconds: float = 4.0) -> list[tuple[str, Path]]:
    """The profile's media for a multimodal plan: noise at the size of its first image grid (no
    resampling; a MiniCPM-o slice grid's size is one slice, not sliced further) and `seconds` of a
    24 kHz chirp (resampled to the encoder's rate on the way). Each file is written whole or not
    at all."""
    import numpy as np
    from PIL import Image

    from omni_edge.files import atomic_output
    from omni_edge.runtime.media import wav_bytes

    out: list[tuple[str, Path]] = []
    if "image" in modalities and grid:
        image = directory / "image.png"
        rows, cols = grid[-2:]
        pixels = np.random.default_rng(0).integers(0, 256, (rows * patch, cols * patch, 3), dtype=np.uint8)
        with atomic_output(image) as part:
            Image.fromarray(pixels).save(part, format="PNG")
        out.append(("image", image))
    if "audio" in modalities:
        audio = directory / "audio.wav"
        t = np.arange(int(seconds * 24000)) / 24000
        with atomic_output(audio) as part:
            part.write_bytes(wav_bytes(0.4 * np.sin(2 * np.pi * (200 + 300 * t) * t), 24000))
        out.append(("audio", audio))
    return out


def media_fields(row: dict[str, Any], terminal: Event) -> None:
    """The multimodal dimensions from the text terminal's media block: each encoder, the handoff,
    the rest of the chain."""
    media = terminal.get("media") or {}
    if not media.get("items"):
        return
    row |= {"media_wait_ms": media.get("wait_ms"), "media_tokens": media.get("tokens"),
            "media_bytes": media.get("bytes_received")}
    for modality in ("image", "audio"):
        for key in ("preprocess_ms", "encode_ms", "tokens_per_second"):
            if key in media.get(modality, {}):
                row[f"{modality}_{key}"] = media[modality][key]
    if row.get("ttft_ms") is not None and media.get("wait_ms") is not None:
        row["after_media_ttft_ms"] = float(row["ttft_ms"]) - float(media["wait_ms"])


class MediaInputs(PlanKind):
    """What encoder stages add to a kind with a text stream: the media, pushed beside the
    artifacts and named on every request, and the media metrics after wall_ms."""

    def __init__(self, plan: Path | None = None) -> None:
        super().__init__(plan)
        self.media = plan_media(plan) if plan is not None else []

    def prepare(self, workload: Workload, device: Device, root: str, scratch: Path) -> Workload:
        assert self.plan is not None
        grids = plan_image_grids(self.plan)
        media = []
        for modality, local in write_media(scratch / "media", self.media, grids[0] if grids else None):
            remote = f"{root}/media/{local.name}"
            device.put_file(local, remote)
            media.append((modality, remote))
        return dataclasses.replace(super().prepare(workload, device, root, scratch), prompt=PROMPT, media=tuple(media))

    def add_fields(self, row: dict[str, Any], terminals: dict[str, Event], lines: Lines, start: float) -> None:
        super().add_fields(row, terminals, lines, start)
        media_fields(row, terminals["text"])

    def metric_names(self) -> list[str]:
        names = super().metric_names()
        return [names[0], *MEDIA_METRICS, *names[1:]]


class Multimodal(MediaInputs, Text):
    """A thinker with encoder stages (its report's kind: "text")."""


class MultimodalOmni(MediaInputs, Omni):
    """An omni plan whose thinker has encoder stages (its report's kind: "omni")."""
