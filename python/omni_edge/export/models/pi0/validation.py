"""What a π0 artifact is checked against: each graph against its module (SQNR), and the whole
action chunk through the native session against transformers' sample_actions on a synthetic
observation with fixed noise."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from omni_edge.contracts import ReportCheck
from omni_edge.export.comparison import sqnr_db
from omni_edge.export.models.pi0.graphs import (
    Examples,
    PolicyShape,
)

ACTION_MAX_ABS = 1e-4   # fp32 graphs against transformers, the whole chunk after every step


# ExecuTorch's XNNPACK kernels approximate (its graphs measure 74-84 dB against the modules where
# ONNX Runtime's measure 125-137 dB); ten flow steps then end 1.5e-4 from the reference (tiny).
ACTION_MAX_ABS_BY_RUNTIME = {"onnxruntime": ACTION_MAX_ABS, "executorch": 1e-3}


GRAPH_SQNR_DB = 60.0    # each graph against its module: summation order only


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


def graph_sqnr(examples: Examples, run: Any) -> dict[str, float]:
    """Each graph's worst output SQNR against its module; run(name, feeds) -> outputs."""
    out = {}
    for name, (module, args, inputs, _) in examples.items():
        with torch.no_grad():
            ref = module(*args)
        refs = [r.numpy() for r in (ref if isinstance(ref, tuple) else (ref,))]
        got = run(name, {n: a.numpy() for n, a in zip(inputs, args, strict=True)})
        out[name] = min(sqnr_db(r, o) for r, o in zip(refs, got, strict=True))
    return out


def native_actions(plan: Path, observation: dict[str, Any], threads: int = 0) -> tuple[np.ndarray, dict[str, Any]]:
    """The action chunk and its event from the native session on `plan`, captured now."""
    from omni_edge.runtime import Session
    from omni_edge.runtime.request import CameraImage, Observation, Request

    request = Request(prompt=observation["prompt"], observation=Observation(
        timestamp_ms=time.time() * 1000.0,
        images=tuple(CameraImage(cam, str(p)) for cam, p in observation["images"].items()),
        state=tuple(float(v) for v in observation["state"]),
        noise=tuple(tuple(float(v) for v in row) for row in observation["noise"])))
    events: list[dict[str, Any]] = []
    with Session.open(plan, allow_unqualified=True, threads=threads) as session:
        session.submit(request, lambda stream, event, pcm: events.append(event))
    actions = [e for e in events if e["kind"] == "action"]
    if len(actions) != 1:
        raise RuntimeError(f"the policy session emitted {[e['kind'] for e in events]}, not one action")
    return np.asarray(actions[0]["actions"], np.float32), actions[0]


def agreement_checks(got: np.ndarray, ref: np.ndarray,
                     limit: float = ACTION_MAX_ABS) -> tuple[tuple[ReportCheck, ...], dict[str, Any]]:
    """Max abs and relative error over the chunk, and per step of the chunk."""
    err = np.abs(got - ref)
    per_step_abs = err.max(axis=1)
    per_step_rel = (err / np.maximum(np.abs(ref), 1e-6)).max(axis=1)
    # The gated check: the share of the chunk's values within `limit` of the reference (all).
    checks = (ReportCheck("action_agreement", float((err <= limit).mean()), 1.0, ">="),
              ReportCheck("action_max_abs", float(err.max()), limit, "<="))
    detail = {"per_step_max_abs": [float(v) for v in per_step_abs], "per_step_max_rel": [float(v) for v in per_step_rel],
              "max_abs": float(err.max()), "max_rel": float(per_step_rel.max()),
              "reference_max_abs_value": float(np.abs(ref).max())}
    return checks, detail
