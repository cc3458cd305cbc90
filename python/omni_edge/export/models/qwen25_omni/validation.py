"""The media report of a Qwen2.5-Omni export: a whole image + audio request through the exported
graphs (the encoders' outputs spliced into the prompt at its placeholders, the native engine with
the prompt's M-RoPE rows), greedy, against transformers' generate on the same processed inputs."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from omni_edge.artifacts import identity_report
from omni_edge.contracts import ReportCheck, ValidationReport
from omni_edge.export.comparison import FP32_TIE_GAP
from omni_edge.export.models.qwen25_omni.onnx import run_audio_chunks
from omni_edge.export.models.qwen25_omni.reference import Thinker, reference_inputs
from omni_edge.export.targets.onnx_target import cpu_session
from omni_edge.runtime.media import wav_bytes

MEDIA_TOKENS = 16       # greedy tokens of the media report's request


def request_media(directory: Path, size: tuple[int, int]) -> list[tuple[str, Path]]:
    """A red square of the first image size and a 2.5 s 440 Hz tone at 24 kHz (resampled on the way)."""
    from PIL import Image

    image, audio = directory / "red_square.png", directory / "tone_440hz.wav"
    Image.new("RGB", size, (255, 0, 0)).save(image)
    t = np.arange(int(2.5 * 24000)) / 24000
    audio.write_bytes(wav_bytes(0.5 * np.sin(2 * np.pi * 440 * t), 24000))
    return [("image", image), ("audio", audio)]


@dataclass(frozen=True)
class Encoders:
    """Where the exported encoder graphs are: image grid "txhxw" -> graph, the audio chunk graph."""

    vision: dict[str, Path]
    audio: Path
    chunk_frames: int

    @classmethod
    def of(cls, out: Path) -> Encoders:
        """The encoders an export wrote into OUT, from their manifests."""
        vision = json.loads((out / "vision-onnx" / "manifest.json").read_text())["metadata"]["vision"]
        audio = json.loads((out / "audio-onnx" / "manifest.json").read_text())["metadata"]["audio"]
        return cls({g: out / "vision-onnx" / f for g, f in vision["graphs"].items()},
                   out / "audio-onnx" / audio["graphs"]["chunk"], int(audio["chunk_frames"]))


def media_generate(checkpoint: Path, thinker: Thinker, plan: Path, encoders: Encoders, inputs: dict[str, Any],
                   max_new_tokens: int, threads: int = 0) -> tuple[list[int], list[float]]:
    """Greedy ids of one processed request through the exported graphs: encoders on ONNX Runtime,
    the thinker on the native engine with their outputs spliced in and the prompt's M-RoPE rows.
    Also returns, per step, the engine's top-2 logit gap (how decided each pick was)."""
    from omni_edge import _native
    from omni_edge.runtime.media import mrope_positions

    config = thinker.config
    ids = [int(t) for t in inputs["input_ids"][0]]
    rows: dict[int, list[np.ndarray]] = {config.image_token_index: [], config.audio_token_index: []}
    grids: list[tuple[int, int, int]] = []
    if "pixel_values" in inputs:
        start = 0
        for grid_t in inputs["image_grid_thw"]:
            grid = (int(grid_t[0]), int(grid_t[1]), int(grid_t[2]))
            n = grid[0] * grid[1] * grid[2]
            name = "x".join(map(str, grid))
            if name not in encoders.vision:
                raise ValueError(f"no vision graph for the image grid {name} (exported: {', '.join(encoders.vision)})")
            session = cpu_session(encoders.vision[name])
            rows[config.image_token_index].append(
                session.run(None, {"pixel_values": inputs["pixel_values"][start:start + n].numpy()})[0])
            grids.append(grid)
            start += n
    if "input_features" in inputs:
        session = cpu_session(encoders.audio)
        for features, mask in zip(inputs["input_features"], inputs["feature_attention_mask"], strict=True):
            n = int(mask.sum())
            rows[config.audio_token_index].append(run_audio_chunks(session, features[:, :n].numpy(), encoders.chunk_frames))
    media = {token: iter(np.concatenate(r)) if r else iter(()) for token, r in rows.items()}
    positions = [p for p, t in enumerate(ids) if t in media]
    spliced = np.stack([next(media[ids[p]]) for p in positions]).astype(np.float32) if positions else np.zeros((0,))
    table, next_position = mrope_positions(ids, json.loads((checkpoint / "config.json").read_text()), grids)
    engine = _native.LlmEngine.open(str(plan), threads)
    engine.set_position_table(table.tolist(), next_position)
    logits = np.frombuffer(engine.feed(ids, spliced.tobytes(), positions), np.float32)
    got: list[int] = []
    gaps: list[float] = []
    for _ in range(max_new_tokens):
        top2 = np.sort(logits)[-2:]
        gaps.append(float(top2[1] - top2[0]))
        got.append(int(np.argmax(logits)))
        logits = np.frombuffer(engine.feed([got[-1]]), np.float32)
    return got, gaps


