"""Media as the encoders read them, computed by the controller's native code (the same code a
device runs): images for a Qwen2-VL-style vision encoder."""

from __future__ import annotations

import json
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
