"""MiniCPM-o 4.5's image path, as vLLM-Omni 0.30.0 runs it (minicpmo_4_5_omni_llm.py):
slicing (`MiniCPMVImageProcessor`), a SigLIP tower over variable-sized slices (position ids by
bucketing each patch's fractional coordinate onto the learned 70x70 table) and a one-layer
perceiver resampler (64 queries; 2-D sin-cos positions added to the keys).

An image becomes a source slice (the whole image resized to about scale_resolution^2) and, when
its area is more than that, a grid of cols x rows slices cut from a second resize; each slice is
query_num embeddings. Slices are encoded one at a time (vLLM-Omni pads them into one batch and
masks the padding: the same result up to summation order)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from omni_edge.export.models.minicpmo45.config import SliceConfig, VisionConfig

MEAN = STD = 0.5  # the release's norm_mean / norm_std, every channel


# ---- slicing ------------------------------------------------------------------------------

def _divisible(length: float, unit: int) -> int:
    return max(round(length / unit) * unit, unit)  # Python's round: halves to even, as the reference


def best_resize(size: tuple[float, float], scale: int, patch: int, upscale: bool = False) -> tuple[int, int]:
    """(width, height) of about scale^2 pixels with the image's aspect ratio, in whole patches;
    a smaller image keeps its size unless `upscale`."""
    width, height = size
    if width * height > scale * scale or upscale:
        ratio = width / height
        height = int(scale / math.sqrt(ratio))
        width = int(height * ratio)
    return _divisible(width, patch), _divisible(height, patch)


def slice_grid(width: int, height: int, s: SliceConfig) -> tuple[int, int] | None:
    """(cols, rows) of the slices, or None when the image is one slice: among the grids of n-1,
    n and n+1 slices (n the image's area in units of scale^2, at most max_slices), the one whose
    aspect ratio is nearest the image's in log terms, the first on a tie."""
    multiple = min(math.ceil(width * height / (s.scale_resolution ** 2)), s.max_slices)
    if multiple <= 1:
        return None
    best, error = (1, 1), float("inf")
    log_ratio = math.log(width / height)
    for n in (multiple - 1, multiple, multiple + 1):
        if n == 1 or n > s.max_slices:
            continue
        for m in range(1, n + 1):
            if n % m == 0 and abs(log_ratio - math.log(m / (n // m))) < error:
                best, error = (m, n // m), abs(log_ratio - math.log(m / (n // m)))
    return best


@dataclass
class SlicedImage:
    slices: list[np.ndarray]  # each [3, H, W] float32, normalized
    grid: tuple[int, int] | None

    @property
    def sizes(self) -> list[tuple[int, int]]:
        """Each slice's (rows, cols) of patches: its tgt_size."""
        return [(x.shape[1], x.shape[2]) for x in self.slices]


def slice_image(image: Any, s: SliceConfig) -> SlicedImage:
    """A PIL image's slices, normalized to [-1, 1], patch-sized: the source (the whole image; only
    shrunk when sliced, else resized to about scale^2) first, then the grid row by row."""
    from PIL import Image

    image = image.convert("RGB")
    width, height = image.size
    grid = slice_grid(width, height, s)
    bicubic = Image.Resampling.BICUBIC
    pictures = [image.resize(best_resize((width, height), s.scale_resolution, s.patch, upscale=grid is None), bicubic)]
    if grid is not None:
        cols, rows = grid
        cell = best_resize((_divisible(width, cols) / cols, _divisible(height, rows) / rows), s.scale_resolution,
                           s.patch, upscale=True)
        refined = image.resize((cell[0] * cols, cell[1] * rows), bicubic)
        pictures += [refined.crop((c * cell[0], r * cell[1], (c + 1) * cell[0], (r + 1) * cell[1]))
                     for r in range(rows) for c in range(cols)]
    slices = [((np.asarray(p, np.float32) / 255 - MEAN) / STD).transpose(2, 0, 1) for p in pictures]
    return SlicedImage([np.ascontiguousarray(x, np.float32) for x in slices], grid)


def image_placeholder(grid: tuple[int, int] | None, s: SliceConfig, index: int) -> str:
    """The text an image stands for in the prompt (`grid`: its slice_grid): its id, the source
    slice, then the grid's rows (one line each), every slice query_num `<unk>`s between its markers."""
    unk = "<unk>" * s.query_num
    text = (f"<image_id>{index}</image_id>" if s.use_image_id else "") + f"<image>{unk}</image>"
    if grid is not None:
        cols, rows = grid
        text += "\n".join(f"<slice>{unk}</slice>" * cols for _ in range(rows))
    return text


def patch_strip(x: np.ndarray, patch: int) -> np.ndarray:
    """A [3, H, W] slice as the tower reads it: its patches in a row, [3, patch, (H/p)*(W/p)*p]
    (the reference's reshape_by_patch)."""
    c, h, w = x.shape
    hp, wp = h // patch, w // patch
    return np.ascontiguousarray(x.reshape(c, hp, patch, wp, patch).transpose(0, 2, 1, 3, 4).reshape(c, patch, hp * wp * patch))


def position_ids(rows: int, cols: int, per_side: int) -> torch.Tensor:
    """Each patch's row of the learned position table: its fractional coordinate bucketed onto a
    per_side grid, in float32 exactly as the reference (not floor(k * per_side / rows), which
    differs for some sizes)."""
    boundaries = torch.arange(1 / per_side, 1.0, 1 / per_side)
    h = torch.bucketize(torch.arange(0, 1 - 1e-6, 1 / rows), boundaries, right=True)
    w = torch.bucketize(torch.arange(0, 1 - 1e-6, 1 / cols), boundaries, right=True)
    return (h[:, None] * per_side + w).flatten()


def sincos_2d(dim: int, rows: int, cols: int) -> torch.Tensor:
    """The resampler's key positions [rows*cols, dim]: the column's sin-cos code, then the row's
    (numpy float32, as the reference computes them)."""
    omega = np.arange(dim // 4, dtype=np.float32)
    omega /= dim / 4.0
    omega = 1.0 / 10000 ** omega
    x, y = np.meshgrid(np.arange(cols, dtype=np.float32), np.arange(rows, dtype=np.float32))

    def code(pos: np.ndarray) -> np.ndarray:
        out = np.einsum("hw,d->hwd", pos, omega)
        return np.concatenate([np.sin(out), np.cos(out)], axis=-1)

    return torch.from_numpy(np.concatenate([code(x), code(y)], axis=-1).reshape(rows * cols, dim)).float()


# ---- the tower and the resampler ------------------------------------------------------------

class _Attention(nn.Module):
    def __init__(self, dim: int, heads: int, k_bias: bool = True) -> None:
        super().__init__()
        self.heads = heads
        self.q_proj, self.v_proj, self.out_proj = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim, bias=k_bias)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        b, n, d = x.shape
        hd = d // self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, n, self.heads, hd).transpose(1, 2)

        q, k, v = split(self.q_proj(x) * hd ** -0.5), split(self.k_proj(x)), split(self.v_proj(x))
        scores = q @ k.transpose(-1, -2)
        if mask is not None:
            scores = scores + mask
        out = torch.softmax(scores, dim=-1) @ v
        result: torch.Tensor = self.out_proj(out.transpose(1, 2).reshape(b, n, d))
        return result


class _Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.fc2(F.gelu(self.fc1(x), approximate="tanh"))
        return out


class _SiglipLayer(nn.Module):
    def __init__(self, c: VisionConfig) -> None:
        super().__init__()
        self.self_attn = _Attention(c.hidden, c.heads)
        self.layer_norm1, self.layer_norm2 = nn.LayerNorm(c.hidden, eps=c.eps), nn.LayerNorm(c.hidden, eps=c.eps)
        self.mlp = _Mlp(c.hidden, c.intermediate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.layer_norm1(x))
        out: torch.Tensor = x + self.mlp(self.layer_norm2(x))
        return out


class _Embeddings(nn.Module):
    def __init__(self, c: VisionConfig) -> None:
        super().__init__()
        self.patch_embedding = nn.Conv2d(3, c.hidden, c.patch, stride=c.patch)
        self.position_embedding = nn.Embedding(c.positions_per_side ** 2, c.hidden)


class _Encoder(nn.Module):
    def __init__(self, c: VisionConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(_SiglipLayer(c) for _ in range(c.layers))


class VisionTower(nn.Module):
    """SigLIP over one slice's patch strip [1, 3, patch, L*patch] -> [1, L, hidden] (names as the
    release's `vpm.*`)."""

    def __init__(self, c: VisionConfig) -> None:
        super().__init__()
        self.config = c
        self.embeddings = _Embeddings(c)
        self.encoder = _Encoder(c)
        self.post_layernorm = nn.LayerNorm(c.hidden, eps=c.eps)

    def forward(self, strip: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        x = self.embeddings.patch_embedding(strip).flatten(2).transpose(1, 2)
        x = x + self.embeddings.position_embedding(positions)
        for layer in self.encoder.layers:
            x = layer(x)
        out: torch.Tensor = self.post_layernorm(x)
        return out


class _PackedAttention(nn.Module):
    """torch.nn.MultiheadAttention's parameters (in_proj packed q|k|v), queries apart from keys."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * dim, dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * dim))
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        wq, wk, wv = self.in_proj_weight.chunk(3)
        bq, bk, bv = self.in_proj_bias.chunk(3)
        d = q.shape[-1]
        hd = d // self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(t.shape[0], t.shape[1], self.heads, hd).transpose(1, 2)

        qh, kh, vh = split(F.linear(q, wq, bq) * hd ** -0.5), split(F.linear(k, wk, bk)), split(F.linear(v, wv, bv))
        out = torch.softmax(qh @ kh.transpose(-1, -2), dim=-1) @ vh
        result: torch.Tensor = self.out_proj(out.transpose(1, 2).reshape(q.shape[0], q.shape[1], d))
        return result


class Resampler(nn.Module):
    """query_num learned queries attend once over a slice's tower output [1, L, vision] with the
    keys' 2-D positions -> [1, query_num, hidden] (names as the release's `resampler.*`)."""

    def __init__(self, queries: int, hidden: int, vision_hidden: int) -> None:
        super().__init__()
        self.query = nn.Parameter(torch.zeros(queries, hidden))
        self.kv_proj = nn.Linear(vision_hidden, hidden, bias=False)
        self.attn = _PackedAttention(hidden, hidden // 128)
        self.ln_q, self.ln_kv, self.ln_post = (nn.LayerNorm(hidden, eps=1e-6) for _ in range(3))
        self.proj = nn.Parameter(torch.empty(hidden, hidden))

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        kv = self.ln_kv(self.kv_proj(x))
        q = self.ln_q(self.query).unsqueeze(0).expand(x.shape[0], -1, -1)
        attended = self.attn(q, kv + positions, kv)
        out: torch.Tensor = self.ln_post(attended) @ self.proj
        return out


class SliceEncoder(nn.Module):
    """One slice of rows x cols patches -> its query_num embeddings: the tower, then the
    resampler, the slice's position tables fixed (what one exported graph computes)."""

    def __init__(self, tower: VisionTower, resampler: Resampler, rows: int, cols: int) -> None:
        super().__init__()
        self.tower, self.resampler = tower, resampler
        self.register_buffer("positions", position_ids(rows, cols, tower.config.positions_per_side), persistent=False)
        self.register_buffer("key_positions", sincos_2d(resampler.query.shape[1], rows, cols), persistent=False)

    def forward(self, strip: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.resampler(self.tower(strip, self.positions), self.key_positions)
        return out
