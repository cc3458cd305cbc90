"""The policy's whole computation in torch, as the native controller splits it: preprocessing,
the vision tower per camera, Cosmos per frame, the context (prefix and frame history) once, the
Euler loop. Every artifact is checked against this; this is checked against vLLM-Omni's own
InternVLAA1Policy.sample_actions (tests/upstream/internvla_a1_reference.py, to 1e-5).

What the controller computes itself (and this module the same way, for the graphs' inputs):
- images: each frame resized with padding to image_resolution (bilinear, no antialiasing), then
  for Qwen3-VL normalized and cut into patches (temporal pairs of the same frame, merge order),
  for Cosmos resized to 256 (bilinear) and mapped to [-1, 1];
- the prefix's ids: per camera slot <|vision_start|>, image_tokens placeholders, <|vision_end|>,
  then the task's ids padded to tokenizer_max_length (masked);
- M-RoPE positions (Qwen3-VL's get_rope_index over the valid tokens; padding at 1), the frame
  history's and the suffix's after the prefix's largest, and their interleaved rotary tables;
- the attention biases: the prefix bidirectional over its valid tokens; the history sees the
  valid prefix and its valid frames (a camera slot without an image is masked); the state token
  sees the context and itself, the chunk the context, the state and itself;
- the flow: t from 1 in float32 steps of -1/num_steps while t >= -dt/2, the time's sinusoidal
  embedding in float64 (periods min_period..max_period), x += dt * v in float32."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from omni_edge.export.models.internvla_a1.model import (
    CAMERA_SLOTS,
    COSMOS_SIZE,
    HISTORY,
    IMAGE_TOKEN_ID,
    MROPE_SECTION,
    ROPE_THETA,
    VISION_END_ID,
    VISION_START_ID,
    InternVLAA1,
    PolicyConfig,
    context_kv,
    frame_rows,
    velocity,
)

MASK_VALUE = -65504.0  # fp16's lowest finite value: exp() of it is 0 in fp32 and fp16 alike
IMAGE_MEAN = IMAGE_STD = 0.5  # Qwen3-VL's


@dataclass
class Observation:
    """Per camera slot (CAMERA_SLOTS of them) its frame history [HISTORY, 3, H, W] in [0, 1]
    (oldest first) or None for an empty slot; the robot's state; the task; the noise
    [chunk, max_action_dim]."""

    frames: list[np.ndarray | None]
    state: np.ndarray
    task: str
    noise: np.ndarray


# ---- preprocessing ---------------------------------------------------------------------------

def resize_with_pad(frames: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """[T, 3, H, W] -> [T, 3, size]: scaled to fit (bilinear, no antialiasing), zero-padded
    around (the extra pixel of an odd pad at the bottom / right)."""
    th, tw = size
    h, w = frames.shape[-2:]
    scale = min(th / h, tw / w)
    rh, rw = max(1, round(h * scale)), max(1, round(w * scale))
    resized = F.interpolate(frames, size=(rh, rw), mode="bilinear", align_corners=False)
    top, left = (th - rh) // 2, (tw - rw) // 2
    return F.pad(resized, (left, tw - rw - left, top, th - rh - top))


def patches(image: torch.Tensor, patch: int, merge: int, temporal: int) -> torch.Tensor:
    """One resized frame [3, H, W] in [0, 1] -> Qwen3-VL's patch rows [gh x gw, 3 x temporal x
    patch x patch], in merge order (each merge x merge block's patches together)."""
    x = (image - IMAGE_MEAN) / IMAGE_STD
    c, h, w = x.shape
    gh, gw = h // patch, w // patch
    x = x[None].expand(temporal, c, h, w)
    x = x.reshape(temporal, c, gh // merge, merge, patch, gw // merge, merge, patch)
    x = x.permute(2, 5, 3, 6, 1, 0, 4, 7)
    return x.reshape(gh * gw, c * temporal * patch * patch)


def cosmos_input(image: torch.Tensor) -> torch.Tensor:
    """One resized frame [3, H, W] in [0, 1] -> Cosmos's [1, 3, 256, 256] in [-1, 1]."""
    x = image[None]
    if tuple(x.shape[-2:]) != (COSMOS_SIZE, COSMOS_SIZE):
        x = F.interpolate(x, size=(COSMOS_SIZE, COSMOS_SIZE), mode="bilinear", align_corners=False)
    return x * 2 - 1


# ---- layout, positions, masks ----------------------------------------------------------------

@dataclass(frozen=True)
class Layout:
    """Where things sit in the context: P prefix slots (per camera slot start, rows, end; then
    the text), M history rows (camera-major, then frame, then 4 x 4)."""

    image_tokens: int
    prompt_tokens: int
    frame_rows: int
    merged_grid: tuple[int, int]

    @classmethod
    def of(cls, c: PolicyConfig) -> Layout:
        gh, gw = c.grid
        m = c.sizes.vision.merge
        return cls(c.image_tokens, c.prompt_tokens, c.frame_rows, (gh // m, gw // m))

    @property
    def prefix(self) -> int:
        return CAMERA_SLOTS * (self.image_tokens + 2) + self.prompt_tokens

    @property
    def history(self) -> int:
        return CAMERA_SLOTS * HISTORY * self.frame_rows

    def prefix_ids(self, task_ids: list[int], pad_id: int) -> tuple[list[int], list[int]]:
        """The prefix's ids and mask."""
        ids: list[int] = []
        for _ in range(CAMERA_SLOTS):
            ids += [VISION_START_ID] + [IMAGE_TOKEN_ID] * self.image_tokens + [VISION_END_ID]
        mask = [1] * len(ids) + [1] * len(task_ids) + [0] * (self.prompt_tokens - len(task_ids))
        ids += task_ids + [pad_id] * (self.prompt_tokens - len(task_ids))
        return ids, mask


def prefix_positions(ids: list[int], mask: list[int], merged_grid: tuple[int, int]) -> np.ndarray:
    """[3, P] M-RoPE positions as Qwen3-VL's get_rope_index gives them: text runs count on all
    three axes; an image's rows sit at (t, t + row, t + column) after the text before it;
    masked slots are 1."""
    gh, gw = merged_grid
    out = np.ones((3, len(ids)), np.int64)
    valid = [i for i, m in enumerate(mask) if m]
    tokens = [ids[i] for i in valid]
    pos = np.zeros((3, len(tokens)), np.int64)
    next_start, k = 0, 0
    while k < len(tokens):
        if tokens[k] == IMAGE_TOKEN_ID:
            rows = np.arange(gh * gw)
            pos[0, k:k + gh * gw] = next_start
            pos[1, k:k + gh * gw] = next_start + rows // gw
            pos[2, k:k + gh * gw] = next_start + rows % gw
            next_start = int(pos[:, k:k + gh * gw].max()) + 1
            k += gh * gw
        else:
            pos[:, k] = next_start
            next_start += 1
            k += 1
    out[:, valid] = pos
    return out


def mrope_tables(inv_freq: np.ndarray, positions: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [1, N, 2 x len(inv_freq)] for positions [3, N]: frequency j takes the height axis
    when j % 3 == 1 and j < 3 x 20, the width axis when j % 3 == 2 and j < 3 x 20, else time
    (Qwen3-VL's interleaved M-RoPE, sections 24/20/20); the product in float32."""
    freqs = torch.from_numpy(positions).float()[:, :, None] * torch.from_numpy(inv_freq).float()[None, None, :]
    axis = mrope_axes(len(inv_freq))
    chosen = freqs[torch.from_numpy(axis), :, torch.arange(len(inv_freq))].T  # [N, half]
    emb = torch.cat([chosen, chosen], dim=-1)[None]
    return emb.cos(), emb.sin()


def mrope_axes(half: int) -> np.ndarray:
    axis = np.zeros(half, np.int64)
    for a, offset in ((1, 1), (2, 2)):
        axis[offset:MROPE_SECTION[a] * 3:3] = a
    return axis


def inv_freq(head_dim: int) -> np.ndarray:
    return (1.0 / (ROPE_THETA ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))).numpy()


def context_bias(prefix_mask: list[int], history_mask: list[int]) -> torch.Tensor:
    """[1, 1, P+M, P+M]: prefix rows see the valid prefix; history rows the valid prefix and the
    valid history."""
    P, M = len(prefix_mask), len(history_mask)
    valid = torch.tensor(prefix_mask + history_mask, dtype=torch.bool)
    allowed = torch.zeros(P + M, P + M, dtype=torch.bool)
    allowed[:P, :P] = valid[:P][None, :]
    allowed[P:, :] = valid[None, :]
    return torch.where(allowed, 0.0, MASK_VALUE)[None, None].float()


def step_bias(context_mask: list[int], chunk: int) -> torch.Tensor:
    """[1, 1, chunk+1, C+chunk+1]: the state token sees the valid context and itself; the chunk
    the valid context, the state and itself."""
    C = len(context_mask)
    allowed = torch.zeros(chunk + 1, C + chunk + 1, dtype=torch.bool)
    allowed[:, :C] = torch.tensor([bool(m) for m in context_mask])
    allowed[:, C] = True
    allowed[1:, C + 1:] = True
    return torch.where(allowed, 0.0, MASK_VALUE)[None, None].float()


def time_embedding(t: float, dim: int, min_period: float, max_period: float) -> torch.Tensor:
    """[1, dim]: sin then cos of t x 2 pi / period, periods geometric from min to max, in float64
    (as sample_actions computes it on the CPU), then float32."""
    angle = time_scaling(dim, min_period, max_period) * float(np.float32(t))
    return torch.cat([torch.sin(angle), torch.cos(angle)])[None].float()


def time_scaling(dim: int, min_period: float, max_period: float) -> torch.Tensor:
    """2 pi / period per frequency, float64 (the plan carries these)."""
    fraction = torch.linspace(0.0, 1.0, dim // 2, dtype=torch.float64)
    period = min_period * (max_period / min_period) ** fraction
    return 1.0 / period * 2 * math.pi


def flow_times(num_steps: int) -> list[float]:
    """The Euler loop's times: float32 t from 1, t += dt while t >= -dt / 2."""
    dt = np.float32(-1.0 / num_steps)
    t, out = np.float32(1.0), []
    while t >= -dt / 2:
        out.append(float(t))
        t = np.float32(t + dt)
    return out


# ---- the whole chunk -------------------------------------------------------------------------

def task_ids(processor: Path, task: str) -> list[int]:
    from tokenizers import Tokenizer

    return list(Tokenizer.from_file(str(processor / "tokenizer.json")).encode(task, add_special_tokens=False).ids)


PAD_ID = 151643  # Qwen3's <|endoftext|>, its tokenizer's pad token


@dataclass
class Context:
    """One observation's graph inputs up to the context, and the context's keys and values."""

    image_rows: torch.Tensor
    history_rows: torch.Tensor
    ids: torch.Tensor
    bias: torch.Tensor
    cos: torch.Tensor
    sin: torch.Tensor
    mask: list[int]
    last_position: np.ndarray   # [3] the history's largest position per axis
    keys: torch.Tensor | None = None
    values: torch.Tensor | None = None


def vision_rows(model: InternVLAA1, pixel_patches: torch.Tensor) -> torch.Tensor:
    c = model.config
    gh, gw = c.grid
    out = model.visual(pixel_patches, grid_thw=torch.tensor([[1, gh, gw]]))
    rows: torch.Tensor = out.pooler_output[None]
    return rows


def prefix_embeddings(model: InternVLAA1, ids: torch.Tensor, image_rows: torch.Tensor, image_tokens: int) -> torch.Tensor:
    """The prefix's embeddings: its ids' embeddings with each camera slot's image placeholders
    replaced by that slot's rows (the layout is fixed, so by slicing)."""
    emb = model.vlm.embed_tokens(ids)
    parts, span = [], image_tokens + 2
    for s in range(CAMERA_SLOTS):
        a = s * span
        parts += [emb[:, a:a + 1], image_rows[:, s * image_tokens:(s + 1) * image_tokens], emb[:, a + span - 1:a + span]]
    parts.append(emb[:, CAMERA_SLOTS * span:])
    return torch.cat(parts, dim=1)


def build_context(model: InternVLAA1, obs: Observation, task: list[int]) -> Context:
    c = model.config
    layout = Layout.of(c)
    v = c.sizes.vision
    rows, history = [], []
    with torch.no_grad():
        for frames in obs.frames:
            stack = torch.zeros(HISTORY, 3, *c.image_resolution) if frames is None else \
                resize_with_pad(torch.from_numpy(frames).float(), c.image_resolution)
            rows.append(vision_rows(model, patches(stack[-1], v.patch, v.merge, v.temporal_patch)))
            for f in range(HISTORY):
                history.append(frame_rows(model, cosmos_input(stack[f])))
    ids, mask = layout.prefix_ids(task, PAD_ID)
    history_mask = [int(frames is not None) for frames in obs.frames for _ in range(HISTORY * layout.frame_rows)]
    prefix_pos = prefix_positions(ids, mask, layout.merged_grid)
    top = prefix_pos.max(axis=1)
    history_pos = top[:, None] + np.arange(1, layout.history + 1)[None, :]
    cos, sin = mrope_tables(inv_freq(c.sizes.vlm.head_dim), np.concatenate([prefix_pos, history_pos], axis=1))
    return Context(torch.cat(rows, dim=1), torch.cat(history, dim=1), torch.tensor([ids]),
                   context_bias(mask, history_mask), cos, sin, mask + history_mask, history_pos.max(axis=1))


def sample_actions(model: InternVLAA1, obs: Observation, task: list[int]) -> tuple[np.ndarray, Context]:
    """The chunk [chunk, max_action_dim] for the observation and its noise."""
    c = model.config
    ctx = build_context(model, obs, task)
    with torch.no_grad():
        prefix = prefix_embeddings(model, ctx.ids, ctx.image_rows, c.image_tokens)
        ctx.keys, ctx.values = context_kv(model, prefix, ctx.history_rows, ctx.bias, ctx.cos, ctx.sin)
        cos, sin, bias, state = step_inputs(c, ctx, obs)
        x = torch.from_numpy(obs.noise).float()[None]
        dt = np.float32(-1.0 / c.num_steps)
        for t in flow_times(c.num_steps):
            emb = time_embedding(t, c.sizes.expert.hidden, c.min_period, c.max_period)
            v = velocity(model, ctx.keys, ctx.values, bias, x, emb, state, cos, sin)
            x = x + float(dt) * v
    return x[0].numpy(), ctx


def step_inputs(c: PolicyConfig, ctx: Context, obs: Observation) -> tuple[torch.Tensor, ...]:
    """What every flow step reads besides x and t: the suffix's rotary tables, its bias, the
    zero-padded state."""
    positions = ctx.last_position[:, None] + np.arange(1, c.chunk + 2)[None, :]
    cos, sin = mrope_tables(inv_freq(c.sizes.expert.head_dim), positions)
    state = torch.zeros(1, c.max_state_dim)
    state[0, :len(obs.state)] = torch.from_numpy(obs.state).float()
    return cos, sin, step_bias(ctx.mask, c.chunk), state


def observation_from_npz(data: Any) -> Observation:
    """The upstream runner's OBS.npz layout."""
    frames = [np.asarray(data[f"image{i}"], np.float32) if bool(data[f"mask{i}"]) else None for i in range(CAMERA_SLOTS)]
    return Observation(frames, np.asarray(data["state"], np.float32), str(data["task"]),
                       np.asarray(data["noise"], np.float32))
