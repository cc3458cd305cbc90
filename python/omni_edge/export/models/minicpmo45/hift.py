"""The HiFT vocoder of MiniCPM-o 4.5's token2wav (Step-Audio2's, CosyVoice2's HiFTGenerator as
vLLM-Omni 0.30.0 builds it: 24 kHz, 480 samples per 50 Hz mel frame), as a PyTorch reference.

mel [1, 80, T] -> f0 (five weight-normalized convolutions with ELU, a linear, |.|) -> a
harmonic source at 24 kHz (f0 and its 8 overtones: phases accumulated at the frame rate and
interpolated, a random initial phase per overtone, Gaussian noise, mixed by a linear + tanh;
the first samples replaced by the previous chunk's source when streaming) -> its STFT (16-point,
hop 4) added after each of three transposed-convolution upsamplings (x8, x5, x3) with
multi-receptive-field residual blocks (Snake activations) -> magnitude and phase -> inverse STFT,
clamped to +-0.99: 480 T samples.

The noise is the reference's only randomness: `vocode` draws it as vLLM-Omni does (the initial
phases, then the source's Gaussian noise, from torch's generator), so equal seeds give equal
audio; exported graphs will take it as an input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.parametrizations import weight_norm

SAMPLE_RATE = 24000
UPSAMPLE_RATES = (8, 5, 3)
UPSAMPLE_KERNELS = (16, 11, 7)
N_FFT, HOP = 16, 4
SAMPLES_PER_FRAME = 8 * 5 * 3 * HOP  # 480
HARMONICS = 8
RESBLOCK_KERNELS = (3, 7, 11)
SOURCE_KERNELS = (7, 7, 11)
DILATIONS = (1, 3, 5)
SINE_AMP, NOISE_STD, VOICED_THRESHOLD = 0.1, 0.003, 10.0
AUDIO_LIMIT = 0.99
Transform = Callable[[torch.Tensor], torch.Tensor]
Inverse = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class HiftConfig:
    mel_bins: int = 80
    base_channels: int = 512  # the release's; halved at each upsampling
    f0_channels: int = 512


class Snake(nn.Module):
    """x + sin^2(alpha x) / alpha, alpha per channel (`alpha`)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.alpha[None, :, None]
        return x + (1.0 / (a + 1e-9)) * torch.sin(x * a) ** 2


def _same(kernel: int, dilation: int = 1) -> int:
    return (kernel * dilation - dilation) // 2


