"""The four static-shape graphs of an InternVLA-A1 policy (torch modules over the policy's own
arithmetic, model.py):

    vision   patches [gh x gw, 3 x 2 x p x p] -> image_rows [1, T, Hv]: Qwen3-VL's vision tower
             and merger for one camera's current frame (the grid is fixed by image_resolution)
    frame    image [1, 3, 256, 256] -> frame_rows [1, R, He]: Cosmos CI8x8's encoder, the 1 x 1
             projection and the scale_factor pooling for one frame of the history
    context  ids [1, P], image_rows [1, 3T, Hv], history_rows [1, M, He], attention_bias
             [1, 1, P+M, P+M], rope_cos, rope_sin [1, P+M, D] -> keys, values
             [layers, 1, kv_heads, P+M, D]: the understanding expert over the prefix and the
             generation expert over the frame history, once per observation
    expert   keys, values, attention_bias [1, 1, chunk+1, P+M+chunk+1], x [1, chunk, A],
             time_embedding [1, He], state [1, S], rope_cos, rope_sin [1, chunk+1, D] ->
             velocity [1, chunk, A]: one flow step of the action expert

Rotary tables, biases and the time embedding are inputs computed by the controller (see
reference.py): fp16 would lose cos(position x freq) and sin(t x 2 pi / 0.004) on the HTP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from omni_edge.export.models.internvla_a1.model import (
    CAMERA_SLOTS,
    COSMOS_SIZE,
    InternVLAA1,
    PolicyConfig,
    context_kv,
    frame_rows,
    velocity,
)
from omni_edge.export.models.internvla_a1.reference import (
    PAD_ID,
    Layout,
    context_bias,
    inv_freq,
    mrope_tables,
    prefix_embeddings,
    prefix_positions,
    step_bias,
    time_embedding,
)


class VisionGraph(torch.nn.Module):
    """Qwen3-VL's vision tower for the one grid image_resolution gives, with what transformers
    derives from the grid at run time (the position table's resampling taps, the 2-D rotary
    tables, one attention span) computed here once: static for export; the patch embedding's
    Conv3d, whose kernel is the whole patch, as the matrix it is. The end-to-end check holds it
    to transformers' own forward (reference.vision_rows)."""

    indices: torch.Tensor
    weights: torch.Tensor
    cos: torch.Tensor
    sin: torch.Tensor

    def __init__(self, model: InternVLAA1) -> None:
        super().__init__()
        from transformers.vision_utils import get_vision_interpolation_indices_and_weights, get_vision_position_ids

        self.visual = model.visual
        v = self.visual
        gh, gw = model.config.grid
        grid = torch.tensor([[1, gh, gw]])
        indices, weights = get_vision_interpolation_indices_and_weights(
            grid, num_grid_per_side=v.num_grid_per_side, mode=v.interpolation_mode,
            align_corners=v.interpolation_align_corners, spatial_merge_size=v.config.spatial_merge_size)
        cos, sin = v.rotary_pos_emb(torch.zeros(1), get_vision_position_ids(grid, v.spatial_merge_size))
        for name, value in (("indices", indices), ("weights", weights), ("cos", cos), ("sin", sin)):
            self.register_buffer(name, value.detach().clone(), persistent=False)

    def forward(self, patches: torch.Tensor) -> torch.Tensor:
        from transformers.models.qwen3_vl.modeling_qwen3_vl import apply_rotary_pos_emb_vision

        v = self.visual
        proj = v.patch_embed.proj  # a Conv3d whose kernel is the whole patch: a matrix (ExecuTorch has no Conv3d)
        h = F.linear(patches, proj.weight.reshape(proj.weight.shape[0], -1), proj.bias)
        h = h + (v.pos_embed(self.indices) * self.weights[:, :, None]).sum(1)
        for block in v.blocks:
            attn = block.attn
            n = h.shape[0]
            q, k, val = attn.qkv(block.norm1(h)).reshape(n, 3, attn.num_heads, -1).permute(1, 0, 2, 3).unbind(0)
            q, k = apply_rotary_pos_emb_vision(q, k, self.cos, self.sin)
            q, k, val = q.transpose(0, 1), k.transpose(0, 1), val.transpose(0, 1)
            weights = torch.softmax(torch.matmul(q, k.transpose(1, 2)) * attn.scaling, dim=-1)
            h = h + attn.proj(torch.matmul(weights, val).transpose(0, 1).reshape(n, -1))
            h = h + block.mlp(block.norm2(h))
        rows: torch.Tensor = v.merger(h)[None]
        return rows


class FrameGraph(torch.nn.Module):
    def __init__(self, model: InternVLAA1) -> None:
        super().__init__()
        self.model = model

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return frame_rows(self.model, image)


class ContextGraph(torch.nn.Module):
    def __init__(self, model: InternVLAA1) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, image_rows: torch.Tensor, history_rows: torch.Tensor,
                attention_bias: torch.Tensor, rope_cos: torch.Tensor,
                rope_sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        prefix = prefix_embeddings(self.model, ids, image_rows, self.model.config.image_tokens)
        return context_kv(self.model, prefix, history_rows, attention_bias, rope_cos, rope_sin)


class ExpertGraph(torch.nn.Module):
    def __init__(self, model: InternVLAA1) -> None:
        super().__init__()
        self.model = model

    def forward(self, keys: torch.Tensor, values: torch.Tensor, attention_bias: torch.Tensor, x: torch.Tensor,
                time_embedding: torch.Tensor, state: torch.Tensor, rope_cos: torch.Tensor,
                rope_sin: torch.Tensor) -> torch.Tensor:
        return velocity(self.model, keys, values, attention_bias, x, time_embedding, state, rope_cos, rope_sin)


