"""Qwen3.5's vision tower (transformers' `Qwen3_5VisionModel`) as a static-shape graph per image
grid (t, h, w in patches): the patches in the image processor's order [t h w, 3 T P P] -> the
image's tokens after the 2x2 merge [t h w / 4, out_hidden], in the thinker's order.

Everything that depends only on the grid is a constant of the graph: the learned position
embeddings resampled (bilinearly) to the grid, the 2-D rotary tables, and the mask that keeps
attention inside each frame. Unlike Qwen2.5-Omni's tower there are no windows: every block
attends over the whole frame, and the merger takes the rows in the order the processor gave them
(each 2x2 group already adjacent)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from omni_edge.export.decoder.graphs import rotate_half

MASK_VALUE = -10000.0  # finite: exp underflows to exactly 0 in float32, and fp16 can hold it


class VisionGraph(nn.Module):
    """pixel patches [S, C * T * P * P] of one image (or video) with grid (t, h, w), S = t h w ->
    its tokens [S / merge^2, out_hidden]."""

    positions: torch.Tensor
    cos: torch.Tensor
    sin: torch.Tensor
    frames: torch.Tensor

    def __init__(self, visual: Any, grid: tuple[int, int, int]) -> None:
        from transformers.vision_utils import get_vision_interpolation_indices_and_weights, get_vision_position_ids

        super().__init__()
        config = visual.config
        self.visual = visual
        self.heads = config.num_heads
        t, h, w = grid
        merge = config.spatial_merge_size
        if h % merge or w % merge:
            raise ValueError(f"grid {grid}: height and width must be multiples of the merge size {merge}")
        grid_thw = torch.tensor([grid])
        with torch.no_grad():
            index, weight = get_vision_interpolation_indices_and_weights(
                grid_thw, num_grid_per_side=visual.num_grid_per_side, mode=visual.interpolation_mode,
                align_corners=visual.interpolation_align_corners, spatial_merge_size=merge)
            positions = (visual.pos_embed(index) * weight[:, :, None]).sum(1)
            cos, sin = visual.rotary_pos_emb(torch.zeros(1), get_vision_position_ids(grid_thw, merge))
        self.register_buffer("positions", positions.float(), persistent=False)
        self.register_buffer("cos", cos.float()[:, None], persistent=False)   # [S, 1, D]
        self.register_buffer("sin", sin.float()[:, None], persistent=False)
        # Attention stays inside a frame (transformers' cu_seqlens: one segment per frame).
        frame = torch.arange(t).repeat_interleave(h * w)
        self.register_buffer("frames", torch.where(frame[:, None] == frame[None, :], 0.0, MASK_VALUE)[None],
                             persistent=False)
        self.single_frame = t == 1
        embed = visual.patch_embed.proj  # a Conv3d whose kernel is the patch: a matrix product
        self.patch = nn.Linear(embed.weight[0].numel(), embed.weight.shape[0])
        self.patch.weight = nn.Parameter(embed.weight.detach().reshape(embed.weight.shape[0], -1).clone(),
                                         requires_grad=False)
        self.patch.bias = nn.Parameter(embed.bias.detach().clone(), requires_grad=False)

    def _attention(self, att: Any, x: torch.Tensor) -> torch.Tensor:
        seq = x.shape[0]
        q, k, v = att.qkv(x).reshape(seq, 3, self.heads, -1).unbind(1)             # [S, H, D] each
        q = (q * self.cos + rotate_half(q) * self.sin) * att.scaling
        k = k * self.cos + rotate_half(k) * self.sin
        q, k, v = (t.transpose(0, 1) for t in (q, k, v))                            # [H, S, D]
        scores = torch.bmm(q, k.transpose(1, 2))
        if not self.single_frame:
            scores = scores + self.frames
        rows = torch.bmm(torch.softmax(scores, dim=-1), v).transpose(0, 1).reshape(seq, -1)
        out: torch.Tensor = att.proj(rows)
        return out

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = self.patch(pixel_values) + self.positions
        for block in self.visual.blocks:
            x = x + self._attention(block.attn, block.norm1(x))
            x = x + block.mlp(block.norm2(x))
        merged: torch.Tensor = self.visual.merger(x)
        return merged
