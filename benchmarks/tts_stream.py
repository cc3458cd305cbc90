#!/usr/bin/env python
"""Streaming speech benchmark: the vocoder's chunk schedules against each other and against a
straightforward PyTorch streaming loop, on one checkpoint, same threads, one run; each system
in its own process.

Systems: the native chain (talker stage -> vocoder stage, ONNX Runtime) with the adaptive chunk
schedule (the export's default) and with the fixed one (1 frame, then 25; the same artifact,
its plan's `vocoder.schedule` set to fixed), and the PyTorch loop (frame by frame with KV
caches, fixed chunks decoded as soon as their frames exist). Each speaks UTTERANCES utterances
(short, medium and long in turn). All are measured the same way: the arrival time of every PCM
chunk at the consumer, replayed through the controller's playback clock with playback starting
at the first PCM and with a 200 ms prebuffer. Reported per system: first PCM, playback start,
underruns and silent time summed over the utterances, the least lead (audio still queued when
a chunk arrived), RTF, peak RSS; the chunks the adaptive schedule cut.

`--load` repeats the native systems while another process keeps one core busy (the schedule
must see the slower talker and vocoder and cut earlier); `--omni` measures an omni plan
(thinker -> talker -> vocoder sharing the cores: speech starts after the thinker's first token).

    python benchmarks/tts_stream.py                       # tiny, results/tts_stream.json
    python benchmarks/tts_stream.py --preset small --out benchmarks/results/tts_stream_small.json
    python benchmarks/tts_stream.py --load --omni         # also under a competing load, and omni

Makes the checkpoints and exports them when missing (work/bench-tts-<preset>*).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from common import omni_edge, peak_rss_mb, run_worker  # benchmarks/common.py (the script's folder is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
NATIVE = ("native adaptive", "native fixed")
PYTORCH = "pytorch loop (fixed)"
OMNI = "omni adaptive"
SAMPLE_RATE = 24_000
PREBUFFER_MS = 200.0
# (name, text, frames): the random talker rarely stops by itself, so frames set the length.
TEXTS = (("short", "Hello there.", 25),
         ("medium", "The controller streams speech to the consumer, chunk by chunk.", 75),
         ("long", "The controller streams speech to the consumer, chunk by chunk, while the talker keeps "
                  "talking and the vocoder keeps up with it.", 150))
OMNI_PROMPT = "Tell me about the weather in a few words."



def utterances(n: int) -> list[tuple[str, str, int]]:
    return [TEXTS[i % len(TEXTS)] for i in range(n)]


class Arrivals:
    """A listener that records (ms since it was made, samples) of every PCM chunk."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.chunks: list[tuple[float, int]] = []

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000

    def __call__(self, event: dict[str, Any], pcm: Any) -> bool:
        if pcm is not None:
            self.chunks.append((self.elapsed_ms(), int(pcm.shape[0])))
        return True


def run_native(args: argparse.Namespace, plan: Path) -> list[dict[str, Any]]:
    from omni_edge.runtime import SpeechSession

    session = SpeechSession.open(plan, threads=args.threads)
    session.speak(TEXTS[0][1], max_frames=TEXTS[0][2])  # warm-up
    results = []
    for name, text, frames in utterances(args.utterances):
        arrivals = Arrivals()
        utterance = session.speak(text, max_frames=frames, on_event=arrivals)
        results.append({"text": name, "arrivals": arrivals.chunks, "total_ms": arrivals.elapsed_ms(),
                        "frames": utterance.metrics["frames"], "chunk_frames": utterance.metrics.get("chunk_frames")})
    return results


def run_omni(args: argparse.Namespace, plan: Path) -> list[dict[str, Any]]:
    from omni_edge.runtime import OmniSession

    session = OmniSession.open(plan, threads=args.threads)
    session.run(OMNI_PROMPT, max_new_tokens=16, max_frames=TEXTS[0][2], ignore_stop_tokens=True)  # warm-up
    results = []
    for name, _, frames in utterances(args.utterances):
        arrivals = Arrivals()
        # As many text tokens as frames: the talker reads one thinker state per frame.
        result = session.run(OMNI_PROMPT, max_new_tokens=frames, max_frames=frames, ignore_stop_tokens=True,
                             on_audio=arrivals)
        results.append({"text": name, "arrivals": arrivals.chunks, "total_ms": arrivals.elapsed_ms(),
                        "frames": result.audio["frames"], "chunk_frames": result.audio.get("chunk_frames"),
                        "ttft_ms": result.text_metrics.get("ttft_ms")})
    return results


