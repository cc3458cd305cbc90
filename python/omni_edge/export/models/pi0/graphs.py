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
from dataclasses import dataclass
from typing import Any

import torch

from omni_edge.export.models.pi0.reference import Policy

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


@dataclass(frozen=True)
class PolicyShape:
    cameras: tuple[str, ...]
    image_size: int
    image_tokens: int
    hidden: int
    prompt_tokens: int
    layers: int
    kv_heads: int
    head_dim: int
    chunk: int
    state_dim: int
    action_dim: int
    num_steps: int

    @classmethod
    def of(cls, policy: Policy, cameras: tuple[str, ...], prompt_tokens: int) -> PolicyShape:
        c, text = policy.config, policy.config.vlm_config.text_config
        return cls(cameras, policy.image_size, policy.image_tokens, int(text.hidden_size), prompt_tokens,
                   int(text.num_hidden_layers), int(text.num_key_value_heads), int(text.head_dim), int(c.chunk_size),
                   int(c.max_state_dim), int(c.max_action_dim), int(c.num_inference_steps))

    @classmethod
    def from_section(cls, section: dict[str, Any]) -> PolicyShape:
        """The shape a plan's policy section declares."""
        return cls(tuple(section["cameras"]), section["image_size"], section["image_tokens"], section["hidden_size"],
                   section["prompt_tokens"], section["layers"], section["kv_heads"], section["head_dim"],
                   section["chunk_size"], section["state_dim"], section["action_dim"], section["num_steps"])

    @property
    def prefix(self) -> int:
        return len(self.cameras) * self.image_tokens + self.prompt_tokens

    @property
    def bucket(self) -> str:
        """The manifest's shape bucket."""
        return f"cams{len(self.cameras)}-img{self.image_size}-txt{self.prompt_tokens}-chunk{self.chunk}"


Examples = dict[str, tuple[torch.nn.Module, tuple[torch.Tensor, ...], list[str], list[str]]]


def graph_examples(policy: Policy, shape: PolicyShape) -> Examples:
    """Each graph's module, example inputs (a prefix with masked text slots) and I/O names."""
    g = torch.Generator().manual_seed(0)
    P = shape.prefix
    pixels = torch.randn(1, 3, shape.image_size, shape.image_size, generator=g)
    rows = torch.randn(1, len(shape.cameras) * shape.image_tokens, shape.hidden, generator=g)
    ids = torch.randint(0, 100, (1, shape.prompt_tokens), generator=g)
    mask = torch.ones(1, P, dtype=torch.long)
    mask[0, P - shape.prompt_tokens // 2:] = 0
    prefix = PrefixGraph(policy.model).eval()
    valid = int(mask.sum())
    cos, sin = rope_tables(rope_inv_freq(policy.model, "vlm"), prefix_positions(mask[0].tolist()))
    with torch.no_grad():
        keys, values = prefix(rows, ids, mask, cos, sin)
    x = torch.randn(1, shape.chunk, shape.action_dim, generator=g)
    state = torch.randn(1, shape.state_dim, generator=g)
    t_emb = time_embedding(time_freq(policy.model), 0.7)
    e_cos, e_sin = rope_tables(rope_inv_freq(policy.model, "dit"), range(valid, valid + shape.chunk + 1))
    return {
        "vision": (VisionGraph(policy.model).eval(), (pixels,), ["pixel_values"], ["image_rows"]),
        "prefix": (prefix, (rows, ids, mask, cos, sin), ["image_rows", "prompt_ids", "mask", "rope_cos", "rope_sin"],
                   ["keys", "values"]),
        "expert": (ExpertStepGraph(policy.model).eval(),
                   (keys, values, expert_bias(mask[0].tolist(), shape.chunk), x, t_emb, state, e_cos, e_sin),
                   ["keys", "values", "attention_bias", "x", "time_embedding", "state", "rope_cos", "rope_sin"],
                   ["velocity"]),
    }


def prefix_positions(mask: list[int]) -> list[int]:
    """The prefix's rotary positions: the mask's running count less one (padding repeats the last)."""
    out, count = [], 0
    for m in mask:
        count += int(m)
        out.append(max(count - 1, 0))
    return out
