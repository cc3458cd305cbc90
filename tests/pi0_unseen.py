"""The π0 checkpoint of sizes no preset has, its two cameras, task and action spec: the policy
tests' and the OpenPI server tests' shared scene (their fixtures are in conftest.py), an
observation as openpi-client sends it, and the host's `act` on it."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
from omni_edge.export.models.pi0.checkpoint import Pi0Preset
from paths import RUN
from PIL import Image

CAMERAS = ("front", "wrist")
# Sizes no preset has: 128-pixel images in 16-pixel patches (64 rows per camera), 3 layers of
# 2 heads of 24, a 12-step chunk of 7-dim actions, a 6-dim state.
UNSEEN = Pi0Preset(vocab=768, vision_hidden=48, vision_layers=1, vision_heads=2, patch=16, image_size=128, hidden=96,
                   expert_hidden=48, layers=3, heads=2, head_dim=24, chunk=12, state_dim=6, action_dim=7)
TASK = "stack the green cube"
ACTION_SPEC = {"names": ["x", "y", "z", "roll", "pitch", "yaw", "gripper"],
               "units": ["m", "m", "m", "rad", "rad", "rad", "normalized"], "dt_ms": 33.3}


def observation(scene: dict[str, Any], age_ms: float = 0.0) -> dict[str, Any]:
    """The scene as openpi-client sends it, captured `age_ms` ago."""
    images = {c: np.asarray(Image.open(scene["dir"] / f"{c}.png").convert("RGB")) for c in CAMERAS}
    images["wrist"] = images["wrist"].transpose(2, 0, 1).copy()  # channels first, as openpi's ALOHA example sends
    return {"images": images, "state": np.array(scene["state"], np.float32), "prompt": TASK,
            "timestamp_ms": time.time() * 1000.0 - age_ms, "noise": scene["noise"]}


def act_reference(plan: Path, scene: dict[str, Any], tmp_path: Path) -> np.ndarray:
    """This host's `omni-edge-run act` on the same scene and noise."""
    for c in CAMERAS:  # an observation names files beside it only
        shutil.copy(scene["dir"] / f"{c}.png", tmp_path)
    obs = tmp_path / "obs.json"
    obs.write_text(json.dumps({"timestamp_ms": time.time() * 1000.0, "state": scene["state"], "prompt": TASK,
                               "images": {c: f"{c}.png" for c in CAMERAS}}))
    done = subprocess.run([str(RUN), "act", "--plan", str(plan), "--observation", str(obs), "--noise",
                           str(scene["dir"] / "noise.npy"), "--threads", "1", "--json"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return np.array(json.loads(done.stdout.splitlines()[-1])["actions"], np.float32)
