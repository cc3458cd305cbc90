"""MiniCPM-o 4.5's token2wav as graphs a controller steps (component token2wav-onnx):

    encoder.onnx       codes [1, n], cnn cache [1, W, 6], attention cache [L, 1, h, F, 2d]
                       -> mu [1, 80, 2 (n - 3)], the caches after (a window's last 3 codes
                       are look-ahead only)
    encoder_last.onnx  the same for the utterance's last window: mu [1, 80, 2n]
    estimator.onnx     one Euler step of the flow: x, mu, cond [1, 80, m], t [1], speaker
                       [1, 80], the step's caches (cnn [depth, 2, 2 Wd, 2], attention
                       [depth, 2, h, F, 2d]) -> the guided velocity [1, 80, m], the caches after
    hift.onnx          mel [1, 80, T], phase0 [1, 9], noise [1, 480 T, 9], the last window's
                       source tail [1, 1, 3840] and keep [1] (1: it replaces the first 3840
                       samples of the source) -> speech [1, 480 T], source [1, 1, 480 T]

The controller keeps the caches (one estimator cache per step), trims them to the voice prompt's
frames and the last 100, slices the decoder's fixed noise (noise.bin) at the cache's length, runs
the Euler loop on 1 - cos(t pi / 2), cross-fades HiFT's windows and draws HiFT's noise
(counter_noise). Attention caches and windows vary in length: the graphs take dynamic sizes
(ONNX Runtime); steady_examples() are the encoder and the Euler step at the one shape most windows
have, static, for the HTP (qnn.py). HiFT's STFT and inverse STFT are
convolutions with the DFT's bases here (the ONNX exporter has no inverse STFT)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from omni_edge.export.models.minicpmo45.flow import Flow
from omni_edge.export.models.minicpmo45.hift import HOP, N_FFT, Hift
from omni_edge.export.models.minicpmo45.token2wav import SOURCE_CACHE


class EncoderGraph(nn.Module):
    def __init__(self, flow: Flow, last: bool) -> None:
        super().__init__()
        self.flow, self.last = flow, last

    def forward(self, codes: torch.Tensor, cnn_cache: torch.Tensor, att_cache: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h, cnn, att = self.flow.encoder.chunk(self.flow.input_embedding(codes), self.last, cnn_cache, att_cache)
        return self.flow.encoder_proj(h).transpose(1, 2), cnn, att


class EstimatorGraph(nn.Module):
    """One guided Euler step. `time_features`: the step's time comes in as its sinusoidal features
    [1, freq] (time_features()), computed by the controller in float32: in fp16 (the HTP) the
    cosines of t x 1000 rad lose the time altogether (the step's velocity measured 15 dB against
    fp32 with t inside the graph, 54 dB with the features fed)."""

    def __init__(self, flow: Flow, time_features: bool = False) -> None:
        super().__init__()
        self.flow, self.time_features = flow, time_features

    def forward(self, x: torch.Tensor, mu: torch.Tensor, t: torch.Tensor, speaker: torch.Tensor, cond: torch.Tensor,
                cnn_cache: torch.Tensor, att_cache: torch.Tensor) -> tuple[torch.Tensor, ...]:
        rate = self.flow.decoder.cfg_rate
        estimator = self.flow.decoder.estimator
        mu2, spk2, cond2 = (torch.cat([v, torch.zeros_like(v)]) for v in (mu, speaker, cond))
        embed = estimator.t_embedder.mlp if self.time_features else estimator.t_embedder
        velocity, cnn, att = estimator.chunk(x.repeat(2, 1, 1), mu2, t.repeat(2, *[1] * (t.dim() - 1)), spk2, cond2,
                                             cnn_cache, att_cache, embed=embed)
        guided, free = velocity.chunk(2, dim=0)
        return (1.0 + rate) * guided - rate * free, cnn, att


def time_features(t: float, freq: int) -> np.ndarray:
    """[1, freq]: the DiT's sinusoidal time features (its _TimeEmbedder before the MLP), in float64."""
    half = freq // 2
    args = float(t) * 1000.0 * np.exp(-math.log(10000) * np.arange(half) / half)
    return np.concatenate([np.cos(args), np.sin(args)])[None].astype(np.float32)


