"""The Qwen2.5-Omni encoders as ONNX graphs: the vision encoder per image grid, the audio encoder
per chunk of mel frames, each checked against transformers' modules (summation order only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from omni_edge.export.comparison import sqnr_db
from omni_edge.export.models.qwen25_omni.graphs import AudioChunkGraph, VisionGraph, chunk_tokens
from omni_edge.export.models.qwen25_omni.reference import Thinker
from omni_edge.export.targets import onnx_target


def export_vision(cdir: Path, thinker: Thinker, grids: list[tuple[int, int, int]], progress: tqdm) -> dict[str, Any]:
    """One graph per grid; each checked against transformers on random patches of that grid."""
    visual, c = thinker.model.model.visual, thinker.config.vision_config
    width = c.in_channels * c.temporal_patch_size * c.patch_size ** 2
    graphs, sqnrs = {}, []
    for grid in grids:
        name = f"vision_{grid[0]}x{grid[1]}x{grid[2]}.onnx"
        progress.set_postfix_str(name)
        patches = torch.randn(grid[0] * grid[1] * grid[2], width, generator=torch.Generator().manual_seed(0))
        onnx_target.export_graph(VisionGraph(visual, grid).eval(), (patches,), ["pixel_values"], ["image_embeds"], cdir / name)
        with torch.no_grad():
            ref = thinker.model.model.get_image_features(patches, torch.tensor([grid])).pooler_output
        ref = torch.cat(list(ref)) if isinstance(ref, (list, tuple)) else ref
        got = onnx_target.cpu_session(cdir / name).run(None, {"pixel_values": patches.numpy()})[0]
        sqnrs.append(sqnr_db(ref.numpy(), got))
        graphs["x".join(map(str, grid))] = name
        progress.update()
    onnx_target.share_weights(cdir, list(graphs.values()))
    return {"graphs": graphs, "sqnr_db": min(sqnrs)}


def run_audio_chunks(session: Any, features: np.ndarray, chunk_frames: int) -> np.ndarray:
    """An audio's tokens from its mel features [mel, frames]: the chunk graph per chunk, zero-padded
    past the last chunk's frames, keeping the tokens each chunk holds."""
    frames = features.shape[1]
    out = []
    for start in range(0, frames, chunk_frames):
        n = min(chunk_frames, frames - start)
        chunk = np.zeros((1, features.shape[0], chunk_frames), np.float32)
        chunk[0, :, :n] = features[:, start:start + n]
        tokens = session.run(None, {"features": chunk, "length": np.array([n], np.int64)})[0]
        out.append(tokens[0, :chunk_tokens(n)])
    return np.concatenate(out)


def export_audio(cdir: Path, thinker: Thinker, progress: tqdm) -> dict[str, Any]:
    """The chunk graph, checked against transformers on 2.6 chunks of random features (a tail)."""
    tower = thinker.model.model.audio_tower
    if tower.n_window % 2:
        raise ValueError(f"audio n_window {tower.n_window} is odd: a chunk's tokens would straddle two chunks")
    graph = AudioChunkGraph(tower).eval()
    name = "audio_chunk.onnx"
    progress.set_postfix_str(name)
    mel = tower.num_mel_bins
    example = (torch.zeros(1, mel, graph.frames), torch.tensor([graph.frames]))
    onnx_target.export_graph(graph, example, ["features", "length"], ["audio_embeds"], cdir / name)
    frames = int(2.6 * graph.frames)
    features = torch.randn(1, mel, frames, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = thinker.model.model.get_audio_features(features, torch.ones(1, frames, dtype=torch.long)).last_hidden_state
    got = run_audio_chunks(onnx_target.cpu_session(cdir / name), features[0].numpy(), graph.frames)
    progress.update()
    onnx_target.share_weights(cdir, [name])
    return {"graphs": {"chunk": name}, "chunk_frames": graph.frames, "sqnr_db": sqnr_db(ref.numpy(), got),
            "frames_checked": frames}
