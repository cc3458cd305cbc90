"""The real media MiniCPM-o 4.5's checks run on: the roadmap's red square and 440 Hz tone, a
photo (matplotlib's Grace Hopper, sliced into a grid; also stretched wide for a 3x1 grid) and
recorded speech (pocketsphinx-testdata's LibriVox clips, one alone and several joined past 30 s
so that the audio encoder's pieces split)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

LIBRIVOX = Path("/usr/share/pocketsphinx/test/data/librivox")  # scripts/install_system_deps.sh


def photo() -> object:
    import matplotlib
    from PIL import Image

    return Image.open(Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg").convert("RGB")


def image_inputs() -> list[tuple[str, object]]:
    from PIL import Image

    hopper = photo()
    return [("red_square", Image.new("RGB", (448, 448), (255, 0, 0))), ("hopper", hopper),
            ("hopper_wide", hopper.resize((1000, 400), Image.Resampling.BICUBIC))]


def tone(seconds: float = 2.0, hz: float = 440.0, rate: int = 16000) -> np.ndarray:
    return (0.5 * np.sin(2 * np.pi * hz * np.arange(int(seconds * rate)) / rate)).astype(np.float32)


def speech_clips() -> list[np.ndarray]:
    from omni_edge.runtime.media import read_wav

    return [read_wav(path)[0] for path in sorted(LIBRIVOX.glob("*.wav"))]


def audio_inputs() -> list[tuple[str, np.ndarray]]:
    clips = speech_clips()
    joined = np.concatenate(clips * (1 + int(31 * 16000 // sum(len(c) for c in clips))))[: 33 * 16000 + 77]
    return [("tone", tone()), ("speech", clips[0]), ("speech_33s", joined)]


# The token2wav check (make_fixture.py writes vLLM-Omni's samples, the test makes the port's):
# a flow of the release's widths at a smaller depth, 4 Euler steps, numpy-made inputs.
T2W_SEED = 100  # torch seed of the first window (HiFT's noise); +1 per window


def t2w_config() -> object:
    from omni_edge.export.models.minicpmo45.flow import FlowConfig

    return FlowConfig(blocks=1, up_blocks=1, dit_depth=2)


def check_voice() -> object:
    """A voice prompt: 10 codes, its 20 mel frames, a speaker vector."""
    import torch
    from omni_edge.export.models.minicpmo45.token2wav import Voice

    rng = np.random.default_rng(3)
    return Voice(torch.from_numpy(rng.integers(0, 6561, (1, 10))).long(),
                 torch.from_numpy(rng.standard_normal((1, 192)).astype(np.float32)),
                 torch.from_numpy(rng.standard_normal((1, 20, 80)).astype(np.float32)))


def check_codes() -> list[int]:
    """60 talker codes: two full windows and a last one of 10."""
    return [int(c) for c in np.random.default_rng(4).integers(0, 6561, 60)]


# The HiFT check (make_fixture.py writes vLLM-Omni's samples, the test makes the port's).
HIFT_CHECK = (11, 12)  # torch seeds of the two chunks


def check_mels() -> tuple[Any, Any]:
    """Two mel chunks [1, 80, 40] and [1, 80, 24] (log-mel-like values, numpy's PCG64)."""
    import torch

    rng = np.random.default_rng(7)
    first = torch.from_numpy((rng.standard_normal((1, 80, 40)) * 2 - 4).astype(np.float32))
    second = torch.from_numpy((rng.standard_normal((1, 80, 24)) * 2 - 4).astype(np.float32))
    return first, second
