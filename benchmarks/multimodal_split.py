#!/usr/bin/env python
"""Encoder split benchmark: one image + audio chat request through a Qwen2.5-Omni-architecture
checkpoint, with the encoders as separate stages running side by side (the export's plan), as
separate stages in series (image encoder -> audio encoder, which starts when the image encoder
ended and passes its rows on -> thinker), and, as the
peer with the encoders inside the thinker's forward, transformers in PyTorch (its processors,
then `generate`). Each system in its own process, same threads, one run.

Reported per system (medians over the requests after a warm-up one): end-to-end latency (request
to the last token), time to first token, how long the thinker waited for the encoders' rows
(the handoff as the thinker sees it), the bytes that crossed the edges, each encoder's
preprocessing and graph time, and the process's peak RSS.

    python benchmarks/multimodal_split.py                    # tiny, results/multimodal_split.json
    python benchmarks/multimodal_split.py --preset small --requests 10

Makes the checkpoint and exports it when missing (work/bench-mm-<preset>*).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from common import omni_edge, peak_rss_mb, run_worker  # benchmarks/common.py (the script's folder is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = ("stages, side by side", "stages, in series", "transformers (encoders in the thinker's forward)")
PROMPT = "What do you see and hear?"



def media(directory: Path, seconds: float) -> list[tuple[str, Path]]:
    """Noise at 448x448 (no resampling) and `seconds` of a 24 kHz chirp: the profiler's media."""
    from omni_edge.harness.profiling.kinds.multimodal import write_media

    return write_media(directory / "media", ["image", "audio"], [1, 32, 32], seconds=seconds)


def run_native(args: argparse.Namespace, plan: Path, items: list[tuple[str, Path]]) -> list[dict[str, Any]]:
    from omni_edge.runtime import Session

    session = Session.open(plan, threads=args.threads)
    runs = []
    for _ in range(args.requests + 1):
        start = time.perf_counter()
        done = session.run(PROMPT, chat=True, media=[(k, str(p)) for k, p in items], max_new_tokens=args.tokens,
                           ignore_stop_tokens=True, on_event=lambda e: True)
        total = 1000 * (time.perf_counter() - start)
        stages = session.info()["stages"]
        encoders = {s["model_stage"]: s["last_request"] for s in stages if s["model_stage"].endswith("_encoder")}
        runs.append({"total_ms": total, "ttft_ms": done["ttft_ms"], "wait_ms": done["media"]["wait_ms"],
                     "bytes": done["media"]["bytes_received"], "tokens": done["media"]["tokens"],
                     **{f"{k}.{m}": v[m] for k, v in encoders.items() for m in ("preprocess_ms", "encode_ms", "waited_ms")}})
    return runs[1:]


def run_transformers(args: argparse.Namespace, items: list[tuple[str, Path]]) -> list[dict[str, Any]]:
    import torch
    from omni_edge.export.models.qwen25_omni.reference import load_thinker, reference_inputs

    torch.set_num_threads(args.threads)
    thinker = load_thinker(args.checkpoint)
    runs = []
    for _ in range(args.requests + 1):
        start = time.perf_counter()
        inputs = reference_inputs(args.checkpoint, thinker, items, PROMPT, chat=True)
        prep = 1000 * (time.perf_counter() - start)
        with torch.no_grad():
            thinker.model.generate(**inputs, max_new_tokens=args.tokens, min_new_tokens=args.tokens, do_sample=False)
        runs.append({"total_ms": 1000 * (time.perf_counter() - start), "preprocess_ms": prep})
    return runs[1:]


def worker(args: argparse.Namespace) -> None:
    items = media(args.artifact, args.seconds)
    if args.worker == SYSTEMS[2]:
        runs = run_transformers(args, items)
    else:
        runs = run_native(args, args.artifact / ("plan.json" if args.worker == SYSTEMS[0] else "plan.serial.json"), items)
    print(json.dumps({"runs": runs, "peak_rss_mb": peak_rss_mb()}))



