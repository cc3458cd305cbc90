#!/usr/bin/env python
"""InternVLA-A1 benchmark: one observation (two cameras, a two-frame history of 640x480 frames, a
state, a task) to one action chunk, natively (the export's plans: ONNX Runtime and the ExecuTorch
program) and, as the peer, vLLM-Omni 0.30.0's own InternVLAA1Policy in PyTorch (its environment:
scripts/upstream_env.sh). Each system in its own process, same threads, same noise.

Reported per system (medians over the requests after a warm-up one): the request, and its parts
(native: on the controller's clock; vLLM-Omni: its own methods, timed; its preprocessing is the
processor's part, after its resize_with_pad) -- preprocessing, the
vision tower, Cosmos on the history's frames, the context (prefix and history experts), one flow
step -- the process's peak RSS, and the chunk's max abs difference from vLLM-Omni's.

The native rows give each camera's whole history with every request (as vLLM-Omni's batch does:
Cosmos encodes every frame every time); "session history" gives the current frame only and the
session keeps the previous frame's Cosmos rows, as a robot's control loop runs it.

    python benchmarks/internvla_act.py                      # small, results/internvla_act_small.json
    python benchmarks/internvla_act.py --preset tiny --requests 5

Makes the checkpoint and exports it when missing (work/bench-internvla-<preset>*).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import omni_edge, peak_rss_mb, run_worker  # benchmarks/common.py (the script's folder is on sys.path)
from omni_edge.files import write_text_atomic

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = ("native, ONNX Runtime", "native, ONNX Runtime, session history", "native, ExecuTorch (XNNPACK)",
           "vLLM-Omni InternVLAA1Policy (PyTorch)")
CAMERAS = ("front", "wrist")
TASK = "pick up the red block and put it in the bowl"
PARTS = ("preprocess_ms", "vision_ms", "frame_ms", "context_ms", "step_ms", "total_ms")


def scene(directory: Path, plan: Path) -> dict[str, Any]:
    """Two 640x480 noise frames per camera (the second shifted), a state, fixed noise."""
    from PIL import Image

    section = json.loads(plan.read_text())["stages"][0]["internvla"]
    rng = np.random.default_rng(0)
    directory.mkdir(parents=True, exist_ok=True)
    files: dict[str, list[Path]] = {}
    for camera in CAMERAS:
        base = rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)
        for f in range(2):
            path = directory / f"{camera}_{f}.png"
            Image.fromarray(np.roll(base, 8 * f, axis=1)).save(path)
            files.setdefault(camera, []).append(path)
    state = [round(float(v), 4) for v in rng.standard_normal(section["state_dim"])]
    noise = rng.standard_normal((section["chunk_size"], section["max_action_dim"])).astype(np.float32)
    return {"files": files, "state": state, "noise": noise, "resolution": section["image_resolution"],
            "action_dim": section["action_dim"]}


def run_native(args: argparse.Namespace, plan: Path, s: dict[str, Any], keep_history: bool) -> tuple[list[dict[str, Any]], Any]:
    from omni_edge.runtime import PolicySession
    from omni_edge.runtime.request import CameraImage, Observation

    session = PolicySession.open(plan, threads=args.threads)
    runs, actions = [], None
    for i in range(args.requests + 1):
        # Session history: frame 0 at the warm-up, then frame 1 alone (the session's history is
        # [0, 1] at the first request, [1, 1] after).
        which = (slice(None) if not keep_history else slice(0, 1) if i == 0 else slice(1, 2))
        images = tuple(CameraImage(c, str(p)) for c in CAMERAS for p in s["files"][c][which])
        obs = Observation(timestamp_ms=time.time() * 1000, images=images, state=tuple(s["state"]),
                          noise=tuple(tuple(float(v) for v in r) for r in s["noise"]))
        start = time.perf_counter()
        a = session.act(obs, TASK)
        t = a["timings"]
        runs.append({"total_ms": 1000 * (time.perf_counter() - start), "preprocess_ms": t["preprocess_ms"],
                     "vision_ms": t["vision_ms"], "frame_ms": t["frame_ms"], "context_ms": t["context_ms"],
                     "step_ms": statistics.median(t["step_ms"])})
        if i == 1:  # the history [0, 1] in every row: the chunk compared with vLLM-Omni's
            actions = a["actions"]
    return runs[1:], actions


def run_upstream(args: argparse.Namespace, s: dict[str, Any]) -> tuple[list[dict[str, Any]], Any, float]:
    """vLLM-Omni's policy in its own environment on the same frames (float [0, 1], as its batch holds them)."""
    from PIL import Image

    source = subprocess.run([str(ROOT / "scripts" / "upstream_env.sh")], capture_output=True, text=True,
                            check=True).stdout.strip().splitlines()[-1]
    h, w = s["resolution"]
    obs: dict[str, Any] = {"task": np.array(TASK), "state": np.array(s["state"], np.float32), "noise": s["noise"]}
    for i in range(3):
        if i < len(CAMERAS):
            obs[f"image{i}"] = np.stack([np.asarray(Image.open(p).convert("RGB"), np.float32).transpose(2, 0, 1) / 255
                                         for p in s["files"][CAMERAS[i]]])
            obs[f"mask{i}"] = np.bool_(True)
        else:
            obs[f"image{i}"], obs[f"mask{i}"] = np.zeros((2, 3, h, w), np.float32), np.bool_(False)
    np.savez(args.work / "obs.npz", **obs)
    done = subprocess.run([str(ROOT / "work" / "upstream" / "venv" / "bin" / "python"),
                           str(ROOT / "tests" / "upstream" / "internvla_a1_reference.py"), str(args.checkpoint),
                           str(args.work / "obs.npz"), str(args.work / "upstream.npz"), str(args.requests),
                           str(args.threads)], capture_output=True, text=True,
                          env={"VLLM_OMNI_SOURCE": str(ROOT / source), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    out = np.load(args.work / "upstream.npz")
    runs = []
    for calls in json.loads(str(out["timings"])):
        runs.append({"total_ms": calls["total_ms"][0], "preprocess_ms": sum(calls["preprocess_ms"]),
                     "vision_ms": sum(calls["vision_ms"]), "frame_ms": sum(calls["frame_ms"]),
                     "context_ms": sum(calls["prefix_ms"]) + sum(calls["history_ms"]),
                     "step_ms": statistics.median(calls["step_ms"])})
    return runs, out["actions"][:, :s["action_dim"]].tolist(), float(out["peak_rss_mb"])


def worker(args: argparse.Namespace) -> None:
    s = scene(args.work / "scene", args.art / "plan.json")
    if args.system == 3:  # its own process's peak
        runs, actions, rss = run_upstream(args, s)
    else:
        plan = args.art / ("plan.pte.json" if args.system == 2 else "plan.json")
        runs, actions = run_native(args, plan, s, keep_history=args.system == 1)
        rss = peak_rss_mb()
    print(json.dumps({"runs": runs, "actions": actions, "peak_rss_mb": rss}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="small", choices=["tiny", "small"])
    p.add_argument("--requests", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    args.work = ROOT / "work" / f"bench-internvla-{args.preset}"
    args.checkpoint, args.art = args.work / "ckpt", args.work / "art"
    if args.worker is not None:
        args.system = args.worker
        return worker(args)
    out = args.out or ROOT / "benchmarks" / "results" / f"internvla_act_{args.preset}.json"
    if not (args.checkpoint / "config.json").exists():
        omni_edge("make-checkpoint", "--arch", "internvla-a1", "--preset", args.preset, "--out", str(args.checkpoint))
    if not (args.art / "plan.pte.json").exists():
        omni_edge("export", "policy", "--checkpoint", str(args.checkpoint), "--out", str(args.art), "--format", "both",
                  "--cameras", ",".join(CAMERAS), "--max-observation-age-ms", "0")
    results = {}
    for i, name in enumerate(SYSTEMS):
        cmd = [sys.executable, __file__, "--preset", args.preset, "--requests", str(args.requests), "--threads",
               str(args.threads), "--worker", str(i)]
        results[name] = run_worker(cmd)
    peer_name = SYSTEMS[3]
    peer = np.array(results[peer_name]["actions"])
    rows = {}
    for name, r in results.items():
        med = {k: statistics.median(run[k] for run in r["runs"]) for k in PARTS}
        got = np.array(r["actions"])[:, :peer.shape[1]]
        rows[name] = {**{k: round(v, 2) for k, v in med.items()}, "peak_rss_mb": round(r["peak_rss_mb"], 1),
                      "max_abs_vs_vllm_omni": float(np.abs(got - peer).max())}
    base = rows[peer_name]["total_ms"]
    for row in rows.values():
        row["speedup_vs_vllm_omni"] = round(base / row["total_ms"], 2)
    report = {"preset": args.preset, "requests": args.requests, "threads": args.threads, "systems": rows,
              "command": " ".join(["python", "benchmarks/internvla_act.py", *sys.argv[1:]])}
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, json.dumps(report, indent=2) + "\n")
    print(f"{'system':40} {'total':>8} {'prep':>6} {'vision':>7} {'frames':>7} {'context':>8} {'step':>6} "
          f"{'RSS MB':>7} {'x':>5} {'max abs':>9}")
    for name, row in rows.items():
        print(f"{name:40} {row['total_ms']:8.1f} {row['preprocess_ms']:6.1f} {row['vision_ms']:7.1f} "
              f"{row['frame_ms']:7.1f} {row['context_ms']:8.1f} {row['step_ms']:6.2f} {row['peak_rss_mb']:7.1f} "
              f"{row['speedup_vs_vllm_omni']:5.2f} {row['max_abs_vs_vllm_omni']:9.2e}")


if __name__ == "__main__":
    main()
