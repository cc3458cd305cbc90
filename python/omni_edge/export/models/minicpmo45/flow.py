"""The flow-matching half of MiniCPM-o 4.5's token2wav (Step-Audio2's CausalMaskedDiffWithXvec
from CosyVoice2, as minicpmo-utils defines it and vLLM-Omni 0.30.0 streams it), as a PyTorch
reference: speech codes (25 Hz, 6561 of them) -> an 80-bin mel at 50 Hz, conditioned on a
speaker vector; HiFT (hift.py) makes the samples.

- Encoder: code embeddings -> linear + LayerNorm (x sqrt(512)) -> a look-ahead layer (each
  frame sees 3 codes ahead: a window's last 3 codes are look-ahead only, sent again as the next
  window's first) -> 6 conformer layers without convolution (relative-position attention with
  the ESPnet encoding, key bias, pos_bias_u/v; SiLU feed-forward) -> nearest x2 upsampling and a
  causal 5-tap convolution -> linear + LayerNorm -> 4 more layers -> LayerNorm -> 80 channels.
  Streaming keeps each layer's keys and values (the 25 Hz layers' stored twice over, as upstream
  packs them with the 50 Hz ones) and the convolutions' left context.
- Decoder: conditional flow matching, `n_timesteps` Euler steps on the schedule 1 - cos(t pi/2)
  from fixed noise (the model's, indexed by absolute frame), classifier-free guidance 0.7 (the
  speaker, encoder output and condition zeroed in the second half of each batch); the velocity
  from a DiT: 16 blocks of adaLN-modulated attention (q/k LayerNorm, no positions), a causal
  convolution block and an MLP, every frame attending to all earlier chunks' keys (kept per step
  and block, newest first).

Names follow the release's flow.pt (the upstream modules' attribute paths).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class FlowConfig:
    vocab: int = 6561
    width: int = 512          # encoder and embedding width
    heads: int = 8
    ffn: int = 2048
    blocks: int = 6
    up_blocks: int = 4
    lookahead: int = 3
    mel_bins: int = 80
    speaker_dim: int = 192
    dit_width: int = 512
    dit_depth: int = 16
    dit_heads: int = 8
    dit_head_dim: int = 64
    cfg_rate: float = 0.7
    noise_frames: int = 50 * 600  # the decoder's fixed noise: 600 s at 50 Hz


# ---- the encoder ------------------------------------------------------------------------------

def rel_positions(width: int, size: int, max_len: int = 5000) -> torch.Tensor:
    """ESPnet's relative encodings [1, 2 size - 1, width]: positions size-1 .. -(size-1)."""
    position = torch.arange(0, max_len, dtype=torch.float32).unsqueeze(1)
    div = torch.exp(torch.arange(0, width, 2, dtype=torch.float32) * -(math.log(10000.0) / width))
    positive, negative = torch.zeros(max_len, width), torch.zeros(max_len, width)
    positive[:, 0::2], positive[:, 1::2] = torch.sin(position * div), torch.cos(position * div)
    negative[:, 0::2], negative[:, 1::2] = torch.sin(-1 * position * div), torch.cos(-1 * position * div)
    table = torch.cat([torch.flip(positive, [0]).unsqueeze(0), negative[1:].unsqueeze(0)], dim=1)
    return table[:, table.shape[1] // 2 - size + 1: table.shape[1] // 2 + size]


class _LinearEmbed(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.out = nn.Sequential(nn.Linear(width, width), nn.LayerNorm(width, eps=1e-5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.out(x) * math.sqrt(x.shape[-1])
        return out


class _RelAttention(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.h, self.d = heads, width // heads
        self.linear_q, self.linear_k = nn.Linear(width, width), nn.Linear(width, width)
        self.linear_v, self.linear_out = nn.Linear(width, width), nn.Linear(width, width)
        self.linear_pos = nn.Linear(width, width, bias=False)
        self.pos_bias_u = nn.Parameter(torch.zeros(heads, self.d))
        self.pos_bias_v = nn.Parameter(torch.zeros(heads, self.d))

    @staticmethod
    def _rel_shift(x: torch.Tensor) -> torch.Tensor:
        b, h, t1, t2 = x.shape
        padded = torch.cat([x.new_zeros(b, h, t1, 1), x], dim=-1).view(b, h, t2 + 1, t1)
        return padded[:, :, 1:].reshape(b, h, t1, t2)[:, :, :, : t2 // 2 + 1]

    def forward(self, x: torch.Tensor, pos: torch.Tensor, cache: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """x [1, T, W], pos [1, 2 (C+T) - 1, W], cache [1, h, C, 2d] (keys | values, oldest first)."""
        b, t, _ = x.shape

        def heads(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, -1, self.h, self.d).transpose(1, 2)

        q = self.linear_q(x).view(b, t, self.h, self.d)
        k, v = heads(self.linear_k(x)), heads(self.linear_v(x))
        if cache is not None and cache.shape[2] > 0:
            k_cache, v_cache = torch.split(cache, self.d, dim=-1)
            k, v = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
        new_cache = torch.cat([k, v], dim=-1)
        p = self.linear_pos(pos).view(pos.shape[0], -1, self.h, self.d).transpose(1, 2)
        ac = torch.matmul((q + self.pos_bias_u).transpose(1, 2), k.transpose(-2, -1))
        bd = torch.matmul((q + self.pos_bias_v).transpose(1, 2), p.transpose(-2, -1))
        if ac.shape != bd.shape:
            bd = self._rel_shift(bd)
        attn = torch.softmax((ac + bd) / math.sqrt(self.d), dim=-1)
        out = torch.matmul(attn, v).transpose(1, 2).reshape(b, t, self.h * self.d)
        return self.linear_out(out), new_cache


class _FeedForward(nn.Module):
    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(width, hidden), nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.w_2(F.silu(self.w_1(x)))
        return out


class _ConformerLayer(nn.Module):
    def __init__(self, c: FlowConfig) -> None:
        super().__init__()
        self.self_attn = _RelAttention(c.width, c.heads)
        self.feed_forward = _FeedForward(c.width, c.ffn)
        self.norm_ff, self.norm_mha = nn.LayerNorm(c.width, eps=1e-12), nn.LayerNorm(c.width, eps=1e-12)

    def forward(self, x: torch.Tensor, pos: torch.Tensor, cache: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        attended, new_cache = self.self_attn(self.norm_mha(x), pos, cache)
        x = x + attended
        return x + self.feed_forward(self.norm_ff(x)), new_cache


class _Lookahead(nn.Module):
    def __init__(self, width: int, lookahead: int) -> None:
        super().__init__()
        self.lookahead = lookahead
        self.conv1 = nn.Conv1d(width, width, lookahead + 1)
        self.conv2 = nn.Conv1d(width, width, 3)


class _Upsample(nn.Module):
    def __init__(self, width: int, stride: int = 2) -> None:
        super().__init__()
        self.stride = stride
        self.conv = nn.Conv1d(width, width, 2 * stride + 1)


class Encoder(nn.Module):
    """UpsampleConformerEncoderV2's streaming path (forward_chunk)."""

    def __init__(self, c: FlowConfig) -> None:
        super().__init__()
        self.embed, self.up_embed = _LinearEmbed(c.width), _LinearEmbed(c.width)
        self.pre_lookahead_layer = _Lookahead(c.width, c.lookahead)
        self.encoders = nn.ModuleList(_ConformerLayer(c) for _ in range(c.blocks))
        self.up_layer = _Upsample(c.width)
        self.up_encoders = nn.ModuleList(_ConformerLayer(c) for _ in range(c.up_blocks))
        self.after_norm = nn.LayerNorm(c.width, eps=1e-5)

    def chunk(self, xs: torch.Tensor, last: bool, cnn_cache: torch.Tensor | None,
              att_cache: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """xs [1, n, W] code embeddings (the last `lookahead` codes look-ahead only, unless `last`)
        -> (hidden [1, 2 (n - lookahead), W] or [1, 2n, W] when last, new cnn cache [1, W, 6],
        new attention cache [blocks + up_blocks, 1, h, 2 frames, 2d])."""
        n1 = len(self.encoders)
        offset = att_cache.shape[3] // 2 if att_cache is not None else 0
        x = self.embed(xs)
        look = self.pre_lookahead_layer
        if last:
            x = F.pad(x, (0, 0, 0, look.lookahead))
        # The look-ahead layer: the valid convolution over the window, its left context cached.
        y = F.leaky_relu(look.conv1(x.transpose(1, 2)))
        left = cnn_cache[:, :, :2] if cnn_cache is not None else y.new_zeros(y.shape[0], y.shape[1], 2)
        new_cnn1 = y[..., -2:]
        y = look.conv2(torch.cat([left, y], dim=2)).transpose(1, 2)
        x = y + x[:, : -look.lookahead]
        pos = rel_positions(x.shape[-1], offset + x.shape[1])
        new_att1 = []
        for i, layer in enumerate(self.encoders):
            x, cache = layer(x, pos, att_cache[i, :, :, :offset] if att_cache is not None else None)
            new_att1.append(cache)
        # x2 nearest, then the causal 5-tap convolution (its 4 frames of left context cached).
        up = self.up_layer
        z = F.interpolate(x.transpose(1, 2), scale_factor=float(up.stride), mode="nearest")
        left = cnn_cache[:, :, 2:] if cnn_cache is not None else z.new_zeros(z.shape[0], z.shape[1], 2 * up.stride)
        z = torch.cat([left, z], dim=2)
        new_cnn2 = z[..., -2 * up.stride:]
        x = self.up_embed(up.conv(z).transpose(1, 2))
        pos = rel_positions(x.shape[-1], offset * up.stride + x.shape[1])
        new_att2 = []
        for i, layer in enumerate(self.up_encoders):
            x, cache = layer(x, pos, att_cache[n1 + i] if att_cache is not None else None)
            new_att2.append(cache)
        new_att = torch.cat([torch.stack(new_att1).repeat(1, 1, 1, 2, 1), torch.stack(new_att2)], dim=0)
        return self.after_norm(x), torch.cat([new_cnn1, new_cnn2], dim=2), new_att


# ---- the decoder ------------------------------------------------------------------------------

class _TimeEmbedder(nn.Module):
    def __init__(self, width: int, freq: int = 256) -> None:
        super().__init__()
        self.freq = freq
        self.mlp = nn.Sequential(nn.Linear(freq, width), nn.SiLU(), nn.Linear(width, width))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        half = self.freq // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(0, half) / half).to(t)
        args = (t * 1000)[:, None] * freqs[None]
        out: torch.Tensor = self.mlp(torch.cat([torch.cos(args), torch.sin(args)], dim=-1))
        return out


class _DitAttention(nn.Module):
    def __init__(self, width: int, heads: int, head_dim: int) -> None:
        super().__init__()
        self.h, self.d = heads, head_dim
        inner = heads * head_dim
        self.to_q, self.to_k, self.to_v = nn.Linear(width, inner), nn.Linear(width, inner), nn.Linear(width, inner)
        self.q_norm, self.k_norm = nn.LayerNorm(head_dim), nn.LayerNorm(head_dim)
        self.proj = nn.Linear(inner, width)

    def forward(self, x: torch.Tensor, cache: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        b, t, _ = x.shape

        def heads(y: torch.Tensor) -> torch.Tensor:
            return y.reshape(b, t, self.h, self.d).transpose(1, 2)

        q, k, v = self.q_norm(heads(self.to_q(x))), self.k_norm(heads(self.to_k(x))), heads(self.to_v(x))
        if cache is not None:  # newest first: this chunk's keys before the earlier ones
            k_cache, v_cache = cache.chunk(2, dim=3)
            k, v = torch.cat([k, k_cache], dim=2), torch.cat([v, v_cache], dim=2)
        new_cache = torch.cat([k, v], dim=3)
        out = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, -1)
        return self.proj(out), new_cache


class _CausalConv(nn.Conv1d):
    def chunk(self, x: torch.Tensor, cache: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        pad = self.kernel_size[0] - 1
        if cache is None:
            cache = x.new_zeros(x.shape[0], self.in_channels, pad)
        x = torch.cat([cache, x], dim=2)
        return super().forward(x), x[..., -pad:]


class _ConvBlock(nn.Module):
    """`block`: [transpose, conv, transpose, LayerNorm, Mish, transpose, conv, transpose], as upstream indexes it."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.width = width
        self.block = nn.ModuleList([nn.Identity(), _CausalConv(width, width, 3), nn.Identity(), nn.LayerNorm(width),
                                    nn.Mish(), nn.Identity(), _CausalConv(width, width, 3), nn.Identity()])

    def chunk(self, x: torch.Tensor, cache: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        width = self.width  # an int, not the traced shape: graphs take it as a constant
        c1, c2 = torch.split(cache, [width, width], dim=1) if cache is not None else (None, None)
        conv1, norm, conv2 = self.block[1], self.block[3], self.block[6]
        y, new1 = conv1.chunk(x.transpose(1, 2), c1)  # type: ignore[operator]
        y = F.mish(norm(y.transpose(1, 2))).transpose(1, 2)
        y, new2 = conv2.chunk(y, c2)  # type: ignore[operator]
        return y.transpose(1, 2), torch.cat([new1, new2], dim=1)


class _Mlp(nn.Module):
    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(width, hidden), nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.fc2(F.gelu(self.fc1(x), approximate="tanh"))
        return out


def _modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * (1 + scale) + shift


class _DitBlock(nn.Module):
    def __init__(self, c: FlowConfig) -> None:
        super().__init__()
        w = self.width = c.dit_width
        self.attn = _DitAttention(w, c.dit_heads, c.dit_head_dim)
        self.mlp = _Mlp(w, 4 * w)
        self.conv = _ConvBlock(w)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(w, 9 * w))

    def chunk(self, x: torch.Tensor, c: torch.Tensor, cnn_cache: torch.Tensor | None,
              att_cache: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        (shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp, shift_conv, scale_conv,
         gate_conv) = self.adaLN_modulation(c).chunk(9, dim=-1)
        norm = F.layer_norm
        w = self.width
        attended, new_att = self.attn(_modulate(norm(x, (w,), eps=1e-6), shift_msa, scale_msa), att_cache)
        x = x + gate_msa * attended
        conv, new_cnn = self.conv.chunk(_modulate(norm(x, (w,), eps=1e-6), shift_conv, scale_conv), cnn_cache)
        x = x + gate_conv * conv
        x = x + gate_mlp * self.mlp(_modulate(norm(x, (w,), eps=1e-6), shift_mlp, scale_mlp))
        return x, new_cnn, new_att


class _FinalLayer(nn.Module):
    def __init__(self, width: int, out: int) -> None:
        super().__init__()
        self.width = width
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(width, 2 * width))
        self.linear = nn.Linear(width, out)

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        shift, scale = self.adaLN_modulation(c).chunk(2, dim=-1)
        out: torch.Tensor = self.linear(_modulate(F.layer_norm(x, (self.width,), eps=1e-6), shift, scale))
        return out


class Estimator(nn.Module):
    """The DiT: (x, mu, speaker, cond) [b, 80 each] and t -> the velocity [b, 80, n]."""

    def __init__(self, c: FlowConfig) -> None:
        super().__init__()
        self.t_embedder = _TimeEmbedder(c.dit_width)
        self.in_proj = nn.Linear(4 * c.mel_bins, c.dit_width)
        self.blocks = nn.ModuleList(_DitBlock(c) for _ in range(c.dit_depth))
        self.final_layer = _FinalLayer(c.dit_width, c.mel_bins)

    def chunk(self, x: torch.Tensor, mu: torch.Tensor, t: torch.Tensor, spks: torch.Tensor, cond: torch.Tensor,
              cnn_cache: torch.Tensor | None, att_cache: torch.Tensor | None,
              embed: nn.Module | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`embed`: what turns `t` into the time's embedding (default the t_embedder; a graph fed
        the time's features passes its MLP)."""
        c = (embed or self.t_embedder)(t).unsqueeze(1)
        h = torch.cat([x, mu, spks[:, :, None].expand(-1, -1, x.shape[2]), cond], dim=1).transpose(1, 2)
        h = self.in_proj(h)
        new_cnn, new_att = [], []
        for i, block in enumerate(self.blocks):
            h, cnn, att = block.chunk(h, c, cnn_cache[i] if cnn_cache is not None else None,  # type: ignore[operator]
                                      att_cache[i] if att_cache is not None else None)
            new_cnn.append(cnn)
            new_att.append(att)
        return self.final_layer(h, c).transpose(1, 2), torch.stack(new_cnn), torch.stack(new_att)


class _Decoder(nn.Module):
    rand_noise: torch.Tensor

    def __init__(self, c: FlowConfig) -> None:
        super().__init__()
        self.cfg_rate = c.cfg_rate
        self.estimator = Estimator(c)
        self.register_buffer("rand_noise", torch.zeros(1, c.mel_bins, c.noise_frames), persistent=False)

    def chunk(self, mu: torch.Tensor, spks: torch.Tensor, cond: torch.Tensor, steps: int,
              cnn_cache: torch.Tensor | None, att_cache: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """mu [1, 80, n] -> (mel [1, 80, n], caches [steps, depth, 2, ...]): Euler on 1 - cos(t pi/2)
        with guidance, from the fixed noise at the chunk's absolute frames."""
        offset = att_cache.shape[4] if att_cache is not None else 0
        x = self.rand_noise[:, :, offset: offset + mu.shape[2]]
        span = 1 - torch.cos(torch.linspace(0, 1, steps + 1, dtype=mu.dtype) * 0.5 * torch.pi)
        t, dt = span[0].unsqueeze(0), span[1] - span[0]
        mu_in, spks_in, cond_in = (torch.cat([v, torch.zeros_like(v)]) for v in (mu, spks, cond))
        new_cnn, new_att = [], []
        for step in range(1, steps + 1):
            velocity, cnn, att = self.estimator.chunk(x.repeat(2, 1, 1), mu_in, t.repeat(2), spks_in, cond_in,
                                                      cnn_cache[step - 1] if cnn_cache is not None else None,
                                                      att_cache[step - 1] if att_cache is not None else None)
            guided, free = velocity.chunk(2, dim=0)
            x = x + dt * ((1.0 + self.cfg_rate) * guided - self.cfg_rate * free)
            t = t + dt
            if step < steps:
                dt = span[step + 1] - t
            new_cnn.append(cnn)
            new_att.append(att)
        return x, torch.stack(new_cnn), torch.stack(new_att)


class Flow(nn.Module):
    """CausalMaskedDiffWithXvec: `input_embedding`, `spk_embed_affine_layer`, `encoder`,
    `encoder_proj`, `decoder.estimator` (and the decoder's noise)."""

    def __init__(self, c: FlowConfig = FlowConfig()) -> None:
        super().__init__()
        self.config = c
        self.input_embedding = nn.Embedding(c.vocab, c.width)
        self.spk_embed_affine_layer = nn.Linear(c.speaker_dim, c.mel_bins)
        self.encoder = Encoder(c)
        self.encoder_proj = nn.Linear(c.width, c.mel_bins)
        self.decoder = _Decoder(c)


@dataclass
class FlowCache:
    conformer_cnn: torch.Tensor
    conformer_att: torch.Tensor
    estimator_cnn: torch.Tensor
    estimator_att: torch.Tensor


@torch.no_grad()
def setup_cache(flow: Flow, tokens: torch.Tensor, mel: torch.Tensor, speaker: torch.Tensor, steps: int = 10) -> FlowCache:
    """The caches after the voice prompt: its codes (with 3 look-ahead codes after them) through
    the encoder, its mel as the decoder's condition (the mel this makes is dropped)."""
    spks = flow.spk_embed_affine_layer(F.normalize(speaker, dim=1))
    h, cnn, att = flow.encoder.chunk(flow.input_embedding(tokens), False, None, None)
    _, est_cnn, est_att = flow.decoder.chunk(flow.encoder_proj(h).transpose(1, 2), spks, mel.transpose(1, 2), steps,
                                             None, None)
    return FlowCache(cnn, att, est_cnn, est_att)


@torch.no_grad()
def decode_chunk(flow: Flow, tokens: torch.Tensor, speaker: torch.Tensor, cache: FlowCache, last: bool,
                 steps: int = 10) -> tuple[torch.Tensor, FlowCache]:
    """A window of codes (3 carried from the last window, then the new ones) -> its mel frames
    [1, 80, 2 x emitted codes] and the caches after it (untrimmed)."""
    spks = flow.spk_embed_affine_layer(F.normalize(speaker, dim=1))
    h, cnn, att = flow.encoder.chunk(flow.input_embedding(tokens), last, cache.conformer_cnn, cache.conformer_att)
    mu = flow.encoder_proj(h).transpose(1, 2)
    mel, est_cnn, est_att = flow.decoder.chunk(mu, spks, torch.zeros_like(mu), steps, cache.estimator_cnn,
                                               cache.estimator_att)
    return mel, FlowCache(cnn, att, est_cnn, est_att)


def random_flow(config: FlowConfig = FlowConfig(), seed: int = 0) -> Flow:
    """A flow with weights and decoder noise from numpy's PCG64 (the same on every machine)."""
    flow = Flow(config).eval()
    rng = np.random.default_rng(seed)
    state = flow.state_dict()
    for name, tensor in state.items():
        if ("norm" in name and name.endswith("weight")) or name.endswith(".out.1.weight") or name.endswith("block.3.weight"):
            values = 1.0 + 0.05 * rng.standard_normal(tensor.shape)
        elif tensor.dim() >= 2:
            fan_in = int(np.prod(tensor.shape[1:]))
            values = rng.standard_normal(tensor.shape) / np.sqrt(fan_in) * (0.5 if "adaLN" in name else 1.0)
        else:
            values = 0.02 * rng.standard_normal(tensor.shape)
        state[name] = torch.from_numpy(values.astype(np.float32))
    flow.load_state_dict(state)
    flow.decoder.rand_noise.copy_(torch.from_numpy(rng.standard_normal(flow.decoder.rand_noise.shape).astype(np.float32)))
    return flow
