"""MiniCPM-o 4.5's encoders as ExecuTorch programs (XNNPACK), for `export llm --format pte|both`:

    vision-pte/  model.pte, a method per slice size (`slice_<rows>x<cols>`)
    audio-pte/   model.pte, a method per piece bucket (`audio_piece_<frames>`)

the same graphs as the ONNX route's (graphs.py), each method checked against the reference
modules on the same inputs; and the media check through the native session on a plan: the
roadmap's request (the red square and the tone) greedy against the PyTorch reference."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from omni_edge.contracts import ReportCheck
from omni_edge.export.comparison import sqnr_db
from omni_edge.export.models.minicpmo45.audio import PieceEncoder
from omni_edge.export.models.minicpmo45.graphs import AudioPieceGraph, SliceGraph
from omni_edge.export.models.minicpmo45.onnx import PIECE_BUCKETS, run_audio_pieces, slice_key
from omni_edge.export.models.minicpmo45.reference import Thinker, generate
from omni_edge.export.models.minicpmo45.validation import MEDIA_TOKENS, QUESTION, greedy_agreement, request
from omni_edge.export.models.minicpmo45.vision import SliceEncoder
from omni_edge.export.targets import executorch_target


def export_vision_pte(cdir: Path, thinker: Thinker, sizes: list[tuple[int, int]], progress: tqdm) -> dict[str, Any]:
    patch = thinker.config.vision.patch
    strips = {(r, c): torch.randn(1, 3, patch, r * c * patch, generator=torch.Generator().manual_seed(r * 1000 + c))
              for r, c in sizes}
    methods: dict[str, tuple[torch.nn.Module, tuple[torch.Tensor, ...]]] = {
        f"slice_{slice_key(r, c)}": (SliceGraph(thinker.vpm, thinker.resampler, r, c).eval(), (strips[(r, c)],))
        for r, c in sizes}
    executorch_target.export_program(methods, cdir / "model.pte", progress)
    sqnrs = []
    for (r, c), strip in strips.items():
        with torch.no_grad():
            ref = SliceEncoder(thinker.vpm, thinker.resampler, r, c)(strip)
        got = executorch_target.MethodSession(cdir / "model.pte", f"slice_{slice_key(r, c)}").run(
            None, {"pixel_strip": strip.numpy()})[0]
        sqnrs.append(sqnr_db(ref.numpy(), got))
    graphs = {slice_key(r, c): {"file": "model.pte", "method": f"slice_{slice_key(r, c)}"} for r, c in sizes}
    return {"graphs": graphs, "sqnr_db": min(sqnrs)}


def export_audio_pte(cdir: Path, thinker: Thinker, progress: tqdm) -> dict[str, Any]:
    mel, pool = thinker.config.audio.mel_bins, thinker.config.audio.pool_step
    methods: dict[str, tuple[torch.nn.Module, tuple[torch.Tensor, ...]]] = {
        f"audio_piece_{frames}": (AudioPieceGraph(thinker.apm, thinker.audio_projection_layer, frames).eval(),
                                  (torch.zeros(1, mel, frames), torch.tensor([frames])))
        for frames in PIECE_BUCKETS}
    executorch_target.export_program(methods, cdir / "model.pte", progress)
    sessions = {frames: executorch_target.MethodSession(cdir / "model.pte", f"audio_piece_{frames}") for frames in PIECE_BUCKETS}
    sqnrs = []
    for frames in (733, 2177, PIECE_BUCKETS[-1]):
        features = torch.randn(1, mel, frames, generator=torch.Generator().manual_seed(frames))
        with torch.no_grad():
            ref = PieceEncoder(thinker.apm, thinker.audio_projection_layer, frames)(features)[0]
        sqnrs.append(sqnr_db(ref.numpy(), run_audio_pieces(sessions, [features[0].numpy()], pool)))
    graphs = {str(frames): {"file": "model.pte", "method": f"audio_piece_{frames}"} for frames in PIECE_BUCKETS}
    return {"graphs": graphs, "piece_frames": PIECE_BUCKETS[-1], "pool_step": pool, "sqnr_db": min(sqnrs)}


def session_media_report(thinker: Thinker, plan: Path, size: tuple[int, int], threads: int) -> tuple[ReportCheck, ...]:
    """The roadmap's request through the native session on `plan` (its encoders, whichever runtime
    runs them), greedy, against the reference; its components need not qualify yet."""
    from PIL import Image

    from omni_edge.runtime import Session
    from omni_edge.runtime.media import wav_bytes

    media = request(size)
    with torch.no_grad():
        ids, ref = generate(thinker, media, QUESTION, MEDIA_TOKENS, ignore_stop=True)
    got: list[int] = []

    def collect(event: dict[str, Any]) -> bool:
        got.extend(event.get("token_ids", []))
        return True

    with tempfile.TemporaryDirectory() as tmp:
        image, audio = Path(tmp) / "image.png", Path(tmp) / "audio.wav"
        assert isinstance(media[0].value, Image.Image)
        media[0].value.save(image)
        audio.write_bytes(wav_bytes(np.asarray(media[1].value, np.float32), 16000))
        Session.open(plan, allow_unqualified=True, threads=threads).run(
            QUESTION, chat=True, media=[("image", str(image)), ("audio", str(audio))], max_new_tokens=MEDIA_TOKENS,
            ignore_stop_tokens=True, on_event=collect)
    return (ReportCheck("media_greedy_agreement", greedy_agreement(got, ref), 1.0, ">="),
            ReportCheck("media_prompt_tokens", float(len(ids)), 1.0, ">="))
