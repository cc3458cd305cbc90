"""The three static-shape graphs of a π0 policy, as torch modules over transformers' own
submodules (so the graphs compute what sample_actions computes):

    vision  pixel_values [1, 3, S, S] -> image_rows [1, T, H]: SigLIP + the projector, one camera
    prefix  image_rows [1, C*T, H], prompt_ids [1, L], mask [1, C*T+L], rope_cos, rope_sin
            [1, C*T+L, head_dim] -> keys, values [layers, 1, kv_heads, C*T+L, head_dim]: the VLM
            decoder over the cameras' rows then the task's ids (unused text slots masked)
    expert  keys, values, mask, x [1, chunk, A], time_embedding [1, E], state [1, S], rope_cos,
            rope_sin [1, chunk+1, head_dim] -> velocity [1, chunk, A]: one flow step, the
            expert's layers attending to the prefix's keys and values

The rotary tables and the time step's sinusoidal embedding are inputs: the controller computes
them in float32 from the frequencies the checkpoint holds (rope_inv_freq, time_freq), once per
request and once per step. In a graph they would be fp16 on the HTP, where cos(position x freq)
at position 500 and sin(1570 t) lose every digit."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch


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
    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, x: torch.Tensor,
                time_embedding: torch.Tensor, state: torch.Tensor, rope_cos: torch.Tensor,
                rope_sin: torch.Tensor) -> torch.Tensor:
        from transformers.cache_utils import DynamicCache

        cache = DynamicCache(config=self.model.config.dit_config)
        for i in range(keys.shape[0]):
            cache.update(keys[i], values[i], i)
        t = torch.zeros(1)  # read by nothing: the embedding below is given
        with _given(self.model.embed_action_time, "sinusoid_embeds", time_embedding), \
             _given(self.model.model.dit, "rotary_emb", (rope_cos, rope_sin)):
            velocity: torch.Tensor = self.model(state=state, noise=x, timestep=t, attention_mask=mask, cache=cache).logits
        return velocity


def rope_tables(inv_freq: list[float], positions: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [1, len(positions), 2 * len(inv_freq)] as transformers' Gemma computes them."""
    freqs = torch.as_tensor(positions, dtype=torch.float32)[:, None] * torch.tensor(inv_freq, dtype=torch.float32)
    emb = torch.cat((freqs, freqs), dim=-1)[None]
    return emb.cos(), emb.sin()


def time_embedding(freq: list[float], t: float) -> torch.Tensor:
    emb = torch.tensor(freq, dtype=torch.float32)[None] * torch.tensor([t], dtype=torch.float32)[:, None]
    return torch.cat([emb.sin(), emb.cos()], dim=1)