class ResBlock(nn.Module):
    def __init__(self, channels: int, kernel: int) -> None:
        super().__init__()
        self.convs1 = nn.ModuleList(weight_norm(nn.Conv1d(channels, channels, kernel, dilation=d, padding=_same(kernel, d)))
                                    for d in DILATIONS)
        self.convs2 = nn.ModuleList(weight_norm(nn.Conv1d(channels, channels, kernel, padding=_same(kernel)))
                                    for _ in DILATIONS)
        self.activations1 = nn.ModuleList(Snake(channels) for _ in DILATIONS)
        self.activations2 = nn.ModuleList(Snake(channels) for _ in DILATIONS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for c1, c2, a1, a2 in zip(self.convs1, self.convs2, self.activations1, self.activations2, strict=True):
            x = x + c2(a2(c1(a1(x))))
        return x


class F0Predictor(nn.Module):
    def __init__(self, mel_bins: int, channels: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for c in (mel_bins, channels, channels, channels, channels):
            layers += [weight_norm(nn.Conv1d(c, channels, 3, padding=1)), nn.ELU()]
        self.condnet = nn.Sequential(*layers)
        self.classifier = nn.Linear(channels, 1)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.classifier(self.condnet(mel).transpose(1, 2)).squeeze(-1).abs()
        return out


class _Source(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l_linear = nn.Linear(HARMONICS + 1, 1)


class Hift(nn.Module):
    """Names as the release's hift.pt (after its `generator.` prefix)."""

    stft_window: torch.Tensor

    def __init__(self, c: HiftConfig = HiftConfig()) -> None:
        super().__init__()
        base = c.base_channels
        self.f0_predictor = F0Predictor(c.mel_bins, c.f0_channels)
        self.m_source = _Source()
        self.conv_pre = weight_norm(nn.Conv1d(c.mel_bins, base, 7, padding=3))
        self.ups = nn.ModuleList(weight_norm(nn.ConvTranspose1d(base >> i, base >> (i + 1), k, u, padding=(k - u) // 2))
                                 for i, (u, k) in enumerate(zip(UPSAMPLE_RATES, UPSAMPLE_KERNELS, strict=True)))
        # The source's STFT is brought to each stage's rate: strides 15, 3, 1 (its hop is 4 samples).
        downs = (15, 3, 1)
        self.source_downs = nn.ModuleList(
            nn.Conv1d(N_FFT + 2, base >> (i + 1), 2 * u, u, padding=u // 2) if u > 1 else nn.Conv1d(N_FFT + 2, base >> (i + 1), 1)
            for i, u in enumerate(downs))
        self.source_resblocks = nn.ModuleList(ResBlock(base >> (i + 1), k) for i, k in enumerate(SOURCE_KERNELS))
        self.resblocks = nn.ModuleList(ResBlock(base >> (i + 1), k) for i in range(3) for k in RESBLOCK_KERNELS)
        self.conv_post = weight_norm(nn.Conv1d(base >> 3, N_FFT + 2, 7, padding=3))
        window = np.hanning(N_FFT + 1)[:-1]  # periodic Hann (scipy's get_window("hann", 16))
        self.register_buffer("stft_window", torch.from_numpy(window.astype(np.float32)), persistent=False)

    def source(self, f0: torch.Tensor, phase0: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """The excitation [1, 1, 480 T] of f0 [1, T]: phase0 [1, 9] the overtones' initial phases (in
        turns; the fundamental's 0), noise [1, 480 T, 9] standard normal."""
        scale = SAMPLES_PER_FRAME
        f0 = F.interpolate(f0[:, None], scale_factor=float(scale)).transpose(1, 2)  # nearest: [1, L, 1]
        harmonics = f0 * torch.arange(1, HARMONICS + 2, dtype=torch.float32)[None, None]
        rad = (harmonics / SAMPLE_RATE) % 1
        rad[:, 0, :] = rad[:, 0, :] + phase0
        rad = F.interpolate(rad.transpose(1, 2), scale_factor=1 / scale, mode="linear").transpose(1, 2)
        phase = torch.cumsum(rad, dim=1) * 2 * np.pi
        phase = F.interpolate(phase.transpose(1, 2) * scale, scale_factor=float(scale), mode="linear").transpose(1, 2)
        sines = torch.sin(phase) * SINE_AMP
        voiced = (f0 > VOICED_THRESHOLD).float()
        noise_amp = voiced * NOISE_STD + (1 - voiced) * SINE_AMP / 3
        waves = sines * voiced + noise_amp * noise
        out: torch.Tensor = torch.tanh(self.m_source.l_linear(waves)).transpose(1, 2)
        return out

    def spectrum(self, source: torch.Tensor) -> torch.Tensor:
        """The source's STFT [1, 18, frames]: real parts, then imaginary parts."""
        spec = torch.view_as_real(torch.stft(source.squeeze(1), N_FFT, HOP, N_FFT, window=self.stft_window,
                                             return_complex=True))
        return torch.cat([spec[..., 0], spec[..., 1]], dim=1)

    def waveform(self, magnitude: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
        """The inverse STFT of magnitude and phase [1, 9, frames]."""
        return torch.istft(torch.complex(magnitude * torch.cos(phase), magnitude * torch.sin(phase)), N_FFT, HOP, N_FFT,
                           window=self.stft_window)

    def decode(self, mel: torch.Tensor, source: torch.Tensor, spectrum: Transform | None = None,
               waveform: Inverse | None = None) -> torch.Tensor:
        """`spectrum`, `waveform`: other implementations of the two transforms (the graphs')."""
        s = (spectrum or self.spectrum)(source)
        x = self.conv_pre(mel)
        for i, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, 0.1))
            if i == len(self.ups) - 1:
                x = F.pad(x, (1, 0), mode="reflect")
            x = x + self.source_resblocks[i](self.source_downs[i](s))
            x = sum(self.resblocks[3 * i + j](x) for j in range(3)) / 3
        x = self.conv_post(F.leaky_relu(x))
        magnitude = torch.clip(torch.exp(x[:, : N_FFT // 2 + 1]), max=1e2)
        phase = torch.sin(x[:, N_FFT // 2 + 1:])
        out: torch.Tensor = torch.clamp((waveform or self.waveform)(magnitude, phase), -AUDIO_LIMIT, AUDIO_LIMIT)
        return out


@torch.no_grad()
def vocode(hift: Hift, mel: torch.Tensor, cache_source: torch.Tensor | None = None,
           generator: torch.Generator | None = None,
           draws: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(speech [1, 480 T], source [1, 1, 480 T]) of mel [1, 80, T], the noise drawn as vLLM-Omni's
    HiFTGenerator.inference draws it, or `draws` (phase0 [1, 9] with phase0[0] = 0, noise
    [1, 480 T, 9]: what a native stage drew); `cache_source`: the previous chunk's source tail,
    which replaces the first samples of this one's."""
    f0 = hift.f0_predictor(mel)
    samples = mel.shape[2] * SAMPLES_PER_FRAME
    if draws is not None:
        phase0, noise = draws
    else:
        phase0 = torch.rand(1, HARMONICS + 1, generator=generator)
        phase0[:, 0] = 0
        # vLLM-Omni draws it with randn_like of its sine waves, a transposed tensor whose strides
        # decide which value lands where: drawn the same way.
        noise = torch.randn_like(torch.empty(1, HARMONICS + 1, samples).transpose(1, 2), generator=generator)
        torch.randn(1, samples, 1, generator=generator)  # the source module's unused noise branch: drawn all the same
    source = hift.source(f0, phase0, noise)
    if cache_source is not None and cache_source.shape[2]:
        source[:, :, : cache_source.shape[2]] = cache_source
    return hift.decode(mel, source), source


def random_hift(config: HiftConfig = HiftConfig(), seed: int = 0) -> Hift:
    """A HiFT with weights drawn from numpy's PCG64 (the same on every machine): what the checks
    against vLLM-Omni's HiFTGenerator load into both (no release weights can be downloaded here)."""
    hift = Hift(config).eval()
    rng = np.random.default_rng(seed)
    state = hift.state_dict()
    for name, tensor in state.items():
        if name == "f0_predictor.classifier.bias":  # a voice's f0 (80-250 Hz): the harmonic source runs
            values = np.full(tensor.shape, 160.0)
        elif name == "f0_predictor.classifier.weight":
            values = rng.standard_normal(tensor.shape) * 8.0 / np.sqrt(tensor.shape[1])
        elif name.endswith("alpha"):
            values = 1.0 + 0.1 * rng.standard_normal(tensor.shape)
        elif name.endswith("original0"):  # weight-norm gains; conv_post's small, so that its magnitudes
            values = (0.5 + rng.random(tensor.shape)) * (0.02 if name.startswith("conv_post") else 1.0)  # stay unclipped
        else:
            fan_in = int(np.prod(tensor.shape[1:])) if tensor.dim() > 1 else 1
            values = rng.standard_normal(tensor.shape) / np.sqrt(max(fan_in, 1)) * (0.5 if tensor.dim() > 1 else 0.02)
        state[name] = torch.from_numpy(values.astype(np.float32))
    hift.load_state_dict(state)
    return hift

