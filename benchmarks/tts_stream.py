#!/usr/bin/env python
"""Streaming speech benchmark: the native chain (talker stage -> vocoder stage, ONNX Runtime)
against a straightforward PyTorch streaming loop (frame by frame with KV caches, each chunk
decoded in its window as soon as its frames exist) on the same checkpoint, same threads, same
chunk schedule, in one run; each system in its own process.

Both are measured the same way: the arrival time of every PCM chunk at the consumer, replayed
through one playback clock (24 kHz, a player that starts once `--prebuffer-ms` of audio is
queued). Reported: first PCM latency, real-time factor (wall time / audio time), underruns with
and without the prebuffer, the longest gap between chunks, peak RSS; medians of `--repeats`.

    python benchmarks/tts_stream.py                    # tiny speech checkpoint, 2 threads
    python benchmarks/tts_stream.py --preset small --frames 200

Makes the checkpoint and exports it when missing (work/bench-tts-<preset>).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = ("omni-edge native", "pytorch loop")
TEXT = "The controller streams speech to the consumer, chunk by chunk, while the talker keeps talking."
SAMPLE_RATE = 24_000


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return float(line.split()[1]) / 1024
    return 0.0


def playback(arrivals: list[tuple[float, int]], prebuffer_ms: float) -> dict[str, float]:
    """The controller's own playback clock over (ms, samples) arrivals, for both systems."""
    from omni_edge.runtime import playback_stats

    return playback_stats(arrivals, SAMPLE_RATE, prebuffer_ms)


def run_native(args: argparse.Namespace) -> list[dict[str, Any]]:
    from omni_edge.runtime import SpeechSession

    session = SpeechSession.open(args.artifact / "plan.json", threads=args.threads)
    results = []
    for i in range(args.repeats + 1):
        arrivals: list[tuple[float, int]] = []
        start = time.perf_counter()

        def on_event(event: dict[str, Any], pcm: Any) -> bool:
            if pcm is not None:
                arrivals.append(((time.perf_counter() - start) * 1000, int(pcm.shape[0])))  # noqa: B023
            return True

        utterance = session.speak(TEXT, max_frames=args.frames, on_event=on_event)
        total = (time.perf_counter() - start) * 1000
        if i > 0:  # the first run warms up
            results.append({"arrivals": arrivals, "total_ms": total, "frames": utterance.metrics["frames"]})
    return results


def run_pytorch(args: argparse.Namespace) -> list[dict[str, Any]]:
    import torch
    from omni_edge.export.qwen3_tts import Qwen3Tts, StreamShape, decode_window, stream_codes

    torch.set_num_threads(args.threads)
    model = Qwen3Tts.from_pretrained(args.checkpoint)
    ids = model.tokenizer.encode(TEXT).ids
    shape = StreamShape()
    results = []
    for i in range(args.repeats + 1):
        arrivals: list[tuple[float, int]] = []
        start = time.perf_counter()
        frames: list[list[int]] = []
        spans: list[tuple[int, int, bool]] = []  # chunks as their frames exist, then the rest at the end
        for frame in stream_codes(model, ids, args.frames, model.sampling):  # the plan's sampling, as the native run
            frames.append(frame)
            first = spans[-1][1] if spans else 0
            if len(frames) - first >= (shape.first if first == 0 else shape.chunk):
                spans.append((first, len(frames), False))
            else:
                continue
            pcm = decode_window(model, torch.tensor(frames), first, len(frames), shape, final=False)
            arrivals.append(((time.perf_counter() - start) * 1000, int(pcm.shape[0])))
        if frames:
            first = spans[-1][1] if spans else 0
            pcm = decode_window(model, torch.tensor(frames), first, len(frames), shape, final=True)
            arrivals.append(((time.perf_counter() - start) * 1000, int(pcm.shape[0])))
        total = (time.perf_counter() - start) * 1000
        if i > 0:
            results.append({"arrivals": arrivals, "total_ms": total, "frames": len(frames)})
    return results


