"""Observation files for `omni-edge act`: what a policy acts on, read strictly.

    {"timestamp_ms": 1764900000000.0,            capture time, ms since the Unix epoch
     "images": {"base_0_rgb": "base.png", ...},  cameras in the prefix's order; files beside OBS.json
     "state": [0.1, -0.3, ...],                  zero-padded to the model's state dim
     "prompt": "pick up the red block",
     "reset_history": false}                     optional: a plan with a frame history starts it again

A camera's image may also be a list of files: its frame history, oldest first (InternVLA-A1's
plans keep one per session and otherwise take only the current frame).

Image paths are relative to the file's directory and may not leave it. The noise (NOISE.npy,
float32 [chunk, action_dim]) is the flow's initial x_1, to compare with a reference."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from omni_edge.files import inside
from omni_edge.runtime.request import CameraImage, Observation

FIELDS = {"timestamp_ms", "images", "state", "prompt", "reset_history"}


def read_noise(path: Path) -> np.ndarray:
    """A float32 2-D .npy (no pickles)."""
    try:
        noise: np.ndarray = np.asarray(np.load(path, allow_pickle=False))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a NumPy .npy array ({exc})") from None
    if noise.dtype != np.float32 or noise.ndim != 2:
        raise ValueError(f"{path}: the noise is a float32 array (chunk, action_dim), got {noise.dtype} {noise.shape}")
    if not np.isfinite(noise).all():
        raise ValueError(f"{path}: the noise holds a NaN or an infinity")
    return noise


def read_observation(path: Path, noise: Path | None = None) -> tuple[Observation, str]:
    """The observation and its prompt, or a ValueError naming the field."""
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a JSON observation ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: an observation is a JSON object")
    unknown = set(data) - FIELDS
    if unknown:
        raise ValueError(f"{path}: unknown fields {sorted(unknown)} (known: {sorted(FIELDS)})")
    stamp = data.get("timestamp_ms")
    if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or not math.isfinite(stamp) or stamp < 0:
        raise ValueError(f"{path}: timestamp_ms: the capture time, milliseconds since the Unix epoch")
    images = data.get("images")
    if not isinstance(images, dict) or not images:
        raise ValueError(f"{path}: images: an object of camera name -> image file")
    cameras = []
    for camera, value in images.items():
        names = value if isinstance(value, list) else [value]
        if not 1 <= len(names) <= 16 or not all(isinstance(n, str) for n in names):
            raise ValueError(f"{path}: images.{camera}: a file name, or a list of 1 to 16 (its frame history, oldest first)")
        for name in names:
            try:
                file = inside(path.parent, name)
            except ValueError as exc:
                raise ValueError(f"{path}: images.{camera}: {exc}") from None
            cameras.append(CameraImage(camera, str(file.resolve())))
    state = data.get("state", [])
    if not isinstance(state, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                              and math.isfinite(v) for v in state):
        raise ValueError(f"{path}: state: a list of finite numbers")
    prompt = data.get("prompt", "")
    if not isinstance(prompt, str):
        raise ValueError(f"{path}: prompt: a string")
    reset = data.get("reset_history", False)
    if not isinstance(reset, bool):
        raise ValueError(f"{path}: reset_history: true or false")
    rows: tuple[tuple[float, ...], ...] = ()
    if noise is not None:
        rows = tuple(tuple(float(v) for v in row) for row in read_noise(noise))
    return Observation(timestamp_ms=float(stamp), images=tuple(cameras), state=tuple(float(v) for v in state),
                       noise=rows, reset_history=reset), prompt
