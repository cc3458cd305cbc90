"""The media check of a MiniCPM-o 4.5 export: the roadmap's request (a red square and a 2 s
440 Hz tone, "What do you see and hear?") through the exported graphs (each slice and audio
piece on ONNX Runtime, their rows in place of the prompt's `<unk>`s, the thinker on the native
engine with positions 0..N-1), greedy, against the PyTorch reference on the same request."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from omni_edge.contracts import ReportCheck
from omni_edge.export.comparison import FP32_TIE_GAP
from omni_edge.export.models.minicpmo45.audio import log_mel_pieces
from omni_edge.export.models.minicpmo45.onnx import audio_sessions, run_audio_pieces, slice_key
from omni_edge.export.models.minicpmo45.reference import Media, Reply, Thinker, generate
from omni_edge.export.models.minicpmo45.vision import patch_strip, slice_image
from omni_edge.export.targets.onnx_target import cpu_session

MEDIA_TOKENS = 16
QUESTION = "What do you see and hear?"


def request(size: tuple[int, int]) -> list[Media]:
    from PIL import Image

    t = np.arange(32000) / 16000
    return [Media("image", Image.new("RGB", size, (255, 0, 0))),
            Media("audio", (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32))]


def exported_rows(thinker: Thinker, out: Path, media: list[Media]) -> np.ndarray:
    """The media's embeddings through the exported encoder graphs, in prompt order."""
    patch, rows = thinker.config.vision.patch, []
    for item in media:
        if item.kind == "image":
            sliced = slice_image(item.value, thinker.config.slices)
            for x, (h, w) in zip(sliced.slices, sliced.sizes, strict=True):
                graph = out / "vision-onnx" / f"slice_{slice_key(h // patch, w // patch)}.onnx"
                if not graph.is_file():
                    raise ValueError(f"no vision graph for a {h // patch}x{w // patch} slice ({graph.name})")
                rows.append(cpu_session(graph).run(None, {"pixel_strip": patch_strip(x, patch)[None]})[0][0])
        else:
            sessions = audio_sessions(out / "audio-onnx")
            rows.append(run_audio_pieces(sessions, log_mel_pieces(item.value, thinker.config.audio.mel_bins),
                                         thinker.config.audio.pool_step))
    return np.concatenate(rows).astype(np.float32)


def exported_generate(thinker: Thinker, plan: Path, out: Path, ids: list[int], media: list[Media], max_new_tokens: int,
                      threads: int = 0) -> list[int]:
    from omni_edge import _native

    slots = [i for i, t in enumerate(ids) if t == thinker.token("<unk>")]
    engine = _native.LlmEngine.open(str(plan), threads)
    logits = np.frombuffer(engine.feed(ids, exported_rows(thinker, out, media).tobytes(), slots), np.float32)
    got: list[int] = []
    for _ in range(max_new_tokens):
        got.append(int(np.argmax(logits)))
        logits = np.frombuffer(engine.feed([got[-1]]), np.float32)
    return got


def exported_forced(thinker: Thinker, plan: Path, out: Path, ids: list[int], media: list[Media], ref: Reply,
                    threads: int = 0) -> float:
    """The exported thinker (the engine on `plan`, the encoders' rows spliced in) fed the
    reference's reply token by token: the share of steps whose pick is the reference's, up to
    near ties of its logits (a quantized thinker's measure; a free run drifts at its first miss)."""
    from omni_edge import _native

    slots = [i for i, t in enumerate(ids) if t == thinker.token("<unk>")]
    engine = _native.LlmEngine.open(str(plan), threads)
    logits = np.frombuffer(engine.feed(ids, exported_rows(thinker, out, media).tobytes(), slots), np.float32)
    hits = 0
    for token, row in zip(ref.ids, ref.logits, strict=True):
        pick = int(np.argmax(logits))
        hits += pick == token or float(row.double().max() - row.double()[pick]) < FP32_TIE_GAP
        logits = np.frombuffer(engine.feed([token]), np.float32)
    return hits / max(len(ref.ids), 1)


def path_agreement(got: list[int], ids: list[int], logits: list[torch.Tensor]) -> float:
    """1.0 when the picks agree with the reference's `ids` up to near ties of its `logits` (and
    are as many); else the share of the reference before the first decided difference."""
    for i, (a, b) in enumerate(zip(got, ids, strict=False)):
        if a != b:
            row = logits[i].double()
            return 1.0 if float(row.max() - row[a]) < FP32_TIE_GAP else i / max(len(ids), 1)
    return 1.0 if len(got) >= len(ids) else len(got) / max(len(ids), 1)


def greedy_agreement(got: list[int], ref: Reply) -> float:
    return path_agreement(got, ref.ids, ref.logits)


def media_report(thinker: Thinker, plan: Path, out: Path, size: tuple[int, int], threads: int,
                 forced_limit: float | None = None) -> tuple[ReportCheck, ...]:
    """The roadmap's request through the exported graphs: greedy, held to the reference's ids;
    with `forced_limit` (a quantized thinker) teacher-forced along the reference, held to it."""
    media = request(size)
    with torch.no_grad():  # forced: as many tokens as the decoder's own greedy_agreement_64
        ids, ref = generate(thinker, media, QUESTION, MEDIA_TOKENS if forced_limit is None else 64, ignore_stop=True)
    if forced_limit is not None:
        return (ReportCheck("media_forced_agreement", exported_forced(thinker, plan, out, ids, media, ref, threads),
                            forced_limit, ">="),
                ReportCheck("media_prompt_tokens", float(len(ids)), 1.0, ">="))
    got = exported_generate(thinker, plan, out, ids, media, MEDIA_TOKENS, threads)
    return (ReportCheck("media_greedy_agreement", greedy_agreement(got, ref), 1.0, ">="),
            ReportCheck("media_prompt_tokens", float(len(ids)), 1.0, ">="))
