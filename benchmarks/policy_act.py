#!/usr/bin/env python
"""Policy benchmark: one observation (two 640x480 camera images, a state, a task) to one action
chunk through a π0-architecture checkpoint, natively (the export's plans: ONNX Runtime, and the
ExecuTorch program) and, as the peer, transformers' sample_actions in PyTorch (the images
preprocessed with Pillow as the native controller does them). Each system in its own process,
same threads, same noise.

Reported per system (medians over the requests after a warm-up one): observation to action
(the request: decode + preprocess, vision, prefix, the denoising steps), its parts on the
controller's clock, and the process's peak RSS; and the chunk's max abs difference from the peer.

    python benchmarks/policy_act.py                    # tiny, results/policy_act.json
    python benchmarks/policy_act.py --preset small --requests 20 --out benchmarks/results/policy_act_small.json

Makes the checkpoint and exports it when missing (work/bench-policy-<preset>*).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import omni_edge, peak_rss_mb, run_worker  # benchmarks/common.py (the script's folder is on sys.path)
from omni_edge.files import write_text_atomic

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = ("native, ONNX Runtime", "native, ExecuTorch (XNNPACK)", "transformers sample_actions (PyTorch)")
TASK = "pick up the red block and put it in the bowl"


def scene(directory: Path, plan: Path) -> dict[str, Any]:
    """The profiler's observation (a 640x480 noise image per camera, a state) and fixed noise."""
    from omni_edge.harness.profiling.kinds.policy import write_observation

    obs_path = write_observation(directory / "observation", plan)
    obs = json.loads(obs_path.read_text())
    section = json.loads(plan.read_text())["stages"][0]["policy"]
    noise = np.random.default_rng(1).standard_normal((section["chunk_size"], section["action_dim"])).astype(np.float32)
    return {"images": {c: obs_path.parent / f for c, f in obs["images"].items()}, "state": obs["state"], "noise": noise}


def run_native(args: argparse.Namespace, plan: Path, s: dict[str, Any]) -> tuple[list[dict[str, Any]], list[list[float]]]:
    from omni_edge.runtime import PolicySession
    from omni_edge.runtime.request import CameraImage, Observation

    session = PolicySession.open(plan, threads=args.threads)
    runs, actions = [], []
    for _ in range(args.requests + 1):
        obs = Observation(timestamp_ms=time.time() * 1000, images=tuple(CameraImage(c, str(p)) for c, p in s["images"].items()),
                          state=tuple(s["state"]), noise=tuple(tuple(float(v) for v in r) for r in s["noise"]))
        start = time.perf_counter()
        a = session.act(obs, TASK)
        t = a["timings"]
        runs.append({"total_ms": 1000 * (time.perf_counter() - start), "preprocess_ms": t["preprocess_ms"],
                     "vision_ms": t["vision_ms"], "prefix_ms": t["prefix_ms"], "denoise_ms": t["denoise_ms"],
                     "age_at_emission_ms": a["observation_age_ms"]["at_emission"]})
        actions = a["actions"]
    return runs[1:], actions


def run_transformers(args: argparse.Namespace, s: dict[str, Any]) -> tuple[list[dict[str, Any]], list[list[float]]]:
    import torch
    from omni_edge.export.models.pi0.reference import load_policy, observation_pixels, reference_actions

    torch.set_num_threads(args.threads)
    policy = load_policy(args.checkpoint)
    runs, actions = [], []
    for _ in range(args.requests + 1):
        start = time.perf_counter()
        pixels = observation_pixels(s["images"].values(), policy.image_size)
        prep = 1000 * (time.perf_counter() - start)
        out = reference_actions(policy, pixels, TASK, np.array(s["state"], np.float32), s["noise"])
        runs.append({"total_ms": 1000 * (time.perf_counter() - start), "preprocess_ms": prep})
        actions = out.tolist()
    return runs[1:], actions


def worker(args: argparse.Namespace) -> None:
    s = scene(args.work, args.art / "plan.json")
    if args.system == 2:
        runs, actions = run_transformers(args, s)
    else:
        runs, actions = run_native(args, args.art / ("plan.json" if args.system == 0 else "plan.pte.json"), s)
    print(json.dumps({"runs": runs, "actions": actions, "peak_rss_mb": peak_rss_mb()}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="tiny", choices=["tiny", "small"])
    p.add_argument("--requests", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "policy_act.json")
    p.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    args.work = ROOT / "work" / f"bench-policy-{args.preset}"
    args.checkpoint, args.art = args.work / "ckpt", args.work / "art"
    if args.worker is not None:
        args.system = args.worker
        return worker(args)
    if not (args.checkpoint / "config.json").exists():
        omni_edge("make-checkpoint", "--arch", "pi0", "--preset", args.preset, "--out", str(args.checkpoint))
    if not (args.art / "plan.pte.json").exists():
        omni_edge("export", "policy", "--checkpoint", str(args.checkpoint), "--out", str(args.art), "--format", "both")
    results = {}
    for i, name in enumerate(SYSTEMS):
        cmd = [sys.executable, __file__, "--preset", args.preset, "--requests", str(args.requests), "--threads",
               str(args.threads), "--worker", str(i)]
        results[name] = run_worker(cmd)
    peer = np.array(results[SYSTEMS[2]]["actions"])
    rows = {}
    for name, r in results.items():
        med = {k: statistics.median(run[k] for run in r["runs"]) for k in r["runs"][0]}
        rows[name] = {**{k: round(v, 2) for k, v in med.items()}, "peak_rss_mb": round(r["peak_rss_mb"], 1),
                      "max_abs_vs_transformers": float(np.abs(np.array(r["actions"]) - peer).max())}
    base = rows[SYSTEMS[2]]["total_ms"]
    for row in rows.values():
        row["speedup_vs_transformers"] = round(base / row["total_ms"], 2)
    report = {"preset": args.preset, "requests": args.requests, "threads": args.threads, "systems": rows,
              "command": " ".join(["python", "benchmarks/policy_act.py", *sys.argv[1:]])}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(args.out, json.dumps(report, indent=2) + "\n")
    print(f"{'system':40} {'total ms':>9} {'prep':>6} {'vision':>7} {'prefix':>7} {'denoise':>8} {'RSS MB':>7} {'x':>5} {'max abs':>9}")
    for name, row in rows.items():
        print(f"{name:40} {row['total_ms']:9.2f} {row['preprocess_ms']:6.2f} {row.get('vision_ms', float('nan')):7.2f} "
              f"{row.get('prefix_ms', float('nan')):7.2f} {row.get('denoise_ms', float('nan')):8.2f} "
              f"{row['peak_rss_mb']:7.1f} {row['speedup_vs_transformers']:5.2f} {row['max_abs_vs_transformers']:9.2e}")


if __name__ == "__main__":
    main()