def media_report(checkpoint: Path, thinker: Thinker, plan: Path, encoders: Encoders, size: tuple[int, int],
                  identity: dict[str, str], threads: int) -> ValidationReport:
    with tempfile.TemporaryDirectory() as tmp:
        media = request_media(Path(tmp), size)
        inputs = reference_inputs(checkpoint, thinker, media, "What do you see and hear?", chat=True)
        with torch.no_grad():
            ref = thinker.model.generate(**inputs, max_new_tokens=MEDIA_TOKENS, do_sample=False, min_new_tokens=MEDIA_TOKENS,
                                         output_logits=True, return_dict_in_generate=True)
        ref_ids = [int(t) for t in ref.sequences[0, inputs["input_ids"].shape[1]:]]
        got, _ = media_generate(checkpoint, thinker, plan, encoders, inputs, MEDIA_TOKENS, threads)
    # Along the path: a pick agrees when it is transformers' or one of its near ties.
    first_difference = next((i for i, (a, b) in enumerate(zip(got, ref_ids, strict=True)) if a != b), MEDIA_TOKENS)
    agree = 1.0
    if first_difference < MEDIA_TOKENS:
        logits = ref.logits[first_difference][0].double().numpy()
        tie = float(logits.max() - logits[got[first_difference]]) < FP32_TIE_GAP
        agree = first_difference / MEDIA_TOKENS if not tie else 1.0
    return identity_report("task", identity, (
        ReportCheck("media_greedy_agreement", agree, 1.0, ">="),
        ReportCheck("media_prompt_tokens", float(inputs["input_ids"].shape[1]), 1.0, ">="),
    ))


def session_agreement(checkpoint: Path, thinker: Thinker, plan: Path, image: tuple[int, int]) -> float:
    """Greedy agreement of a whole image + audio request through the native session on `plan`
    (whatever runs its encoders) with transformers' generate: the share of the reference's tokens
    before the first difference that is not a near tie."""
    import tempfile

    from omni_edge.runtime import Session

    with tempfile.TemporaryDirectory() as tmp:
        media = request_media(Path(tmp), image)
        inputs = reference_inputs(checkpoint, thinker, media, "What do you see and hear?", chat=True)
        with torch.no_grad():
            ref = thinker.model.generate(**inputs, max_new_tokens=MEDIA_TOKENS, min_new_tokens=MEDIA_TOKENS,
                                         do_sample=False, output_logits=True, return_dict_in_generate=True)
        ref_ids = [int(t) for t in ref.sequences[0, inputs["input_ids"].shape[1]:]]
        got: list[int] = []

        def collect(event: dict[str, Any]) -> bool:
            got.extend(event.get("token_ids", []))
            return True

        Session.open(plan, allow_unqualified=True).run("What do you see and hear?", chat=True, on_event=collect,
                                                       media=[(k, str(p)) for k, p in media],
                                                       max_new_tokens=MEDIA_TOKENS, ignore_stop_tokens=True)
    for i, (a, b) in enumerate(zip(got, ref_ids, strict=False)):
        if a != b:
            logits = ref.logits[i][0].double().numpy()
            return 1.0 if float(logits.max() - logits[a]) < FP32_TIE_GAP else i / MEDIA_TOKENS
    return 1.0 if len(got) == MEDIA_TOKENS else len(got) / MEDIA_TOKENS
