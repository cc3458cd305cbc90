"""MiniCPM-o 4.5's code2wav stage as vLLM-Omni 0.30.0 streams it (BatchedToken2Wav, fed by the
tts2code2wav bridge): talker codes -> 24 kHz PCM, window by window.

The bridge sends windows of 3 carried codes and 25 new ones (the first window's carried codes
are the silence code 4218; the last window carries whatever remains and says so). Per window the
flow makes 2 mel frames per code it emits (a non-final window's last 3 codes are look-ahead
only), HiFT vocodes them after the previous window's last 8 frames with its source tail as the
cache, the first 3840 samples are cross-faded (Hamming, 7680) with the previous window's tail,
and all but the last 3840 samples are emitted (everything on the last window). The flow's caches
keep the prompt's frames and the last 100 once they grow past that.

The voice is the prompt: its speech codes, its mel (2 frames per code) and its speaker vector,
computed from a WAV when a voice is exported (not yet ported: the S3 tokenizer and CAM++); here
they are given."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from omni_edge.export.models.minicpmo45.flow import Flow, FlowCache, decode_chunk, setup_cache
from omni_edge.export.models.minicpmo45.hift import HARMONICS, SAMPLES_PER_FRAME, Hift, vocode
from omni_edge.runtime import counter_noise

Draws = Callable[[int], tuple[torch.Tensor, torch.Tensor]]  # samples -> (phase0 [1, 9], noise [1, samples, 9])

SILENCE = 4218           # the code the first window's context and the prompt's look-ahead are made of
WINDOW, CONTEXT = 25, 3  # deploy/minicpmo_4_5.yaml: codec_chunk_frames, codec_left_context_frames
MEL_CACHE, SOURCE_CACHE = 8, 8 * 480  # frames and samples carried into the next window's vocoding
KEEP_RECENT = 100        # flow cache frames kept after the prompt's


@dataclass(frozen=True)
class Voice:
    tokens: torch.Tensor   # [1, P] the prompt's speech codes
    speaker: torch.Tensor  # [1, 192]
    mel: torch.Tensor      # [1, 2P, 80]


@dataclass
class StreamState:
    flow: FlowCache
    mel: torch.Tensor     # [1, 80, <= 8]
    source: torch.Tensor  # [1, 1, <= 3840]
    speech: torch.Tensor  # [1, <= 3840]


def windows(codes: list[int]) -> list[tuple[list[int], bool]]:
    """The bridge's windows over a whole utterance: (codes, last). A window goes as soon as
    WINDOW codes wait (the talker's end comes a step later), so the last window may carry only
    the context."""
    out: list[tuple[list[int], bool]] = []
    context = [SILENCE] * CONTEXT
    at = 0
    while len(codes) - at >= WINDOW:
        window = context + codes[at: at + WINDOW]
        out.append((window, False))
        context, at = window[-CONTEXT:], at + WINDOW
    out.append((context + codes[at:], True))
    return out


class CounterDraws:
    """HiFT's noise as the native vocoder draws it (counter_noise, one stream per utterance): per
    window 9 uniforms (the overtones' initial phases; the fundamental's is zeroed), then 9
    normals per sample."""

    def __init__(self, seed: int) -> None:
        self.seed, self.at = seed, 0

    def __call__(self, samples: int) -> tuple[torch.Tensor, torch.Tensor]:
        n = HARMONICS + 1
        phase0 = counter_noise.uniform(self.seed, self.at, n).astype(np.float32)
        phase0[0] = 0
        noise = counter_noise.normal(self.seed, self.at + n, samples * n)
        self.at += n + 2 * samples * n
        return torch.from_numpy(phase0)[None], torch.from_numpy(noise.reshape(1, samples, n))


class Token2Wav:
    """`draws`: HiFT's noise source (None: torch's generator, as upstream draws it)."""

    def __init__(self, flow: Flow, hift: Hift, steps: int = 10, draws: Draws | None = None) -> None:
        self.flow, self.hift, self.steps, self.draws = flow, hift, steps, draws
        self.window = torch.from_numpy(np.hamming(2 * SOURCE_CACHE).astype(np.float32))

    def start(self, voice: Voice) -> StreamState:
        tokens = torch.cat([voice.tokens, torch.full((1, CONTEXT), SILENCE, dtype=voice.tokens.dtype)], dim=1)
        cache = setup_cache(self.flow, tokens, voice.mel, voice.speaker, self.steps)
        return StreamState(cache, torch.zeros(1, voice.mel.shape[2], 0), torch.zeros(1, 1, 0), torch.zeros(1, 0))

    @torch.no_grad()
    def decode(self, voice: Voice, state: StreamState, codes: list[int], last: bool) -> tuple[torch.Tensor, StreamState]:
        """One window's samples [n] and the state after it."""
        mel, cache = decode_chunk(self.flow, torch.tensor([codes]), voice.speaker, state.flow, last, self.steps)
        prompt = voice.mel.shape[1]
        if cache.estimator_att.shape[4] > prompt + KEEP_RECENT:
            att = cache.estimator_att
            cache.estimator_att = torch.cat([att[..., :prompt, :], att[..., -KEEP_RECENT:, :]], dim=4)
        if cache.conformer_att.shape[3] > prompt + KEEP_RECENT:
            att = cache.conformer_att
            cache.conformer_att = torch.cat([att[..., :prompt, :], att[..., -KEEP_RECENT:, :]], dim=3)
        mel = torch.cat([state.mel, mel], dim=2)
        draws = self.draws(mel.shape[2] * SAMPLES_PER_FRAME) if self.draws is not None else None
        speech, source = vocode(self.hift, mel, state.source, draws=draws)
        if state.speech.shape[-1] > 0:
            half = SOURCE_CACHE
            speech = speech.clone()
            speech[..., :half] = speech[..., :half] * self.window[:half] + state.speech[..., -half:] * self.window[half:]
        nxt = StreamState(cache, mel[..., -MEL_CACHE:], source[..., -SOURCE_CACHE:], speech[..., -SOURCE_CACHE:])
        return (speech if last else speech[..., :-SOURCE_CACHE]).reshape(-1), nxt

    def utterance(self, voice: Voice, codes: list[int]) -> torch.Tensor:
        """The whole utterance's samples, window by window."""
        state = self.start(voice)
        out = []
        for window, last in windows(codes):
            samples, state = self.decode(voice, state, window, last)
            out.append(samples)
        return torch.cat(out)


