"""The InternVLA-A1 checkpoint of sizes no preset has (3 layers of 4 heads of 24 with 2 KV heads,
160-pixel frames in 16-pixel patches: 25 rows per camera, a 24-token task, a 12-step chunk, a
7-dim state and action padded to 16), its two cameras with odd-sized frames and a two-frame
history, and vLLM-Omni's own InternVLAA1Policy on that scene (tests/upstream/, in its own
environment: scripts/upstream_env.sh)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
from omni_edge.export.models.internvla_a1.checkpoint import InternVLAPreset
from omni_edge.export.models.internvla_a1.model import CAMERA_SLOTS, CosmosSize, DecoderSize, Sizes, VisionSize
from paths import ROOT
from PIL import Image

CAMERAS = ("front", "wrist")
SIZES = {"front": (200, 300), "wrist": (250, 170)}  # height, width: one wide, one tall (both padded)
UNSEEN = InternVLAPreset(
    Sizes(DecoderSize(96, 160, 3, 4, 2, 24), DecoderSize(48, 96, 3, 4, 2, 24), VisionSize(1, 48, 96, 2, 16, 100),
          CosmosSize(32, (1, 2, 2), 1)),
    chunk=12, state_dim=7, action_dim=7, max_dim=16, image_resolution=160, prompt_tokens=24)
TASK = "stack the green cube on the red one"
ACTION_SPEC = {"names": ["x", "y", "z", "roll", "pitch", "yaw", "gripper"],
               "units": ["m", "m", "m", "rad", "rad", "rad", "normalized"], "dt_ms": 33.3}


def make_scene(root: Path) -> dict[str, Any]:
    """Two frames per camera (the scene moves between them) as PNGs, a state, the noise."""
    rng = np.random.default_rng(11)
    root.mkdir(parents=True, exist_ok=True)
    for camera, (h, w) in SIZES.items():
        yy, xx = np.mgrid[0:h, 0:w]
        texture = rng.integers(0, 256, (h, w))
        for f in range(2):
            rgb = np.stack([(xx * 255 // w + 50 * f) % 256, (yy * 255 // h) ^ (40 * f), np.roll(texture, 7 * f, 0)], -1)
            Image.fromarray(rgb.astype(np.uint8)).save(root / f"{camera}_{f}.png")
    state = rng.standard_normal(UNSEEN.state_dim).astype(np.float32)
    np.save(root / "noise.npy", rng.standard_normal((UNSEEN.chunk, UNSEEN.max_dim)).astype(np.float32))
    (root / "state.json").write_text(json.dumps([float(v) for v in state]))
    return load_scene(root)


def load_scene(root: Path) -> dict[str, Any]:
    return {"dir": root, "state": json.loads((root / "state.json").read_text()), "noise": np.load(root / "noise.npy")}


def frames(scene: dict[str, Any], camera: str, which: tuple[int, ...]) -> np.ndarray:
    """[len(which), 3, H, W] in [0, 1], as vLLM-Omni's batch holds a camera's history."""
    return np.stack([np.asarray(Image.open(scene["dir"] / f"{camera}_{f}.png").convert("RGB"), np.float32)
                     .transpose(2, 0, 1) / 255 for f in which])


def upstream_actions(checkpoint: Path, scene: dict[str, Any], which: tuple[int, int], out: Path) -> np.ndarray:
    """vLLM-Omni's InternVLAA1Policy on the scene with history frames `which` per camera: the
    chunk [chunk, max_action_dim]."""
    source = subprocess.run([str(ROOT / "scripts" / "upstream_env.sh")], capture_output=True, text=True, check=True,
                            timeout=1800).stdout.strip().splitlines()[-1]
    obs: dict[str, Any] = {"task": np.array(TASK), "state": np.array(scene["state"], np.float32),
                           "noise": scene["noise"]}
    for i in range(CAMERA_SLOTS):
        if i < len(CAMERAS):
            obs[f"image{i}"], obs[f"mask{i}"] = frames(scene, CAMERAS[i], which), np.bool_(True)
        else:  # an empty slot, as vLLM-Omni's batch holds one: a black history, masked
            obs[f"image{i}"], obs[f"mask{i}"] = np.zeros((2, 3, 160, 160), np.float32), np.bool_(False)
    np.savez(out / "obs.npz", **obs)
    done = subprocess.run([str(ROOT / "work" / "upstream" / "venv" / "bin" / "python"),
                           str(ROOT / "tests" / "upstream" / "internvla_a1_reference.py"), str(checkpoint),
                           str(out / "obs.npz"), str(out / "ref.npz")], capture_output=True, text=True, timeout=900,
                          env={"VLLM_OMNI_SOURCE": str(ROOT / source), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
                               "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return np.load(out / "ref.npz")["actions"]


def write_observation(scene: dict[str, Any], path: Path, which: tuple[int, ...] = (0, 1), **fields: Any) -> Path:
    images = {c: [f"{c}_{f}.png" for f in which] if len(which) > 1 else f"{c}_{which[0]}.png" for c in CAMERAS}
    path.write_text(json.dumps({"timestamp_ms": time.time() * 1000.0, "images": images, "state": scene["state"],
                                "prompt": TASK, **fields}))
    return path
