"""What a π0 artifact is checked against: each graph against its module (SQNR), and the whole
action chunk through the native session against transformers' sample_actions on a synthetic
observation with fixed noise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from omni_edge.export.models.pi0.graphs import PolicyShape

TASK = "pick up the red block"


def synthetic_observation(directory: Path, shape: PolicyShape, seed: int = 0) -> dict[str, Any]:
    """Two differently sized gradient images (one wider, one taller than square), a state
    shorter than the model's (zero-padded), fixed noise; written as PNGs."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    images = {}
    for k, camera in enumerate(shape.cameras):
        w, h = (320, 240) if k % 2 == 0 else (200, 260)
        yy, xx = np.mgrid[0:h, 0:w]
        rgb = np.stack([(xx * 255 // w), (yy * 255 // h), (rng.integers(0, 256, (h, w)))], -1).astype(np.uint8)
        path = directory / f"{camera}.png"
        Image.fromarray(rgb).save(path)
        images[camera] = path
    state = rng.standard_normal(max(1, shape.state_dim - 2)).astype(np.float32)
    noise = rng.standard_normal((shape.chunk, shape.action_dim)).astype(np.float32)
    return {"images": images, "state": state, "noise": noise, "prompt": TASK}


