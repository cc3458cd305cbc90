"""MiniCPM-o 4.5's encoders as ONNX graphs: a vision graph per slice size, the audio piece graph;
each checked against the reference modules (summation order only), the audio one on a piece
shorter than the graph (its padding path) and a full one."""

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


def run_audio_pieces(session: Any, pieces: list[np.ndarray], frames: int, pool: int) -> np.ndarray:
    """An audio's embeddings from its pieces' features (each [mel, n], n <= frames)."""
    out = []
    for mel in pieces:
        n = mel.shape[1]
        padded = np.zeros((1, mel.shape[0], frames), np.float32)
        padded[0, :, :n] = mel
        got = session.run(None, {"features": padded, "length": np.array([n], np.int64)})[0]
        out.append(got[0, :audio_tokens(n, pool)])
    return np.concatenate(out)


def export_audio(cdir: Path, thinker: Thinker, progress: tqdm) -> dict[str, Any]:
    """The piece graph, checked on a full piece and a 7.3 s one (random features)."""
    graph = AudioPieceGraph(thinker.apm, thinker.audio_projection_layer).eval()
    name = "audio_piece.onnx"
    progress.set_postfix_str(name)
    mel = thinker.config.audio.mel_bins
    example = (torch.zeros(1, mel, graph.frames), torch.tensor([graph.frames]))
    onnx_target.export_graph(graph, example, ["features", "length"], ["audio_embeds"], cdir / name)
    session = onnx_target.cpu_session(cdir / name)
    sqnrs = []
    for frames in (graph.frames, 733):
        features = torch.randn(1, mel, frames, generator=torch.Generator().manual_seed(frames))
        with torch.no_grad():
            ref = PieceEncoder(thinker.apm, thinker.audio_projection_layer, frames)(features)[0]
        got = run_audio_pieces(session, [features[0].numpy()], graph.frames, graph.pool)
        sqnrs.append(sqnr_db(ref.numpy(), got))
    progress.update()
    onnx_target.share_weights(cdir, [name])
    return {"graphs": {"piece": name}, "piece_frames": graph.frames, "pool_step": graph.pool, "sqnr_db": min(sqnrs)}
