"""MiniCPM-o 4.5's encoders as static-shape graphs, built from the reference modules.

Vision, one graph per slice size (rows x cols of 14-pixel patches): the slice's patch strip
[1, 3, 14, rows*cols*14] -> its query_num embeddings [1, query_num, hidden]. The learned
position rows and the resampler's 2-D sin-cos codes depend only on the size: constants.

Audio, one graph per piece of up to `frames` mel frames (30 s: the reference's piece): features
[1, mel, frames] and the piece's valid frame count -> [1, tokens(frames), hidden]. A shorter
piece runs the same graph: the first convolution's output past its frames is zeroed (what the
second convolution's zero padding sees on the unpadded piece) and those encoder frames are
masked out as keys, on top of the block-causal mask; the runtime keeps the piece's own
`audio_tokens(n)` rows."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from omni_edge.export.models.minicpmo45.audio import AudioEncoder, Projector, audio_tokens, block_causal_mask, encoder_frames
from omni_edge.export.models.minicpmo45.vision import Resampler, SliceEncoder, VisionTower

MASK_VALUE = -10000.0  # finite (fp16 holds it); exp underflows to exactly 0 in float32
PIECE_FRAMES = 3000    # 30 s of mel frames


class SliceGraph(nn.Module):
    def __init__(self, tower: VisionTower, resampler: Resampler, rows: int, cols: int) -> None:
        super().__init__()
        self.encoder = SliceEncoder(tower, resampler, rows, cols)

    def forward(self, strip: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.encoder(strip)
        return out


class AudioPieceGraph(nn.Module):
    mask: torch.Tensor

    def __init__(self, encoder: AudioEncoder, projector: Projector, frames: int = PIECE_FRAMES) -> None:
        super().__init__()
        self.encoder, self.projector, self.frames = encoder, projector, frames
        c = encoder.config
        self.pool, self.tokens = c.pool_step, audio_tokens(frames, c.pool_step)
        mask = block_causal_mask(encoder_frames(frames), c.chunk_frames)
        self.register_buffer("mask", torch.where(torch.isinf(mask), MASK_VALUE, mask), persistent=False)

    def forward(self, features: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
        e = self.encoder
        x = F.gelu(e.conv1(features))
        x = x * (torch.arange(self.frames) < length).to(x.dtype)  # the piece's own frames only
        x = F.gelu(e.conv2(x)).transpose(1, 2)
        x = x + e.embed_positions.weight[: x.shape[1]]
        valid = torch.arange(x.shape[1]) < (length - 1) // 2 + 1
        mask = self.mask + torch.where(valid, 0.0, MASK_VALUE)[None, :]
        for layer in e.layers:
            x = layer(x, mask)
        x = self.projector(e.layer_norm(x))
        out: torch.Tensor = F.avg_pool1d(x.transpose(1, 2), self.pool, self.pool).transpose(1, 2)
        return out
