"""The three static-shape graphs of a π0 policy, as torch modules over transformers' own
submodules (so the graphs compute what sample_actions computes):

    vision  pixel_values [1, 3, S, S] -> image_rows [1, T, H]: SigLIP + the projector, one camera
    prefix  image_rows [1, C*T, H], prompt_ids [1, L], mask [1, C*T+L] -> keys, values
            [layers, 1, kv_heads, C*T+L, head_dim]: the VLM decoder over the cameras' rows then
            the task's ids (unused text slots masked; positions are the mask's running count)
    expert  keys, values, mask, x [1, chunk, A], t [1], state [1, S] -> velocity [1, chunk, A]:
            one flow step, the expert's layers attending to the prefix's keys and values
"""

from __future__ import annotations

from typing import Any

import torch


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

    def forward(self, image_rows: torch.Tensor, prompt_ids: torch.Tensor,
                mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        embeds = torch.cat([image_rows, self.vlm.get_input_embeddings()(prompt_ids)], dim=1)
        cache = self.vlm(inputs_embeds=embeds, attention_mask=mask, position_ids=mask.cumsum(-1) - 1,
                         token_type_ids=torch.zeros_like(mask), use_cache=True).past_key_values
        return torch.stack([layer.keys for layer in cache.layers]), torch.stack([layer.values for layer in cache.layers])


class ExpertStepGraph(torch.nn.Module):
    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, x: torch.Tensor,
                t: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        from transformers.cache_utils import DynamicCache

        cache = DynamicCache(config=self.model.config.dit_config)
        for i in range(keys.shape[0]):
            cache.update(keys[i], values[i], i)
        velocity: torch.Tensor = self.model(state=state, noise=x, timestep=t, attention_mask=mask, cache=cache).logits
        return velocity
