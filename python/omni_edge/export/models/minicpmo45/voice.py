"""A voice prompt from a recording, as Step-Audio2's token2wav prepares it (minicpmo-utils 1.0.0,
`Token2wav._prepare_prompt`, which vLLM-Omni's code2wav stage runs on the reference voice):

- its speech codes: the S3 tokenizer (`speech_tokenizer_v2_25hz.onnx`, in a release's
  `assets/token2wav/`) over the 16 kHz recording's 128-bin log-mel (Whisper's: a periodic Hann
  window of 400 samples every 160, centered, power, Slaney mel bands, log10 floored 8 below its
  maximum, then (x + 4) / 4);
- its speaker vector: CAM++ (`campplus.onnx`) over the 80-bin Kaldi filterbank (25 ms Povey
  windows every 10 ms, DC removed, pre-emphasis 0.97, 512-point power spectrum, Kaldi mel bands
  from 20 Hz to 8 kHz, natural log), minus its mean over time;
- its mel: the 24 kHz recording's (token2wav.prompt_mel), the last frame repeated (or frames
  cut) to 2 per code.

Both models run on ONNX Runtime at export time, as CosyVoice's frontend runs them; a voice is an
artifact, so none of this runs on the device. Without the models (none can be downloaded here)
the codes and speaker vector are seeded stand-ins (token2wav.stand_in_voice)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from omni_edge.export.models.minicpmo45.token2wav import Voice, prompt_mel

TOKENIZER, SPEAKER = "speech_tokenizer_v2_25hz.onnx", "campplus.onnx"
MAX_SECONDS = 30  # the tokenizer's one-piece limit (3000 mel frames)


def s3_log_mel(samples_16k: np.ndarray, n_mels: int = 128) -> np.ndarray:
    """[n_mels, frames]: the S3 tokenizer's input."""
    from transformers.audio_utils import mel_filter_bank

    audio = torch.from_numpy(np.array(samples_16k, np.float32))  # a copy: the input may be read-only
    spec = torch.stft(audio, 400, 160, window=torch.hann_window(400), return_complex=True)
    power = spec[..., :-1].abs() ** 2
    bank = mel_filter_bank(num_frequency_bins=201, num_mel_filters=n_mels, min_frequency=0.0, max_frequency=8000.0,
                           sampling_rate=16000, norm="slaney", mel_scale="slaney")
    mel = torch.from_numpy(bank.T.astype(np.float32)) @ power
    log = torch.clamp(mel, min=1e-10).log10()
    log = torch.maximum(log, log.max() - 8.0)
    return ((log + 4.0) / 4.0).numpy()


def _kaldi_mel_banks(bins: int, fft: int, rate: int, low: float, high: float) -> np.ndarray:
    """[bins, fft // 2 + 1]: Kaldi's triangular bands on its mel scale (1127 ln(1 + f / 700)),
    the Nyquist bin weightless."""
    def mel(f: np.ndarray | float) -> np.ndarray:
        return 1127.0 * np.log(1.0 + np.asarray(f, np.float64) / 700.0)

    lo, hi = float(mel(low)), float(mel(high))
    delta = (hi - lo) / (bins + 1)
    freqs = mel(np.arange(fft // 2) * rate / fft)
    banks = np.zeros((bins, fft // 2 + 1))
    for b in range(bins):
        left, center, right = lo + b * delta, lo + (b + 1) * delta, lo + (b + 2) * delta
        up = (freqs - left) / (center - left)
        down = (right - freqs) / (right - center)
        banks[b, : fft // 2] = np.maximum(0.0, np.minimum(up, down))
    return banks


def kaldi_fbank(samples_16k: np.ndarray, bins: int = 80) -> np.ndarray:
    """[frames, bins]: Kaldi's log filterbank with torchaudio.compliance.kaldi.fbank's defaults
    (dither 0, as upstream asks)."""
    x = np.asarray(samples_16k, np.float64)
    length, shift, fft = 400, 160, 512
    if x.size < length:
        raise ValueError(f"a voice recording of {x.size / 16000:.3f} s is shorter than one 25 ms frame")
    frames = 1 + (x.size - length) // shift
    index = np.arange(length)[None, :] + shift * np.arange(frames)[:, None]
    f = x[index]
    f = f - f.mean(axis=1, keepdims=True)
    f = f - 0.97 * np.concatenate([f[:, :1], f[:, :-1]], axis=1)
    window = (0.5 - 0.5 * np.cos(2 * math.pi * np.arange(length) / (length - 1))) ** 0.85
    power = np.abs(np.fft.rfft(f * window, n=fft, axis=1)) ** 2
    energies = power @ _kaldi_mel_banks(bins, fft, 16000, 20.0, 8000.0).T
    out: np.ndarray = np.log(np.maximum(energies, np.finfo(np.float32).eps)).astype(np.float32)
    return out


def voice_models(checkpoint: Path) -> tuple[Path, Path] | None:
    """The release's voice models beside its token2wav files, if it ships them."""
    directory = checkpoint / "assets" / "token2wav"
    tokenizer, speaker = directory / TOKENIZER, directory / SPEAKER
    return (tokenizer, speaker) if tokenizer.is_file() and speaker.is_file() else None


def release_voice(models: tuple[Path, Path], samples_16k: np.ndarray, samples_24k: np.ndarray) -> Voice:
    """The voice of a recording through the release's S3 tokenizer and CAM++ (ONNX Runtime)."""
    from omni_edge.export.targets.onnx_target import cpu_session

    if samples_16k.size > MAX_SECONDS * 16000:
        raise ValueError(f"a voice recording of {samples_16k.size / 16000:.1f} s: at most {MAX_SECONDS} s (one tokenizer piece)")
    mel = s3_log_mel(samples_16k)
    tokenizer = cpu_session(models[0])
    names = [i.name for i in tokenizer.get_inputs()]
    codes = tokenizer.run(None, {names[0]: mel[None], names[1]: np.array([mel.shape[1]], np.int32)})[0]
    codes = np.asarray(codes, np.int64).reshape(1, -1)
    feats = kaldi_fbank(samples_16k)
    feats = feats - feats.mean(axis=0, keepdims=True)
    speaker_model = cpu_session(models[1])
    speaker = speaker_model.run(None, {speaker_model.get_inputs()[0].name: feats[None]})[0].reshape(1, -1)
    prompt = prompt_mel(samples_24k)  # [1, frames, 80]
    frames = 2 * codes.shape[1]
    if prompt.shape[1] < frames:  # upstream pads by repeating the last frame
        prompt = torch.cat([prompt, prompt[:, -1:].expand(1, frames - prompt.shape[1], prompt.shape[2])], dim=1)
    return Voice(torch.from_numpy(codes), torch.from_numpy(np.asarray(speaker, np.float32)),
                 prompt[:, :frames].contiguous())
