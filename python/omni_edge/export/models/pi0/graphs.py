"""The three static-shape graphs of a π0 policy, as torch modules over transformers' own
submodules (so the graphs compute what sample_actions computes):

    vision  pixel_values [1, 3, S, S] -> image_rows [1, T, H]: SigLIP + the projector, one camera
    prefix  image_rows [1, C*T, H], prompt_ids [1, L], mask [1, C*T+L], rope_cos, rope_sin
            [1, C*T+L, head_dim] -> keys, values [layers, 1, kv_heads, C*T+L, head_dim]: the VLM
            decoder over the cameras' rows then the task's ids (unused text slots masked)
    expert  keys, values, attention_bias [1, 1, chunk+1, C*T+L+chunk+1], x [1, chunk, A],
            time_embedding [1, E], state [1, S], rope_cos, rope_sin [1, chunk+1, head_dim] ->
            velocity [1, chunk, A]: one flow step, the expert's layers attending to the prefix's
            keys and values

The rotary tables and the time step's sinusoidal embedding are inputs: the controller computes
them in float32 from the frequencies the checkpoint holds (rope_inv_freq, time_freq), once per
request and once per step. In a graph they would be fp16 on the HTP, where cos(position x freq)
at position 500 and sin(1570 t) lose every digit. So is the expert's attention bias (0 where a
query may attend, MASK_VALUE elsewhere: the state token sees the valid prefix and itself, the
chunk's tokens also see each other), built once per observation instead of by transformers'
mask code at every step."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

MASK_VALUE = -65504.0  # fp16's lowest finite value: exp() of it is 0 in fp32 and fp16 alike


class _Given(torch.nn.Module):
    """Stands in for a module whose output the graph takes as an input."""

    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.value


@contextlib.contextmanager
def _given(parent: torch.nn.Module, name: str, value: Any) -> Iterator[None]:
    old = getattr(parent, name)
    setattr(parent, name, _Given(value))
    try:
        yield
    finally:
        setattr(parent, name, old)


def rope_inv_freq(model: Any, part: str) -> list[float]:
    """The rotary frequencies of the VLM decoder ("vlm") or the expert ("dit")."""
    module = model.model.vlm.language_model if part == "vlm" else model.model.dit
    rope = module.rotary_emb
    if float(getattr(rope, "attention_scaling", 1.0)) != 1.0:
        raise ValueError(f"the {part} decoder's rotary embedding scales its tables: not supported")
    return [float(v) for v in rope.inv_freq.float()]


def time_freq(model: Any) -> list[float]:
    return [float(v) for v in model.embed_action_time.sinusoid_embeds.sinusoid_freq.float()]


class VisionGraph(torch.nn.Module):
    def __init__(self, model: Any) -> None:
        super().__init__()
        self.vlm = model.model.vlm

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.vlm.get_image_features(pixel_values).pooler_output
        return out


class PrefixGraph(torch.nn.Module):
    def __init__(self, model: Any) -> None:
        super().__init__()
        self.vlm = model.model.vlm

    def forward(self, image_rows: torch.Tensor, prompt_ids: torch.Tensor, mask: torch.Tensor, rope_cos: torch.Tensor,
                rope_sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        embeds = torch.cat([image_rows, self.vlm.get_input_embeddings()(prompt_ids)], dim=1)
        with _given(self.vlm.language_model, "rotary_emb", (rope_cos, rope_sin)):
            cache = self.vlm(inputs_embeds=embeds, attention_mask=mask, position_ids=mask.cumsum(-1) - 1,
                             token_type_ids=torch.zeros_like(mask), use_cache=True).past_key_values
        return torch.stack([layer.keys for layer in cache.layers]), torch.stack([layer.values for layer in cache.layers])


class ExpertStepGraph(torch.nn.Module):
    """PI0ForConditionalGeneration's forward for one step given the prefix's cache, with the mask,
    rotary tables and time embedding as inputs."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, keys: torch.Tensor, values: torch.Tensor, attention_bias: torch.Tensor, x: torch.Tensor,
                time_embedding: torch.Tensor, state: torch.Tensor, rope_cos: torch.Tensor,
                rope_sin: torch.Tensor) -> torch.Tensor:
        from transformers.cache_utils import DynamicCache

        cache = DynamicCache(config=self.model.config.dit_config)
        for i in range(keys.shape[0]):
            cache.update(keys[i], values[i], i)
        dit = self.model.model.dit
        with _given(self.model.embed_action_time, "sinusoid_embeds", time_embedding):
            suffix = self.model.embed_action_time(state, x, torch.zeros(1))
        positions = torch.zeros(1, suffix.shape[1], dtype=torch.long)  # read by nothing: the tables are given
        with _given(dit, "rotary_emb", (rope_cos, rope_sin)):
            hidden = dit(inputs_embeds=suffix, attention_mask=attention_bias, position_ids=positions,
                         cache=cache).last_hidden_state
        velocity: torch.Tensor = self.model.action_out_proj(hidden[:, -x.shape[1]:])
        return velocity


def expert_bias(mask: list[int], chunk: int) -> torch.Tensor:
    """[1, 1, chunk+1, P+chunk+1]: the state token (row 0) sees the valid prefix and itself, the
    chunk's tokens the valid prefix, the state and each other (PI0's two blocks)."""
    P = len(mask)
    allowed = torch.zeros(chunk + 1, P + chunk + 1, dtype=torch.bool)
    allowed[:, :P] = torch.tensor([bool(m) for m in mask])
    allowed[:, P] = True
    allowed[1:, P + 1:] = True
    return torch.where(allowed, 0.0, MASK_VALUE)[None, None].float()


def rope_tables(inv_freq: list[float], positions: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [1, len(positions), 2 * len(inv_freq)] as transformers' Gemma computes them."""
    freqs = torch.as_tensor(positions, dtype=torch.float32)[:, None] * torch.tensor(inv_freq, dtype=torch.float32)
    emb = torch.cat((freqs, freqs), dim=-1)[None]
    return emb.cos(), emb.sin()


def time_embedding(freq: list[float], t: float) -> torch.Tensor:
    emb = torch.tensor(freq, dtype=torch.float32)[None] * torch.tensor([t], dtype=torch.float32)[:, None]
    return torch.cat([emb.sin(), emb.cos()], dim=1)
