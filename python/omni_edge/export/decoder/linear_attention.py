"""A Gated DeltaNet layer (Qwen3.5's linear attention, transformers' `Qwen3_5GatedDeltaNet`) as a
static-shape graph layer whose state is explicit: per layer a causal-conv state `conv_state`
[1, conv_dim, K-1] (the last K-1 inputs of the depthwise convolution) and a recurrent matrix
state `recurrent_state` [1, v_heads, k_dim, v_dim], both fixed in size whatever the context.

A decode step (one token) applies the gated delta rule once: S <- S * exp(g); S <- S + k^T
(beta (v - k S)); out = q S. A prefill chunk of N rows applies the chunked form of the same rule
within the chunk (the WY/UT transform: the unit lower-triangular system is inverted as a product
of log2(N) factors, (I + M)(I + M^2)(I + M^4)..., which is exact because M is nilpotent), with
the state in and out. Rows at or past `valid_tokens` are padding: their decay, beta and key are
zeroed, so the state comes out as if the chunk ended at the last valid row, and the new conv
state is the K-1 inputs before that row's end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn


@dataclass(frozen=True)
class LinearShape:
    """The linear-attention geometry of a hybrid checkpoint (transformers' `linear_*` fields)."""

    k_heads: int
    v_heads: int
    k_dim: int
    v_dim: int
    conv_kernel: int

    @property
    def conv_dim(self) -> int:
        return 2 * self.k_heads * self.k_dim + self.v_heads * self.v_dim

    @classmethod
    def from_config(cls, config: Any) -> LinearShape:
        return cls(config.linear_num_key_heads, config.linear_num_value_heads, config.linear_key_head_dim,
                   config.linear_value_head_dim, config.linear_conv_kernel_dim)

    def state_shapes(self) -> tuple[list[int], list[int]]:
        """(conv state, recurrent state) of one layer, batch 1."""
        return [1, self.conv_dim, self.conv_kernel - 1], [1, self.v_heads, self.k_dim, self.v_dim]


# Written mostly in ops XNNPACK delegates, so ExecuTorch lowers it in fewer partitions: no select,
# unsqueeze or thresholded softplus; head repeats are products with a constant 0/1 matrix (x * 1 +
# 0: exact). (The l2 norm's sum as such a product made XNNPACK's partitioner form a cycle.)


def _l2norm(x: torch.Tensor) -> torch.Tensor:
    """x / |x| over the last axis, with transformers' (FLA's) epsilon."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def _softplus(x: torch.Tensor) -> torch.Tensor:
    """log(1 + e^x), in the form that never overflows: max(x, 0) + log(1 + e^-|x|)."""
    return torch.relu(x) + torch.log(1.0 + torch.exp(-torch.abs(x)))


def _unit_lower_inverse(strict_lower: torch.Tensor, n: int) -> torch.Tensor:
    """(I + A)^-1 for strictly lower-triangular A [..., n, n]: with M = -A (nilpotent, M^n = 0),
    (I - M)^-1 = sum M^k = (I + M)(I + M^2)(I + M^4)... over ceil(log2 n) factors; matmuls only."""
    eye = torch.eye(n)
    power = -strict_lower
    inverse = eye + power
    reach = 2
    while reach < n:
        power = power @ power
        inverse = inverse @ (eye + power)
        reach *= 2
    return inverse


def gated_delta_step(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                     state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One token. q, k [H, 1, Dk]; v [H, 1, Dv]; g, beta [H, 1, 1]; state [H, Dk, Dv]."""
    state = state * torch.exp(g)
    delta = (v - k @ state) * beta
    state = state + k.transpose(1, 2) @ delta
    return q @ state, state


def gated_delta_steps(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                      state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """N tokens one after another (the decode rule N times; shapes as gated_delta_chunk's)."""
    h, n = q.shape[0], q.shape[1]
    outs = []
    for t in range(n):
        out, state = gated_delta_step(q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1], g[:, t:t + 1].reshape(h, 1, 1),
                                      beta[:, t:t + 1].reshape(h, 1, 1), state)
        outs.append(out)
    return torch.cat(outs, dim=1), state


def gated_delta_chunk(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                      state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """N tokens at once, the chunked gated delta rule. q, k [H, N, Dk]; v [H, N, Dv]; g, beta
    [H, N]; state [H, Dk, Dv]. Returns out [H, N, Dv] and the state after the N tokens."""
    n = q.shape[1]
    lower, strict = torch.ones(n, n).tril(), torch.ones(n, n).tril(-1)
    cum = torch.cumsum(g, dim=1)                                                   # [H, N] (log decay so far)
    # exp(cum_i - cum_j) for j <= i; above the diagonal the difference is positive (it could
    # overflow) and unused, so it is zeroed before the exponential.
    decay = torch.exp((cum[:, :, None] - cum[:, None, :]) * lower) * lower
    h = q.shape[0]
    column = beta.reshape(h, n, 1)
    k_beta, v_beta = k * column, v * column
    system = (k_beta @ k.transpose(1, 2)) * decay * strict
    inverse = _unit_lower_inverse(system, n)
    values = inverse @ v_beta
    growth = torch.exp(cum).reshape(h, n, 1)
    k_decayed = inverse @ (k_beta * growth)
    v_new = values - k_decayed @ state
    intra = (q @ k.transpose(1, 2)) * decay
    out = (q * growth) @ state + intra @ v_new
    last = cum[:, n - 1:]                                                          # [H, 1]
    k_tail = k * torch.exp(last - cum).reshape(h, n, 1)
    state = state * torch.exp(last).reshape(h, 1, 1) + k_tail.transpose(1, 2) @ v_new
    return out, state


class GatedDeltaNetLayer(nn.Module):
    """One hybrid decoder layer whose token mixer is a Gated DeltaNet: (x, conv_state, state[,
    valid_tokens]) -> (x, conv_state, state). `norm` builds the layer's RMSNorms (the checkpoint's
    zero-centred weights already offset)."""

    spread: torch.Tensor

    def __init__(self, layer: Any, shape: LinearShape, norm: Any, linear: Any, htp: bool = False) -> None:
        super().__init__()
        att = layer.linear_attn
        self.shape = shape
        self.in_proj = linear(att.in_proj_qkv, att.in_proj_z, att.in_proj_b, att.in_proj_a)
        self.conv_weight = nn.Parameter(att.conv1d.weight.detach().clone(), requires_grad=False)  # [C, 1, K]
        self.neg_a = nn.Parameter(-att.A_log.detach().float().exp().clone(), requires_grad=False)
        self.dt_bias = nn.Parameter(att.dt_bias.detach().clone(), requires_grad=False)
        self.head_norm = norm(att.norm.weight, offset=0.0)  # the gated norm's weight is not zero-centred
        self.out_proj = linear(att.out_proj)
        self.input_norm, self.post_norm = norm(layer.input_layernorm.weight), norm(layer.post_attention_layernorm.weight)
        mlp = layer.mlp
        self.gate_up, self.down = linear(mlp.gate_proj, mlp.up_proj), linear(mlp.down_proj)
        self.intermediate = mlp.gate_proj.out_features
        # The HTP's form: a prefill chunk token by token instead of the chunked rule (in fp16 the
        # chunked rule's states come out wrong on the emulator: benchmarks/hybrid_htp_probe.py),
        # and key heads repeated for their value heads by expand (the v68 HTP has no kernel for
        # the 0/1 matmul the CPU graphs use).
        self.htp = htp
        # Value head j reads key head j // group: [k_heads, v_heads] of 0/1.
        group = shape.v_heads // shape.k_heads
        spread = (torch.arange(shape.v_heads)[None, :] // group == torch.arange(shape.k_heads)[:, None]).float()
        self.register_buffer("spread", spread, persistent=False)

    def forward(self, x: torch.Tensor, conv_state: torch.Tensor, state: torch.Tensor,
                valid: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        s = self.shape
        n, kd, vd, hv = x.shape[1], s.k_heads * s.k_dim, s.v_heads * s.v_dim, s.v_heads
        p = self.in_proj(self.input_norm(x))
        mixed, z = p[..., :s.conv_dim], p[..., s.conv_dim:s.conv_dim + vd]
        b, a = p[..., s.conv_dim + vd:s.conv_dim + vd + hv], p[..., s.conv_dim + vd + hv:]
        window = torch.cat([conv_state, mixed.transpose(1, 2)], dim=-1)                 # [1, C, K-1+N]
        conv = torch.nn.functional.silu(torch.nn.functional.conv1d(window, self.conv_weight, groups=s.conv_dim))
        # The next conv state: the K-1 inputs before the last valid row's end.
        new_conv = (window[:, :, n:] if valid is None
                    else torch.index_select(window, 2, valid.reshape(1) + torch.arange(s.conv_kernel - 1)))
        conv = conv.transpose(1, 2).reshape(n, s.conv_dim)                               # [N, C]
        q = _l2norm(conv[:, :kd].reshape(n, s.k_heads, s.k_dim)) * s.k_dim ** -0.5
        k = _l2norm(conv[:, kd:2 * kd].reshape(n, s.k_heads, s.k_dim))
        v = conv[:, 2 * kd:].reshape(n, hv, s.v_dim).transpose(0, 1)                    # [Hv, N, Dv]
        if hv != s.k_heads and self.htp:  # each key head serves v_heads // k_heads consecutive value heads
            group = hv // s.k_heads
            q, k = (x[:, :, None, :].expand(n, s.k_heads, group, s.k_dim).reshape(n, hv, s.k_dim).transpose(0, 1)
                    for x in (q, k))
        elif hv != s.k_heads:
            q, k = (x.transpose(1, 2) @ self.spread for x in (q, k))                     # [N, Dk, Hv]
            q, k = q.permute(2, 0, 1), k.permute(2, 0, 1)                               # [Hv, N, Dk]
        else:
            q, k = q.transpose(0, 1), k.transpose(0, 1)
        beta = torch.sigmoid(b.reshape(n, hv)).t()                                       # [Hv, N]
        g = (self.neg_a * _softplus(a.reshape(n, hv) + self.dt_bias)).t()
        if valid is not None:
            keep = (torch.arange(n) < valid.reshape(1)).to(torch.float32)               # [N]
            beta, g, k = beta * keep, g * keep, k * keep.reshape(1, n, 1)
        state = state.reshape(hv, s.k_dim, s.v_dim)
        if n == 1:
            out, state = gated_delta_step(q, k, v, g.reshape(hv, 1, 1), beta.reshape(hv, 1, 1), state)
        elif self.htp:
            out, state = gated_delta_steps(q, k, v, g, beta, state)
        else:
            out, state = gated_delta_chunk(q, k, v, g, beta, state)
        out = out.transpose(0, 1)                                                        # [N, Hv, Dv]
        out = self.head_norm(out) * torch.nn.functional.silu(z.reshape(n, hv, s.v_dim))
        x = x + self.out_proj(out.reshape(1, n, vd))
        h = self.gate_up(self.post_norm(x))
        x = x + self.down(torch.nn.functional.silu(h[..., :self.intermediate]) * h[..., self.intermediate:])
        return x, new_conv, state.reshape(1, hv, s.k_dim, s.v_dim)
