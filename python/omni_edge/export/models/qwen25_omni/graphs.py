"""The Qwen2.5-Omni thinker's encoders as static-shape graphs, built from the transformers modules'
weights (the decoder reuses `qwen3.BodyGraph` with M-RoPE positions as inputs).

Vision, one graph per image grid (t, h, w in 14-pixel patches): the patches in the image
processor's order -> the image's tokens after the 2x2 merge, in the thinker's order. The
window permutation, the windows (of `window_size` pixels) and the 2-D rotary tables depend
only on the grid, so they are constants of the graph. Windowed blocks attend within each window
as one batch of windows (gathered, the shorter ones padded and masked), so their cost grows
with the patches times the window, not the patches squared; full-attention blocks attend over
the whole image, unmasked.

Audio, one graph per chunk of 2 x n_window mel frames (the chunks transformers cuts an audio
into: positions restart and attention stays inside each): features [1, mel, 2 n_window] and the
chunk's valid frame count -> its tokens [1, n_window / 2, hidden]. The last, shorter chunk runs
the same graph: frames past its length are zeroed after the first convolution and masked out
of attention, which is what transformers computes on the unpadded chunk; the runtime keeps
its first `chunk_tokens(length)` tokens.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
from torch import nn

MASK_VALUE = -10000.0  # finite: exp underflows to exactly 0 in float32, and fp16 can hold it


def _windows(bounds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Windows of contiguous positions (transformers' cu_window_seqlens) as a padded batch: the
    positions each window gathers [n, W] (padding repeats its first), an additive mask on the
    padded keys [n, 1, 1, W], and where each position's row sits in the flattened batch [S]."""
    spans = [(a, b) for a, b in itertools.pairwise(int(x) for x in bounds) if b > a]
    width = max(b - a for a, b in spans)
    gather = torch.zeros(len(spans), width, dtype=torch.int64)
    mask = torch.zeros(len(spans), 1, 1, width)
    unpad = torch.zeros(spans[-1][1], dtype=torch.int64)
    for w, (a, b) in enumerate(spans):
        gather[w] = torch.tensor([a + min(i, b - a - 1) if i < b - a else a for i in range(width)])
        mask[w, ..., b - a:] = MASK_VALUE
        unpad[a:b] = w * width + torch.arange(b - a)
    return gather, mask, unpad


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class VisionGraph(nn.Module):
    """pixel patches [S, C * T * P * P] of one image with grid (t, h, w), S = t h w -> its
    tokens [S / merge^2, out_hidden]."""

    cos: torch.Tensor
    sin: torch.Tensor
    window_index: torch.Tensor
    reverse_index: torch.Tensor
    window_gather: torch.Tensor
    window_mask: torch.Tensor
    window_unpad: torch.Tensor

    def __init__(self, visual: Any, grid: tuple[int, int, int]) -> None:
        from transformers.vision_utils import get_vision_attention_seqlens, get_vision_position_ids, get_vision_window_index

        super().__init__()
        config = visual.config
        self.visual = visual
        self.merge_unit = config.spatial_merge_size ** 2
        self.heads = config.num_heads
        self.full_blocks = set(config.fullatt_block_indexes)
        grid_thw = torch.tensor([grid])
        seq = grid[0] * grid[1] * grid[2]
        with torch.no_grad():
            positions = get_vision_position_ids(grid_thw, config.spatial_merge_size)
            cu_seqlens, _ = get_vision_attention_seqlens(grid_thw, config)
            window_index, cu_window = get_vision_window_index(grid_thw, spatial_merge_size=config.spatial_merge_size,
                                                              window_size=config.window_size,
                                                              patch_size=config.patch_size)
            cos, sin = visual.rotary_pos_emb(torch.zeros(1), positions)
        self.register_buffer("window_index", window_index.to(torch.int64), persistent=False)
        self.register_buffer("reverse_index", torch.argsort(window_index).to(torch.int64), persistent=False)
        self.register_buffer("cos", self._permute(cos.float(), seq), persistent=False)
        self.register_buffer("sin", self._permute(sin.float(), seq), persistent=False)
        if len(cu_seqlens) != 2:
            raise ValueError(f"grid {grid}: one image is one attention segment, got {len(cu_seqlens) - 1}")
        gather, mask, unpad = _windows(cu_window)
        self.register_buffer("window_gather", gather, persistent=False)
        self.register_buffer("window_mask", mask, persistent=False)
        self.register_buffer("window_unpad", unpad, persistent=False)
        embed = visual.patch_embed.proj  # a Conv3d whose kernel is the patch: a matrix product
        self.patch = nn.Linear(embed.weight[0].numel(), embed.weight.shape[0], bias=False)
        self.patch.weight = nn.Parameter(embed.weight.detach().reshape(embed.weight.shape[0], -1).clone(),
                                         requires_grad=False)

    def _permute(self, x: torch.Tensor, seq: int) -> torch.Tensor:
        """Rows in the window order (groups of merge_unit patches moved together)."""
        return x.reshape(seq // self.merge_unit, self.merge_unit, -1)[self.window_index].reshape(seq, -1)

    def _attention(self, block: Any, x: torch.Tensor, windowed: bool) -> torch.Tensor:
        att, seq = block.attn, x.shape[0]
        q = att.q(x).reshape(seq, self.heads, -1)
        k = att.k(x).reshape(seq, self.heads, -1)
        v = att.v(x).reshape(seq, self.heads, -1)
        cos, sin = self.cos[:, None], self.sin[:, None]
        q = (q * cos + _rotate_half(q) * sin) * att.scaling
        k = k * cos + _rotate_half(k) * sin
        if windowed:  # [n, W, H, D] -> [n, H, W, D]: every window a batch of its own
            q, k, v = (t[self.window_gather].permute(0, 2, 1, 3) for t in (q, k, v))
            probs = torch.softmax(q @ k.transpose(-1, -2) + self.window_mask, dim=-1)
            rows = (probs @ v).permute(0, 2, 1, 3).reshape(-1, q.shape[1] * q.shape[3])[self.window_unpad]
        else:  # the whole image: [H, S, D]
            q, k, v = (t.transpose(0, 1) for t in (q, k, v))
            probs = torch.softmax(torch.bmm(q, k.transpose(1, 2)), dim=-1)
            rows = torch.bmm(probs, v).transpose(0, 1).reshape(seq, -1)
        out: torch.Tensor = att.proj(rows)
        return out

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        seq = pixel_values.shape[0]
        x = self._permute(self.patch(pixel_values), seq)
        for i, block in enumerate(self.visual.blocks):
            x = x + self._attention(block, block.norm1(x), windowed=i not in self.full_blocks)
            x = x + block.mlp(block.norm2(x))
        merged: torch.Tensor = self.visual.merger(x)
        return merged[self.reverse_index]


def chunk_tokens(frames: int) -> int:
    """Tokens of a chunk of `frames` mel frames: a stride-2 convolution, then pairs averaged."""
    return ((frames - 1) // 2 + 1) // 2


class AudioChunkGraph(nn.Module):
    """features [1, mel, 2 n_window] + valid frames [1] int64 -> tokens [1, n_window / 2, hidden]."""

    frame_index: torch.Tensor
    step_index: torch.Tensor
    positions: torch.Tensor

    def __init__(self, tower: Any) -> None:
        super().__init__()
        self.tower = tower
        self.frames = 2 * tower.n_window
        steps = (self.frames - 1) // 2 + 1
        self.heads = tower.config.encoder_attention_heads
        self.register_buffer("frame_index", torch.arange(self.frames)[None, None], persistent=False)
        self.register_buffer("step_index", torch.arange(steps)[None, None], persistent=False)
        self.register_buffer("positions", tower.positional_embedding.positional_embedding[:steps].clone(),
                             persistent=False)

    def _attention(self, att: Any, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        seq = x.shape[0]
        q = (att.q_proj(x) * att.scaling).reshape(seq, self.heads, -1).transpose(0, 1)
        k = att.k_proj(x).reshape(seq, self.heads, -1).transpose(0, 1)
        v = att.v_proj(x).reshape(seq, self.heads, -1).transpose(0, 1)
        probs = torch.softmax(torch.bmm(q, k.transpose(1, 2)) + bias, dim=-1)
        out: torch.Tensor = att.out_proj(torch.bmm(probs, v).transpose(0, 1).reshape(seq, -1))
        return out

    def forward(self, features: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
        t = self.tower
        valid = (self.frame_index < length).to(features.dtype)                     # [1, 1, F]
        x = nn.functional.gelu(t.conv1(features)) * valid
        x = nn.functional.gelu(t.conv2(x)).transpose(1, 2)[0] + self.positions     # [steps, width]
        steps_valid = (length - 1) // 2 + 1
        bias = (self.step_index >= steps_valid).to(x.dtype)[0] * MASK_VALUE          # [1, steps]
        for layer in t.layers:
            x = x + self._attention(layer.self_attn, layer.self_attn_layer_norm(x), bias)
            x = x + layer.fc2(layer.activation_fn(layer.fc1(layer.final_layer_norm(x))))
        pooled = x.reshape(-1, 2, x.shape[-1]).mean(1)                              # pairs averaged
        out: torch.Tensor = t.proj(t.ln_post(pooled))[None]
        return out


class ThinkerParts:
    """The thinker's decoder under the names `qwen3`'s graphs read (model.layers/norm/embed_tokens, lm_head)."""

    def __init__(self, thinker: Any) -> None:
        self.model = thinker.model.language_model
        self.lm_head = thinker.lm_head
        self.config = thinker.config.text_config
