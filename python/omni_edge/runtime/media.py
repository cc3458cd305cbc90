"""Media as the encoders read them, computed by the controller's native code (the same code a
device runs): images for a Qwen2-VL-style vision encoder, audio for a Whisper-style one; and
WAV files as the exporters, tests and the harness read and write them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from omni_edge import _native


def mrope_positions(prompt: list[int], thinker_config: dict[str, Any],
                    image_grids: list[tuple[int, int, int]]) -> tuple[np.ndarray, int]:
    """The thinker's three position rows for `prompt` ([3, len(prompt)]; images' (t, h, w) grids in
    patches, in order) and the position the first generated token takes."""
    rows, next_position = _native.mrope_positions(list(prompt), json.dumps(thinker_config), list(image_grids))
    return np.array(rows, np.int64), next_position


def preprocess_image(image: np.ndarray, config: dict[str, Any]) -> tuple[np.ndarray, tuple[int, int, int]]:
    """An 8-bit RGB image (height, width, 3) as the vision encoder reads it, by the image fields of
    a checkpoint's preprocessor_config.json: float32 patches [t*h*w, 3*T*P*P] and the grid (t, h, w)."""
    pixels = np.ascontiguousarray(image, dtype=np.uint8)
    if pixels.ndim != 3 or pixels.shape[2] != 3:
        raise ValueError(f"an RGB image is (height, width, 3), got {pixels.shape}")
    raw, t, h, w = _native.preprocess_image(pixels.tobytes(), pixels.shape[1], pixels.shape[0], json.dumps(config))
    return np.frombuffer(raw, np.float32).reshape(t * h * w, -1), (t, h, w)


def decode_wav(wav: bytes) -> tuple[np.ndarray, int]:
    """A WAV file's samples (float32, channels averaged) and rate, read natively."""
    raw, rate = _native.decode_wav(wav)
    return np.frombuffer(raw, np.float32), int(rate)


def resample(samples: np.ndarray, rate: int, target: int) -> np.ndarray:
    """float32 samples at `target` Hz, by the reference's polyphase filter (scipy's resample_poly)."""
    raw = _native.resample(np.ascontiguousarray(samples, np.float32).tobytes(), rate, target)
    return np.frombuffer(raw, np.float32)


def audio_features(wav: bytes, config: dict[str, Any]) -> np.ndarray:
    """A WAV file as a Whisper-style encoder reads it, by the audio fields of a checkpoint's
    preprocessor_config.json: decoded, resampled to its rate, log-mel [mel, frames] (the audio's
    frames; the padding of the 30 s window is not returned)."""
    raw, mel, frames = _native.audio_features(wav, json.dumps(config))
    return np.frombuffer(raw, np.float32).reshape(mel, frames)


def read_wav(path: Path) -> tuple[np.ndarray, int]:
    """A PCM WAV (8/16/32-bit integer, mono or interleaved channels averaged) as float32 and its rate."""
    import wave

    with wave.open(str(path)) as w:
        width, channels, rate, frames = w.getsampwidth(), w.getnchannels(), w.getframerate(), w.readframes(w.getnframes())
    dtype = {1: np.uint8, 2: np.int16, 4: np.int32}.get(width)
    if dtype is None:
        raise ValueError(f"{path}: {8 * width}-bit samples are not supported")
    x = np.frombuffer(frames, dtype).astype(np.float64)
    x = (x - 128) / 128 if width == 1 else x / float(1 << (8 * width - 1))
    return x.reshape(-1, channels).mean(axis=1).astype(np.float32), rate


def wav_bytes(samples: np.ndarray, rate: int) -> bytes:
    """Samples in [-1, 1] as a 16-bit mono PCM WAV file (clipped)."""
    import io
    import wave

    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.clip(samples, -1, 1) * 32767).astype(np.int16).tobytes())
    return buffer.getvalue()