def run_pytorch(args: argparse.Namespace) -> list[dict[str, Any]]:
    import torch
    from omni_edge.export.models.qwen3_tts.reference import Qwen3Tts, decode_window, stream_codes
    from omni_edge.export.speech import StreamShape

    torch.set_num_threads(args.threads)
    model = Qwen3Tts.from_pretrained(args.checkpoint)
    shape = StreamShape(adaptive=False)
    results = []
    for i, (name, text, n_frames) in enumerate([TEXTS[0], *utterances(args.utterances)]):
        ids = model.tokenizer.encode(text).ids
        arrivals: list[tuple[float, int]] = []
        start = time.perf_counter()
        frames: list[list[int]] = []
        first = 0
        for frame in stream_codes(model, ids, n_frames, model.sampling):  # the plan's sampling, as the native run
            frames.append(frame)
            if len(frames) - first < (shape.first if first == 0 else shape.chunk):
                continue
            pcm = decode_window(model, torch.tensor(frames), first, len(frames), shape, final=False)
            arrivals.append(((time.perf_counter() - start) * 1000, int(pcm.shape[0])))
            first = len(frames)
        if frames:
            pcm = decode_window(model, torch.tensor(frames), first, len(frames), shape, final=True)
            arrivals.append(((time.perf_counter() - start) * 1000, int(pcm.shape[0])))
        if i > 0:  # the first one warms up
            results.append({"text": name, "arrivals": arrivals, "total_ms": (time.perf_counter() - start) * 1000,
                            "frames": len(frames), "chunk_frames": None})
    return results


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals and medians over the utterances, each replayed through the controller's clock."""
    from omni_edge.runtime import playback_stats

    rows = []
    for r in runs:
        audio_ms = 1000.0 * sum(n for _, n in r["arrivals"]) / SAMPLE_RATE
        at_first, buffered = (playback_stats(r["arrivals"], SAMPLE_RATE, p) for p in (0.0, PREBUFFER_MS))
        rows.append({"first_pcm_ms": at_first["first_pcm_ms"], "rtf": r["total_ms"] / audio_ms,
                     "underruns": at_first["underruns"], "underrun_ms": at_first["underrun_ms"],
                     "lead_min_ms": at_first["lead_min_ms"],
                     "underruns_prebuffered": buffered["underruns"], "underrun_ms_prebuffered": buffered["underrun_ms"],
                     "playback_start_prebuffered_ms": buffered["playback_start_ms"],
                     "chunks": len(r["arrivals"]), "ttft_ms": r.get("ttft_ms")})
    leads = [row["lead_min_ms"] for row in rows if row["lead_min_ms"] >= 0]
    out: dict[str, Any] = {
        "utterances": len(rows),
        "first_pcm_ms": statistics.median(row["first_pcm_ms"] for row in rows),
        "rtf": statistics.median(row["rtf"] for row in rows),
        "underruns": sum(row["underruns"] for row in rows),
        "underrun_ms": sum(row["underrun_ms"] for row in rows),
        "utterances_with_underruns": sum(1 for row in rows if row["underruns"]),
        "lead_min_ms": min(leads) if leads else None,
        "underruns_prebuffered": sum(row["underruns_prebuffered"] for row in rows),
        "underrun_ms_prebuffered": sum(row["underrun_ms_prebuffered"] for row in rows),
        "playback_start_prebuffered_ms": statistics.median(row["playback_start_prebuffered_ms"] for row in rows),
        "chunks_per_utterance": statistics.median(row["chunks"] for row in rows),
    }
    if any(row["ttft_ms"] is not None for row in rows):
        out["ttft_ms"] = statistics.median(row["ttft_ms"] for row in rows if row["ttft_ms"] is not None)
    cut = [r["chunk_frames"] for r in runs if r.get("chunk_frames")]
    if cut:
        out["chunk_frames_longest_utterance"] = max(cut, key=sum)
    return out


def worker(args: argparse.Namespace) -> None:
    if args.worker == PYTORCH:
        runs = run_pytorch(args)
    elif args.worker == OMNI:
        runs = run_omni(args, args.omni_plan)
    else:
        runs = run_native(args, args.artifact / ("plan.json" if args.worker == NATIVE[0] else "plan.fixed.json"))
    print(json.dumps({"runs": runs, "peak_rss_mb": peak_rss_mb()}))



def _adaptive(plan: Path) -> bool:
    if not plan.is_file():
        return False
    stages = json.loads(plan.read_text())["stages"]
    return any(s.get("vocoder", {}).get("schedule", {}).get("policy") == "adaptive" for s in stages)


def ensure_artifacts(args: argparse.Namespace) -> None:
    if not (args.checkpoint / "model.safetensors").exists():
        omni_edge("make-checkpoint", "--arch", "qwen3-tts", "--preset", args.preset, "--out", str(args.checkpoint))
    if not _adaptive(args.artifact / "plan.json"):  # missing, or exported before the adaptive schedule
        shutil.rmtree(args.artifact, ignore_errors=True)
        omni_edge("export", "tts", "--checkpoint", str(args.checkpoint), "--out", str(args.artifact))
    plan = json.loads((args.artifact / "plan.json").read_text())
    plan["stages"][1]["vocoder"]["schedule"] = {"policy": "fixed"}  # the same windows, cut the old way
    (args.artifact / "plan.fixed.json").write_text(json.dumps(plan, indent=1))
    if args.omni:
        ensure_omni(args)


