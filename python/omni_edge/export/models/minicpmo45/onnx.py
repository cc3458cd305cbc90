"""MiniCPM-o 4.5's encoders as ONNX graphs: a vision graph per slice size, an audio piece graph per
bucket of mel frames; each checked against the reference modules (summation order only), the
audio ones on pieces shorter than the graph (its padding path) and a full one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from omni_edge.export.comparison import sqnr_db
from omni_edge.export.models.minicpmo45.audio import PieceEncoder, audio_tokens
from omni_edge.export.models.minicpmo45.graphs import AudioPieceGraph, SliceGraph
from omni_edge.export.models.minicpmo45.reference import Thinker
from omni_edge.export.models.minicpmo45.vision import SliceEncoder
from omni_edge.export.targets import onnx_target


def slice_key(rows: int, cols: int) -> str:
    return f"{rows}x{cols}"


def export_vision(cdir: Path, thinker: Thinker, sizes: list[tuple[int, int]], progress: tqdm) -> dict[str, Any]:
    """One graph per slice size (rows, cols), each checked on a random strip of that size."""
    patch = thinker.config.vision.patch
    graphs, sqnrs = {}, []
    for rows, cols in sizes:
        name = f"slice_{slice_key(rows, cols)}.onnx"
        progress.set_postfix_str(name)
        strip = torch.randn(1, 3, patch, rows * cols * patch, generator=torch.Generator().manual_seed(rows * 1000 + cols))
        onnx_target.export_graph(SliceGraph(thinker.vpm, thinker.resampler, rows, cols).eval(), (strip,), ["pixel_strip"],
                                 ["image_embeds"], cdir / name)
        with torch.no_grad():
            ref = SliceEncoder(thinker.vpm, thinker.resampler, rows, cols)(strip)
        got = onnx_target.cpu_session(cdir / name).run(None, {"pixel_strip": strip.numpy()})[0]
        sqnrs.append(sqnr_db(ref.numpy(), got))
        graphs[slice_key(rows, cols)] = name
        progress.update()
    onnx_target.share_weights(cdir, list(graphs.values()))
    return {"graphs": graphs, "sqnr_db": min(sqnrs)}


PIECE_BUCKETS = (1000, 3000)  # mel frames: 10 s and 30 s (the reference's piece); a piece runs the smallest that holds it


def bucket_of(frames: int, buckets: list[int]) -> int:
    fits = [b for b in sorted(buckets) if b >= frames]
    if not fits:
        raise ValueError(f"an audio piece of {frames} mel frames exceeds the largest graph ({max(buckets)})")
    return fits[0]


def run_audio_pieces(sessions: dict[int, Any], pieces: list[np.ndarray], pool: int) -> np.ndarray:
    """An audio's embeddings from its pieces' features (each [mel, n]), each piece through the
    smallest bucket's graph (frames -> session) that holds it."""
    out = []
    for mel in pieces:
        n = mel.shape[1]
        frames = bucket_of(n, list(sessions))
        padded = np.zeros((1, mel.shape[0], frames), np.float32)
        padded[0, :, :n] = mel
        got = sessions[frames].run(None, {"features": padded, "length": np.array([n], np.int64)})[0]
        out.append(got[0, :audio_tokens(n, pool)])
    return np.concatenate(out)


def audio_sessions(cdir: Path) -> dict[int, Any]:
    """The piece graphs an audio component holds (audio_piece_<frames>.onnx), by frames."""
    return {int(path.stem.rsplit("_", 1)[1]): onnx_target.cpu_session(path) for path in cdir.glob("audio_piece_*.onnx")}


def export_audio(cdir: Path, thinker: Thinker, progress: tqdm) -> dict[str, Any]:
    """A piece graph per bucket, each checked on a piece shorter than it (its padding path) and
    the largest also on a full one (random features)."""
    mel = thinker.config.audio.mel_bins
    graphs: dict[str, str] = {}
    for frames in PIECE_BUCKETS:
        graph = AudioPieceGraph(thinker.apm, thinker.audio_projection_layer, frames).eval()
        name = f"audio_piece_{frames}.onnx"
        progress.set_postfix_str(name)
        example = (torch.zeros(1, mel, frames), torch.tensor([frames]))
        onnx_target.export_graph(graph, example, ["features", "length"], ["audio_embeds"], cdir / name)
        graphs[str(frames)] = name
        progress.update()
    sessions = audio_sessions(cdir)
    pool = thinker.config.audio.pool_step
    sqnrs = []
    for frames in (733, 2177, PIECE_BUCKETS[-1]):
        features = torch.randn(1, mel, frames, generator=torch.Generator().manual_seed(frames))
        with torch.no_grad():
            ref = PieceEncoder(thinker.apm, thinker.audio_projection_layer, frames)(features)[0]
        got = run_audio_pieces(sessions, [features[0].numpy()], pool)
        sqnrs.append(sqnr_db(ref.numpy(), got))
    onnx_target.share_weights(cdir, list(graphs.values()))
    return {"graphs": graphs, "piece_frames": PIECE_BUCKETS[-1], "pool_step": pool, "sqnr_db": min(sqnrs)}