def summarize(runs: list[dict[str, Any]], prebuffer_ms: float) -> dict[str, float]:
    def med(values: list[float]) -> float:
        return float(statistics.median(values))

    rows = []
    for r in runs:
        samples = sum(n for _, n in r["arrivals"])
        audio_ms = 1000.0 * samples / SAMPLE_RATE
        times = [t for t, _ in r["arrivals"]]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        rows.append({
            "frames": r["frames"], "samples": samples, "first_pcm_ms": times[0], "rtf": r["total_ms"] / audio_ms,
            "max_gap_ms": max(gaps, default=0.0),
            "underruns_at_first_pcm": playback(r["arrivals"], 0)["underruns"],
            "underrun_ms_at_first_pcm": playback(r["arrivals"], 0)["underrun_ms"],
            "underruns": playback(r["arrivals"], prebuffer_ms)["underruns"],
            "playback_start_ms": playback(r["arrivals"], prebuffer_ms)["playback_start_ms"],
        })
    return {k: med([row[k] for row in rows]) for k in rows[0]}


def worker(args: argparse.Namespace) -> None:
    runs = run_native(args) if args.worker == SYSTEMS[0] else run_pytorch(args)
    print(json.dumps({"runs": runs, "peak_rss_mb": peak_rss_mb()}))


def ensure_artifact(args: argparse.Namespace) -> None:
    cli = [sys.executable, "-m", "omni_edge.cli"]
    if not (args.checkpoint / "model.safetensors").exists():
        subprocess.run([*cli, "make-checkpoint", "--arch", "qwen3-tts", "--preset", args.preset, "--out",
                        str(args.checkpoint)], check=True)
    if not (args.artifact / "plan.json").exists():
        subprocess.run([*cli, "export", "tts", "--checkpoint", str(args.checkpoint), "--out", str(args.artifact)],
                       check=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="tiny", choices=["tiny", "small"])
    p.add_argument("--checkpoint", type=Path, default=None)
    p.add_argument("--artifact", type=Path, default=None)
    p.add_argument("--frames", type=int, default=100, help="frames per utterance (80 ms each)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--prebuffer-ms", type=float, default=200.0)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "tts_stream.json")
    p.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    args = p.parse_args()
    args.checkpoint = args.checkpoint or ROOT / "work" / f"bench-tts-{args.preset}"
    args.artifact = args.artifact or ROOT / "work" / f"bench-tts-{args.preset}-art"
    if args.worker:
        worker(args)
        return 0
    ensure_artifact(args)
    results: dict[str, Any] = {}
    for system in SYSTEMS:
        cmd = [sys.executable, __file__, "--worker", system, "--checkpoint", str(args.checkpoint), "--artifact",
               str(args.artifact), "--frames", str(args.frames), "--repeats", str(args.repeats), "--threads",
               str(args.threads)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        got = json.loads(out.strip().splitlines()[-1])
        results[system] = {**summarize(got["runs"], args.prebuffer_ms), "peak_rss_mb": got["peak_rss_mb"]}
    command = "python benchmarks/tts_stream.py " + " ".join(sys.argv[1:])
    base = results[SYSTEMS[1]]
    lines = [f"`{command.strip()}`", "",
             f"{args.checkpoint.name}: {args.frames} frames ({args.frames * 0.08:.1f} s of audio), median of "
             f"{args.repeats} runs after a warm-up, {args.threads} threads; prebuffer {args.prebuffer_ms:.0f} ms.", "",
             "| system | RTF | vs PyTorch | first PCM ms | underruns (prebuffer) | underruns at first PCM (ms silent) "
             "| max chunk gap ms | peak RSS MB |", "|---|---|---|---|---|---|---|---|"]
    for system, r in results.items():
        lines.append(f"| {system} | {r['rtf']:.3f} | {base['rtf'] / r['rtf']:.2f}x faster | {r['first_pcm_ms']:.1f} | "
                     f"{r['underruns']:.0f} | {r['underruns_at_first_pcm']:.0f} ({r['underrun_ms_at_first_pcm']:.0f}) | "
                     f"{r['max_gap_ms']:.0f} | {r['peak_rss_mb']:.0f} |")
    print("\n".join(lines))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": command, "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