def ensure_omni(args: argparse.Namespace) -> None:
    """The README's default thinker with a talker of its width, as `omni-edge demo` would."""
    demo = ROOT / "work" / "demo-tiny"
    if not (demo / "artifact" / "plan.onnx.json").exists():
        omni_edge("demo", "--model", "tiny", "--no-speech")
    base = ROOT / "work" / f"bench-omni-{args.preset}"
    if _adaptive(base / "speech" / "plan.json") and (base / "omni" / "plan.json").exists():
        return
    shutil.rmtree(base, ignore_errors=True)
    omni_edge("make-checkpoint", "--arch", "qwen3-tts", "--preset", args.preset, "--thinker",
         str(demo / "qwen3-tiny"), "--out", str(base / "talker"))
    omni_edge("export", "tts", "--checkpoint", str(base / "talker"), "--out", str(base / "speech"))
    omni_edge("export", "omni", "--thinker-plan", str(demo / "artifact" / "plan.onnx.json"), "--speech-plan",
         str(base / "speech" / "plan.json"), "--out", str(base / "omni"))


@contextlib.contextmanager
def competing_load(on: bool) -> Iterator[None]:
    """Another process spinning on one core for the duration (none when `on` is false)."""
    if not on:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def measure(args: argparse.Namespace, system: str) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--worker", system, "--checkpoint", str(args.checkpoint), "--artifact",
           str(args.artifact), "--utterances", str(args.utterances), "--threads", str(args.threads)]
    if system == OMNI:
        cmd += ["--omni-plan", str(ROOT / "work" / f"bench-omni-{args.preset}" / "omni" / "plan.json")]
    got = run_worker(cmd)
    return {**summarize(got["runs"]), "peak_rss_mb": got["peak_rss_mb"]}


def table(results: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["| system | load | underruns at first PCM (utterances, ms silent) | least lead ms | first PCM ms "
             "| underruns, 200 ms prebuffer (ms) | playback start, prebuffered ms | RTF | chunks/utt. | peak RSS MB |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for key, r in results.items():
        system, _, load = key.partition(" @ ")
        lead = f"{r['lead_min_ms']:.0f}" if r["lead_min_ms"] is not None else "-"
        lines.append(f"| {system} | {load or 'idle'} | {r['underruns']} ({r['utterances_with_underruns']} of "
                     f"{r['utterances']}, {r['underrun_ms']:.0f}) | {lead} | {r['first_pcm_ms']:.1f} | "
                     f"{r['underruns_prebuffered']} ({r['underrun_ms_prebuffered']:.0f}) | "
                     f"{r['playback_start_prebuffered_ms']:.0f} | {r['rtf']:.3f} | {r['chunks_per_utterance']:.0f} | "
                     f"{r['peak_rss_mb']:.0f} |")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="tiny", choices=["tiny", "small"])
    p.add_argument("--checkpoint", type=Path, default=None)
    p.add_argument("--artifact", type=Path, default=None)
    p.add_argument("--utterances", type=int, default=20, help="per system: short, medium and long texts in turn")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-pytorch", action="store_true", help="skip the PyTorch loop")
    p.add_argument("--load", action="store_true", help="also run the native systems beside a process spinning a core")
    p.add_argument("--omni", action="store_true", help="also an omni plan (thinker -> talker -> vocoder)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "tts_stream.json")
    p.add_argument("--worker", choices=[*NATIVE, PYTORCH, OMNI], help=argparse.SUPPRESS)
    p.add_argument("--omni-plan", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    args.checkpoint = args.checkpoint or ROOT / "work" / f"bench-tts-{args.preset}"
    args.artifact = args.artifact or ROOT / "work" / f"bench-tts-{args.preset}-art"
    if args.worker:
        worker(args)
        return 0
    ensure_artifacts(args)
    systems = [*NATIVE, *([] if args.no_pytorch else [PYTORCH]), *([OMNI] if args.omni else [])]
    results: dict[str, dict[str, Any]] = {}
    for system in systems:
        results[system] = measure(args, system)
        print(f"{system}: {results[system]['underruns']} underruns at first PCM", file=sys.stderr)
    if args.load:
        for system in [*NATIVE, *([OMNI] if args.omni else [])]:
            with competing_load(True):
                results[f"{system} @ one core busy"] = measure(args, system)
    command = "python benchmarks/tts_stream.py " + " ".join(sys.argv[1:])
    lines = [f"`{command.strip()}`", "",
             f"{args.checkpoint.name}: {args.utterances} utterances per system ({', '.join(f'{n} {f} frames' for n, _, f in TEXTS)}"
             f" in turn, 80 ms per frame), {args.threads} threads.", "", *table(results)]
    print("\n".join(lines))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"command": command, "results": results}, indent=1) + "\n")
    tmp.replace(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