def prompt_mel(samples: np.ndarray) -> torch.Tensor:
    """Step-Audio2's mel of a 24 kHz recording [1, T, 80] (its prompt conditioning): reflect-padded
    by 720, 1920-point periodic-Hann STFT every 480 samples, magnitudes, 80 Slaney mel bands up to
    8 kHz, natural log floored at 1e-5. (Ported from the description of its code, which needs
    torchaudio; not checked against it here.)"""
    from transformers.audio_utils import mel_filter_bank

    y = torch.from_numpy(np.ascontiguousarray(samples, np.float32))[None, None]
    y = torch.nn.functional.pad(y, (720, 720), mode="reflect")[:, 0]
    spec = torch.stft(y, 1920, 480, 1920, window=torch.hann_window(1920), center=False, return_complex=True)
    magnitude = torch.sqrt(spec.real ** 2 + spec.imag ** 2 + 1e-9)
    bank = torch.from_numpy(mel_filter_bank(num_frequency_bins=961, num_mel_filters=80, min_frequency=0.0,
                                            max_frequency=8000.0, sampling_rate=24000, norm="slaney",
                                            mel_scale="slaney").astype(np.float32))
    return torch.log(torch.clamp(bank.T @ magnitude, min=1e-5)).transpose(1, 2)


def stand_in_voice(samples_24k: np.ndarray, seed: int = 0, speaker_dim: int = 192) -> Voice:
    """A voice prompt for checkpoints without the release's voice models (its S3 tokenizer and
    CAM++): the recording's own mel, trimmed to an even number of frames, and seeded codes (one per
    two frames) and speaker vector in place of what those models would say."""
    mel = prompt_mel(samples_24k)
    frames = mel.shape[1] - mel.shape[1] % 2
    g = torch.Generator().manual_seed(seed)
    return Voice(torch.randint(0, SILENCE, (1, frames // 2), generator=g), torch.randn(1, speaker_dim, generator=g),
                 mel[:, :frames].contiguous())
