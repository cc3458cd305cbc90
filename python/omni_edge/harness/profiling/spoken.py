"""Spoken input with known boundaries, for the duplex workload and the voice tests: espeak-ng
(Debian's) says each sentence, resampled to the rate a realtime client sends (scipy's
resample_poly) and set between silences of given lengths; each sentence's first and last
audible samples are its boundaries."""

from __future__ import annotations

import io
import shutil
import subprocess
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class Utterance:
    samples: np.ndarray  # float32 in [-1, 1]
    rate: int
    spans_ms: list[tuple[float, float]]  # each sentence's first and last audible sample

    def pcm16(self) -> bytes:
        return bytes((np.clip(self.samples, -1, 1) * 32767).astype("<i2").tobytes())

    def write_wav(self, path: Path) -> Path:
        with wave.open(str(path), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(self.rate)
            w.writeframes(self.pcm16())
        return path


def espeak(text: str, rate: int = 24000) -> np.ndarray:
    """espeak-ng's voice saying `text` at `rate`, float32."""
    from scipy.signal import resample_poly  # type: ignore[import-untyped]

    if shutil.which("espeak-ng") is None:
        raise ValueError("espeak-ng is not installed (Debian: apt-get install espeak-ng): it speaks the duplex workload")
    done = subprocess.run(["espeak-ng", "-v", "en-us", "-s", "150", "--stdout", text], capture_output=True, check=True)
    with wave.open(io.BytesIO(done.stdout)) as w:
        source = w.getframerate()
        x = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768.0
    g = int(np.gcd(source, rate))
    return np.asarray(resample_poly(x, rate // g, source // g), np.float32)


def spoken(parts: list[str | float], rate: int = 24000, floor: float = 0.01) -> Utterance:
    """Sentences (str) and silences (float seconds) in order."""
    pieces, spans, at = [], [], 0
    for part in parts:
        if isinstance(part, str):
            x = espeak(part, rate)
            audible = np.nonzero(np.abs(x) > floor)[0]
            spans.append(((at + audible[0]) * 1000 / rate, (at + audible[-1]) * 1000 / rate))
        else:
            x = np.zeros(round(part * rate), np.float32)
        pieces.append(x)
        at += len(x)
    return Utterance(np.concatenate(pieces), rate, spans)


def white_noise(seconds: float, rate: int = 24000, level: float = 0.05, seed: int = 0) -> Utterance:
    x = (level * np.random.default_rng(seed).standard_normal(round(seconds * rate))).astype(np.float32)
    return Utterance(x, rate, [])