@dataclass(frozen=True)
class PolicyShape:
    """What the plan declares and the graphs are built for."""

    cameras: tuple[str, ...]   # names of the first len(cameras) slots; the rest stay empty
    image_resolution: tuple[int, int]
    patch: int
    merge: int
    temporal_patch: int
    image_tokens: int
    prompt_tokens: int
    frame_rows: int
    vlm_hidden: int
    expert_hidden: int
    layers: int
    kv_heads: int
    head_dim: int
    chunk: int
    max_state_dim: int
    max_action_dim: int
    state_dim: int
    action_dim: int
    num_steps: int

    @classmethod
    def of(cls, c: PolicyConfig, cameras: tuple[str, ...], prompt_tokens: int = 0) -> PolicyShape:
        if not 1 <= len(cameras) <= CAMERA_SLOTS:
            raise ValueError(f"InternVLA-A1 reads 1 to {CAMERA_SLOTS} cameras (its image slots), not {len(cameras)}")
        if prompt_tokens and prompt_tokens != c.prompt_tokens:
            raise ValueError(f"the checkpoint pads the task to {c.prompt_tokens} tokens (tokenizer_max_length); "
                             f"--prompt-tokens {prompt_tokens} would change the model's positions")
        s, v = c.sizes, c.sizes.vision
        return cls(cameras, c.image_resolution, v.patch, v.merge, v.temporal_patch, c.image_tokens, c.prompt_tokens,
                   c.frame_rows, s.vlm.hidden, s.expert.hidden, s.vlm.layers, s.vlm.kv_heads, s.vlm.head_dim, c.chunk,
                   c.max_state_dim, c.max_action_dim, c.state_dim, c.action_dim, c.num_steps)

    @property
    def layout(self) -> Layout:
        gh, gw = self.grid
        return Layout(self.image_tokens, self.prompt_tokens, self.frame_rows, (gh // self.merge, gw // self.merge))

    @property
    def grid(self) -> tuple[int, int]:
        return self.image_resolution[0] // self.patch, self.image_resolution[1] // self.patch

    @property
    def context(self) -> int:
        return self.layout.prefix + self.layout.history

    @property
    def bucket(self) -> str:
        h, w = self.image_resolution
        return f"cams{len(self.cameras)}-img{h}x{w}-txt{self.prompt_tokens}-chunk{self.chunk}"


Examples = dict[str, tuple[torch.nn.Module, tuple[torch.Tensor, ...], list[str], list[str]]]


def graph_examples(model: InternVLAA1, shape: PolicyShape) -> Examples:
    """Each graph's module, example inputs (half the text masked, the last camera slot empty)
    and I/O names. Every example input is its own tensor (torch.export reads one tensor passed
    twice as one input)."""
    g = torch.Generator().manual_seed(0)
    layout = shape.layout
    gh, gw = shape.grid
    patches = torch.randn(gh * gw, 3 * shape.temporal_patch * shape.patch ** 2, generator=g)
    image = torch.rand(1, 3, COSMOS_SIZE, COSMOS_SIZE, generator=g) * 2 - 1
    rows = torch.randn(1, CAMERA_SLOTS * shape.image_tokens, shape.vlm_hidden, generator=g)
    history = torch.randn(1, layout.history, shape.expert_hidden, generator=g)
    ids, mask = layout.prefix_ids(torch.randint(0, 150000, (shape.prompt_tokens // 2,), generator=g).tolist(), PAD_ID)
    history_mask = [1] * (layout.history - layout.history // CAMERA_SLOTS) + [0] * (layout.history // CAMERA_SLOTS)
    positions = prefix_positions(ids, mask, layout.merged_grid)
    top = positions.max(axis=1)
    all_positions = np.concatenate([positions, top[:, None] + np.arange(1, layout.history + 1)[None]], axis=1)
    cos, sin = mrope_tables(inv_freq(shape.head_dim), all_positions)
    context = ContextGraph(model).eval()
    args = (torch.tensor([ids]), rows, history, context_bias(mask, history_mask), cos, sin)
    with torch.no_grad():
        keys, values = context(*args)
    suffix = top[:, None] + layout.history + np.arange(1, shape.chunk + 2)[None]
    e_cos, e_sin = mrope_tables(inv_freq(shape.head_dim), suffix)
    x = torch.randn(1, shape.chunk, shape.max_action_dim, generator=g)
    state = torch.randn(1, shape.max_state_dim, generator=g)
    c = model.config
    t_emb = time_embedding(0.7, shape.expert_hidden, c.min_period, c.max_period)
    return {
        "vision": (VisionGraph(model).eval(), (patches,), ["patches"], ["image_rows"]),
        "frame": (FrameGraph(model).eval(), (image,), ["image"], ["frame_rows"]),
        "context": (context, args, ["ids", "image_rows", "history_rows", "attention_bias", "rope_cos", "rope_sin"],
                    ["keys", "values"]),
        "expert": (ExpertGraph(model).eval(),
                   (keys.clone(), values.clone(), step_bias(mask + history_mask, shape.chunk), x, t_emb, state, e_cos,
                    e_sin),
                   ["keys", "values", "attention_bias", "x", "time_embedding", "state", "rope_cos", "rope_sin"],
                   ["velocity"]),
    }


def describe(examples: Examples) -> dict[str, Any]:
    return {name: {"inputs": list(i), "outputs": list(o)} for name, (_, _, i, o) in examples.items()}