def ensure_artifacts(args: argparse.Namespace) -> None:
    if not (args.checkpoint / "model.safetensors").exists():
        omni_edge("make-checkpoint", "--arch", "qwen2.5-omni", "--preset", args.preset, "--out", str(args.checkpoint))
    if not (args.artifact / "plan.json").exists():
        shutil.rmtree(args.artifact, ignore_errors=True)
        omni_edge("export", "llm", "--checkpoint", str(args.checkpoint), "--out", str(args.artifact), "--buckets", "1024")
    plan = json.loads((args.artifact / "plan.json").read_text())
    audio = next(s for s in plan["stages"] if s["model_stage"] == "audio_encoder")
    vision = next(s for s in plan["stages"] if s["model_stage"] == "vision_encoder")
    thinker = next(s for s in plan["stages"] if "llm" in s)
    audio["input_sources"] = [vision["stage_id"]]  # in series: image -> audio (passing the image's rows on) -> thinker
    thinker["input_sources"] = [audio["stage_id"]]
    (args.artifact / "plan.serial.json").write_text(json.dumps(plan, indent=1))


def summarize(runs: list[dict[str, Any]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def measure(args: argparse.Namespace, system: str) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--worker", system, "--checkpoint", str(args.checkpoint), "--artifact",
           str(args.artifact), "--requests", str(args.requests), "--threads", str(args.threads), "--tokens",
           str(args.tokens), "--seconds", str(args.seconds)]
    got = run_worker(cmd)
    return {**summarize(got["runs"]), "peak_rss_mb": got["peak_rss_mb"]}


def _ms(r: dict[str, float], key: str) -> str:
    return f"{r[key]:.1f}" if key in r else "-"


def table(results: dict[str, dict[str, float]]) -> list[str]:
    lines = ["| system | end to end ms | TTFT ms | thinker waited for encoders ms | bytes across edges | "
             "image encoder: preprocess / graph ms | audio encoder: waited / preprocess / graph ms | peak RSS MB |",
             "|---|---|---|---|---|---|---|---|"]
    for system, r in results.items():
        image = (f"{_ms(r, 'vision_encoder.preprocess_ms')} / {_ms(r, 'vision_encoder.encode_ms')}"
                 if "vision_encoder.encode_ms" in r else f"{_ms(r, 'preprocess_ms')} (processors, both media)")
        audio = (f"{_ms(r, 'audio_encoder.waited_ms')} / {_ms(r, 'audio_encoder.preprocess_ms')} / "
                 f"{_ms(r, 'audio_encoder.encode_ms')}" if "audio_encoder.encode_ms" in r else "-")
        edges = f"{r['bytes']:.0f}" if "bytes" in r else "- (in process)"
        lines.append(f"| {system} | {r['total_ms']:.1f} | {_ms(r, 'ttft_ms')} | {_ms(r, 'wait_ms')} | {edges} | {image} "
                     f"| {audio} | {r['peak_rss_mb']:.0f} |")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="tiny", choices=["tiny", "small"])
    p.add_argument("--checkpoint", type=Path, default=None)
    p.add_argument("--artifact", type=Path, default=None)
    p.add_argument("--requests", type=int, default=10, help="per system, after one warm-up request")
    p.add_argument("--tokens", type=int, default=16, help="greedy tokens per request")
    p.add_argument("--seconds", type=float, default=4.0, help="audio length (24 kHz WAV, resampled on the way)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "multimodal_split.json")
    p.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    args = p.parse_args()
    args.checkpoint = args.checkpoint or ROOT / "work" / f"bench-mm-{args.preset}"
    args.artifact = args.artifact or ROOT / "work" / f"bench-mm-{args.preset}-art"
    if args.worker:
        worker(args)
        return 0
    ensure_artifacts(args)
    results = {system: measure(args, system) for system in SYSTEMS}
    command = "python benchmarks/multimodal_split.py " + " ".join(sys.argv[1:])
    lines = [f"`{command.strip()}`", "",
             f"{args.checkpoint.name}: a 448x448 image and {args.seconds:g} s of 24 kHz audio, chat, {args.tokens} greedy "
             f"tokens; medians of {args.requests} requests after a warm-up; {args.threads} threads.", "", *table(results)]
    print("\n".join(lines))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": command.strip(), "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
