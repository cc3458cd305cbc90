"""Qwen3 as per-stage graphs with static shapes, built from a transformers model's weights.

Stages: embedding (ids -> hidden), body (hidden -> hidden, all decoder layers) and LM head
(final norm + lm_head, one position). The body reads the KV cache as explicit inputs
`past_key_i` / `past_value_i` [1, kv_heads, S, head_dim] and returns only the keys/values of its
N new tokens; the runtime writes those into their slots in place (ring or full cache), so no
step copies the cache. Attention is split into a past part and a current part whose scores
share one softmax, with an additive mask [1, 1, N, S + N] that the runtime builds (finite
negative values only). RoPE positions are absolute inputs, so a ring of width W gives exactly
the model's sliding-window attention of width W.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn


@dataclass(frozen=True)
class Qwen3Shape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    rope_theta: float
    eps: float
    sliding_window: int | None

    @classmethod
    def from_config(cls, config: Any) -> Qwen3Shape:
        rope = getattr(config, "rope_parameters", None) or {}
        theta = float(rope.get("rope_theta", getattr(config, "rope_theta", 10000.0)))
        layer_types = getattr(config, "layer_types", None) or ["full_attention"] * config.num_hidden_layers
        sliding = {t == "sliding_attention" for t in layer_types}
        if sliding == {True, False}:
            raise ValueError("checkpoints mixing sliding and full attention layers are not supported yet")
        window = config.sliding_window if sliding == {True} else None
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        return cls(config.hidden_size, config.num_hidden_layers, config.num_attention_heads, config.num_key_value_heads,
                   head_dim, config.vocab_size, theta, config.rms_norm_eps, window)


class RMSNorm(nn.Module):
    def __init__(self, weight: torch.Tensor, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight.detach().clone(), requires_grad=False)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def _linear(src: nn.Linear) -> nn.Linear:
    out = nn.Linear(src.in_features, src.out_features, bias=src.bias is not None)
    out.weight = nn.Parameter(src.weight.detach().clone(), requires_grad=False)
    if src.bias is not None:
        out.bias = nn.Parameter(src.bias.detach().clone(), requires_grad=False)
    return out


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class DecoderLayer(nn.Module):
    def __init__(self, layer: Any, s: Qwen3Shape) -> None:
        super().__init__()
        att = layer.self_attn
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (_linear(att.q_proj), _linear(att.k_proj),
                                                              _linear(att.v_proj), _linear(att.o_proj))
        self.q_norm, self.k_norm = RMSNorm(att.q_norm.weight, s.eps), RMSNorm(att.k_norm.weight, s.eps)
        self.input_norm = RMSNorm(layer.input_layernorm.weight, s.eps)
        self.post_norm = RMSNorm(layer.post_attention_layernorm.weight, s.eps)
        mlp = layer.mlp
        self.gate, self.up, self.down = _linear(mlp.gate_proj), _linear(mlp.up_proj), _linear(mlp.down_proj)
        self.s = s

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor,
                past_k: torch.Tensor, past_v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        s = self.s
        n = x.shape[1]
        group = s.heads // s.kv_heads
        h = self.input_norm(x)
        q = self.q_norm(self.q_proj(h).view(1, n, s.heads, s.head_dim)).transpose(1, 2)      # [1, Hq, N, D]
        k = self.k_norm(self.k_proj(h).view(1, n, s.kv_heads, s.head_dim)).transpose(1, 2)   # [1, Hkv, N, D]
        v = self.v_proj(h).view(1, n, s.kv_heads, s.head_dim).transpose(1, 2)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        # Query heads grouped under their KV head: [1, Hkv, G*N, D]; no KV head is repeated.
        qg = q.reshape(1, s.kv_heads, group * n, s.head_dim) * (s.head_dim ** -0.5)
        scores = torch.cat([qg @ past_k.transpose(-1, -2), qg @ k.transpose(-1, -2)], dim=-1)  # [1, Hkv, G*N, S+N]
        probs = torch.softmax(scores + mask.repeat(1, 1, group, 1), dim=-1)
        past_len = past_k.shape[2]
        out = probs[..., :past_len] @ past_v + probs[..., past_len:] @ v                        # [1, Hkv, G*N, D]
        out = out.reshape(1, s.heads, n, s.head_dim).transpose(1, 2).reshape(1, n, s.heads * s.head_dim)
        x = x + self.o_proj(out)
        h = self.post_norm(x)
        x = x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))
        return x, k, v


class EmbedGraph(nn.Module):
    """input_ids [1, N] int64 -> hidden [1, N, hidden]."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.weight = nn.Parameter(model.model.embed_tokens.weight.detach().clone(), requires_grad=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.embedding(input_ids, self.weight)


class BodyGraph(nn.Module):
    """(hidden, position_ids, attention_mask, past_key_i..., past_value_i...) -> (hidden, new_key_i..., new_value_i...)."""

    def __init__(self, model: Any, s: Qwen3Shape) -> None:
        super().__init__()
        self.s = s
        self.layers = nn.ModuleList(DecoderLayer(layer, s) for layer in model.model.layers)
        inv_freq = 1.0 / (s.rope_theta ** (torch.arange(0, s.head_dim, 2, dtype=torch.float32) / s.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, hidden: torch.Tensor, position_ids: torch.Tensor, attention_mask: torch.Tensor,
                *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        freqs = position_ids[..., None].to(torch.float32) * self.inv_freq       # [1, N, D/2]
        emb = torch.cat((freqs, freqs), dim=-1)[:, None]                         # [1, 1, N, D]
        cos, sin = emb.cos(), emb.sin()
        n_layers = len(self.layers)
        new_k, new_v = [], []
        for i, layer in enumerate(self.layers):
            hidden, k, v = layer(hidden, cos, sin, attention_mask, past[i], past[n_layers + i])
            new_k.append(k)
            new_v.append(v)
        return (hidden, *new_k, *new_v)


class HeadGraph(nn.Module):
    """hidden [1, 1, hidden] -> logits [1, 1, vocab] (final RMSNorm + lm_head).

    The projection runs on a 2-D view so that it exports as Gemm(transB=1) over the weight in
    its stored [vocab, hidden] layout: with tied embeddings those are the embedding table's
    bytes, and the artifact stores them once."""

    def __init__(self, model: Any, s: Qwen3Shape) -> None:
        super().__init__()
        self.norm = RMSNorm(model.model.norm.weight, s.eps)
        self.weight = nn.Parameter(model.lm_head.weight.detach().clone(), requires_grad=False)
        self.s = s

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        h = self.norm(hidden).reshape(1, self.s.hidden)
        return torch.nn.functional.linear(h, self.weight).reshape(1, 1, -1)


def body_io_names(layers: int) -> tuple[list[str], list[str]]:
    inputs = ["hidden", "position_ids", "attention_mask"]
    inputs += [f"past_key_{i}" for i in range(layers)] + [f"past_value_{i}" for i in range(layers)]
    outputs = ["hidden_out"] + [f"new_key_{i}" for i in range(layers)] + [f"new_value_{i}" for i in range(layers)]
    return inputs, outputs


def body_example(s: Qwen3Shape, n: int, cache: int) -> tuple[torch.Tensor, ...]:
    """Example inputs of a body graph with N new tokens over a cache of `cache` slots."""
    past = [torch.zeros(1, s.kv_heads, cache, s.head_dim) for _ in range(2 * s.layers)]
    return (torch.zeros(1, n, s.hidden), torch.arange(n, dtype=torch.int64)[None], torch.zeros(1, 1, n, cache + n), *past)