def _bases(window: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward ([18, 1, 16]: window x cos, window x -sin) and inverse ([18, 1, 16]: the one-
    sided inverse DFT's weights x window) bases of the 16-point STFT."""
    n = torch.arange(N_FFT, dtype=torch.float64)
    k = torch.arange(N_FFT // 2 + 1, dtype=torch.float64)[:, None]
    angle = 2 * math.pi * k * n / N_FFT
    w = window.double()
    forward = torch.cat([torch.cos(angle) * w, -torch.sin(angle) * w])
    weight = torch.full_like(k, 2.0)
    weight[0], weight[-1] = 1.0, 1.0
    inverse = torch.cat([torch.cos(angle) * weight / N_FFT * w, -torch.sin(angle) * weight / N_FFT * w])
    return forward.float()[:, None], inverse.float()[:, None]


class HiftGraph(nn.Module):
    forward_basis: torch.Tensor
    inverse_basis: torch.Tensor
    envelope_kernel: torch.Tensor

    def __init__(self, hift: Hift) -> None:
        super().__init__()
        self.hift = hift
        forward, inverse = _bases(hift.stft_window)
        self.register_buffer("forward_basis", forward)
        self.register_buffer("inverse_basis", inverse)
        self.register_buffer("envelope_kernel", (hift.stft_window ** 2)[None, None])

    def _spectrum(self, source: torch.Tensor) -> torch.Tensor:
        padded = F.pad(source, (N_FFT // 2, N_FFT // 2), mode="reflect")
        return F.conv1d(padded, self.forward_basis, stride=HOP)

    def _waveform(self, magnitude: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
        spec = torch.cat([magnitude * torch.cos(phase), magnitude * torch.sin(phase)], dim=1)
        wav = F.conv_transpose1d(spec, self.inverse_basis, stride=HOP)
        envelope = F.conv_transpose1d(torch.ones_like(spec[:, :1]), self.envelope_kernel, stride=HOP)
        half = N_FFT // 2
        out: torch.Tensor = (wav / envelope)[:, 0, half:-half]
        return out

    def forward(self, mel: torch.Tensor, phase0: torch.Tensor, noise: torch.Tensor, cache_source: torch.Tensor,
                keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        source = self.hift.source(self.hift.f0_predictor(mel), phase0, noise)
        head = keep * cache_source + (1 - keep) * source[:, :, :SOURCE_CACHE]
        source = torch.cat([head, source[:, :, SOURCE_CACHE:]], dim=2)
        return self.hift.decode(mel, source, self._spectrum, self._waveform), source


def examples(flow: Flow, hift: Hift) -> dict[str, tuple[nn.Module, tuple[torch.Tensor, ...], list[str], list[str],
                                                         dict[str, dict[int, str]]]]:
    """Per graph file: (module, example inputs, input names, output names, dynamic axes)."""
    c = flow.config
    layers, d = c.blocks + c.up_blocks, c.width // c.heads
    att = torch.zeros(layers, 1, c.heads, 8, 2 * d)
    encoder_io = (["codes", "cnn_cache", "att_cache"], ["mu", "cnn_out", "att_out"],
                  {"codes": {1: "n"}, "att_cache": {3: "frames"}, "mu": {2: "m"}, "att_out": {3: "frames_out"}})
    dit = torch.zeros(c.dit_depth, 2, c.dit_heads, 8, 2 * c.dit_head_dim)
    mel = torch.zeros(1, c.mel_bins, 6)
    samples = 12 * 480
    return {
        "encoder.onnx": (EncoderGraph(flow, False).eval(), (torch.zeros(1, 7, dtype=torch.int64),
                                                             torch.zeros(1, c.width, 6), att), *encoder_io),
        "encoder_last.onnx": (EncoderGraph(flow, True).eval(), (torch.zeros(1, 7, dtype=torch.int64),
                                                                torch.zeros(1, c.width, 6), att), *encoder_io),
        "estimator.onnx": (EstimatorGraph(flow).eval(),
                           (mel, mel, torch.zeros(1), torch.zeros(1, c.mel_bins), mel,
                            torch.zeros(c.dit_depth, 2, 2 * c.dit_width, 2), dit),
                           ["x", "mu", "t", "speaker", "cond", "cnn_cache", "att_cache"],
                           ["velocity", "cnn_out", "att_out"],
                           {"x": {2: "m"}, "mu": {2: "m"}, "cond": {2: "m"}, "att_cache": {3: "frames"},
                            "velocity": {2: "m"}, "att_out": {3: "frames_out"}}),
        "hift.onnx": (HiftGraph(hift).eval(),
                      (torch.zeros(1, c.mel_bins, 12), torch.zeros(1, 9), torch.zeros(1, samples, 9),
                       torch.zeros(1, 1, SOURCE_CACHE), torch.zeros(1)),
                      ["mel", "phase0", "noise", "cache_source", "keep"], ["speech", "source"],
                      {"mel": {2: "frames"}, "noise": {1: "samples"}, "speech": {1: "samples"},
                       "source": {2: "samples"}}),
    }


def steady_examples(flow: Flow, cache_frames: int) -> dict[str, tuple[nn.Module, tuple[torch.Tensor, ...], list[str],
                                                                       list[str]]]:
    """The encoder and one Euler step at the shapes of a steady window (a whole window of new
    codes, not the last) whose caches hold `cache_frames` (the HTP takes static shapes):
    `CONTEXT + WINDOW` codes, 2 WINDOW new frames; the step takes the time's features
    (EstimatorGraph). Files encoder_steady_f<frames>.onnx, estimator_steady_f<frames>.onnx."""
    from omni_edge.export.models.minicpmo45.token2wav import CONTEXT, WINDOW

    c = flow.config
    layers, d = c.blocks + c.up_blocks, c.width // c.heads
    def mel() -> torch.Tensor:  # a tensor per input: torch.export reads one tensor passed twice as one input
        return torch.zeros(1, c.mel_bins, 2 * WINDOW)

    return {
        f"encoder_steady_f{cache_frames}.onnx": (EncoderGraph(flow, False).eval(),
                                (torch.zeros(1, CONTEXT + WINDOW, dtype=torch.int64), torch.zeros(1, c.width, 6),
                                 torch.zeros(layers, 1, c.heads, cache_frames, 2 * d)),
                                ["codes", "cnn_cache", "att_cache"], ["mu", "cnn_out", "att_out"]),
        f"estimator_steady_f{cache_frames}.onnx": (EstimatorGraph(flow, time_features=True).eval(),
                                  (mel(), mel(), torch.zeros(1, flow.decoder.estimator.t_embedder.freq),
                                   torch.zeros(1, c.mel_bins), mel(), torch.zeros(c.dit_depth, 2, 2 * c.dit_width, 2),
                                   torch.zeros(c.dit_depth, 2, c.dit_heads, cache_frames, 2 * c.dit_head_dim)),
                                  ["x", "mu", "t_features", "speaker", "cond", "cnn_cache", "att_cache"],
                                  ["velocity", "cnn_out", "att_out"]),
    }


def as_numpy(x: Any) -> np.ndarray:
    return np.ascontiguousarray(x.numpy() if isinstance(x, torch.Tensor) else x, np.float32)
