"""What an InternVLA-A1 artifact is checked against: each graph against its module (SQNR), and
the whole chunk through the native session against reference.sample_actions (itself held to
vLLM-Omni's policy by the tests) on a synthetic observation: differently sized frames per
camera, a two-frame history given explicitly, a short state, fixed noise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from omni_edge.export.models.internvla_a1.graphs import PolicyShape
from omni_edge.export.models.internvla_a1.model import CAMERA_SLOTS, HISTORY
from omni_edge.export.models.internvla_a1.reference import Observation

TASK = "put the red block in the bowl"
SIZES = ((240, 320), (260, 200), (300, 300))  # height, width per camera: wider, taller, square


def synthetic_observation(directory: Path, shape: PolicyShape, seed: int = 0) -> tuple[dict[str, Any], Observation]:
    """PNG frames per camera (the scene shifted between frames), the observation as the native
    session takes it, and as reference.sample_actions does."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    files: dict[str, list[Path]] = {}
    frames: list[np.ndarray | None] = [None] * CAMERA_SLOTS
    for k, camera in enumerate(shape.cameras):
        h, w = SIZES[k % len(SIZES)]
        yy, xx = np.mgrid[0:h, 0:w]
        noise = rng.integers(0, 256, (h, w))
        stack = []
        for f in range(HISTORY):
            rgb = np.stack([(xx * 255 // w + 37 * f) % 256, yy * 255 // h, np.roll(noise, 9 * f, axis=1)], -1)
            path = directory / f"{camera}_{f}.png"
            Image.fromarray(rgb.astype(np.uint8)).save(path)
            files.setdefault(camera, []).append(path)
            stack.append(np.asarray(Image.open(path).convert("RGB"), np.float32).transpose(2, 0, 1) / 255)
        frames[k] = np.stack(stack)
    state = rng.standard_normal(max(1, shape.state_dim - 1)).astype(np.float32)
    noise_x = rng.standard_normal((shape.chunk, shape.max_action_dim)).astype(np.float32)
    native = {"images": files, "state": state, "noise": noise_x, "prompt": TASK}
    return native, Observation(frames, state, TASK, noise_x)
