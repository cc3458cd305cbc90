#!/usr/bin/env python
"""MiniCPM-o 4.5 per stage: one image + audio chat request (the roadmap's 448x448 red square and
a LibriVox recording, pocketsphinx-testdata) through the controller on the export's plan.json
(encoders and thinker as stages), then the talker's codes for the spoken reply on the native
decoder engine; and the same through the PyTorch reference (its slicing and processors, modules,
transformers' Qwen3 and Llama). Each system in its own process, same threads, one run.

Reported per system (medians over the requests after a warm-up one): end to end (request to the
last text token), the image and audio encoders' preprocessing and graph time, TTFT, decode
rate, the talker's prefill + codes time and code rate, peak RSS.

    python benchmarks/minicpmo45.py --preset small        # results/minicpmo45_small.json

Makes the checkpoint and exports it when missing (work/bench-m45-<preset>*).
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

from common import omni_edge, peak_rss_mb, run_worker  # benchmarks/common.py

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = ("controller (plan.json + talker engine)", "PyTorch reference")
PROMPT = "What do you see and hear?"
CODES = 64


def media(directory: Path) -> tuple[Path, Path]:
    sys.path.insert(0, str(ROOT / "tests"))
    from minicpmo45_media import image_inputs, speech_clips
    from omni_edge.runtime.media import wav_bytes

    directory.mkdir(parents=True, exist_ok=True)
    image, audio = directory / "red_square.png", directory / "speech.wav"
    image_inputs()[0][1].save(image)  # type: ignore[attr-defined]
    audio.write_bytes(wav_bytes(speech_clips()[0], 16000))
    return image, audio


def run_native(args: argparse.Namespace, image: Path, audio: Path) -> list[dict[str, Any]]:
    import torch
    from omni_edge.export.models.minicpmo45.reference import Media, generate, load_talker, load_thinker
    from omni_edge.export.models.minicpmo45.talker_export import engine_codes, prefill_rows
    from omni_edge.runtime import Session
    from omni_edge.runtime.media import read_wav
    from PIL import Image

    session = Session.open(args.artifact / "plan.json", threads=args.threads)
    # The talker's input: the reference thinker's spoken reply (the native omni stage is not built yet).
    torch.set_num_threads(args.threads)
    thinker, talker = load_thinker(args.checkpoint), load_talker(args.checkpoint)
    with torch.no_grad():
        _, reply = generate(thinker, [Media("image", Image.open(image)), Media("audio", read_wav(audio)[0])], PROMPT,
                            args.tokens, speech=True, ignore_stop=True)
    runs = []
    for _ in range(args.requests + 1):
        start = time.perf_counter()
        done = session.run(PROMPT, chat=True, media=[("image", str(image)), ("audio", str(audio))],
                           max_new_tokens=args.tokens, ignore_stop_tokens=True, on_event=lambda e: True)
        total = 1000 * (time.perf_counter() - start)
        encoders = {s["model_stage"]: s["last_request"] for s in session.info()["stages"]
                    if s["model_stage"].endswith("_encoder")}
        talk = time.perf_counter()
        rows = prefill_rows(args.artifact / "talker-onnx", talker, reply.ids, reply.prenorm)
        engine_codes(args.artifact / "plan.talker-onnx.json", rows, talker.config.eos, CODES, args.threads)
        talker_ms = 1000 * (time.perf_counter() - talk)
        runs.append({"total_ms": total, "ttft_ms": done["ttft_ms"], "decode_tok_s": done["decode_tok_s"],
                     "talker_ms": talker_ms, "talker_codes_s": 1000 * CODES / talker_ms,
                     **{f"{k}.{m}": v[m] for k, v in encoders.items() for m in ("preprocess_ms", "encode_ms")}})
    return runs[1:]


def run_reference(args: argparse.Namespace, image: Path, audio: Path) -> list[dict[str, Any]]:
    import torch
    from omni_edge.export.models.minicpmo45.reference import (
        Media,
        audio_embeddings,
        generate,
        image_embeddings,
        load_talker,
        load_thinker,
    )
    from omni_edge.export.models.minicpmo45.talker import generate_codes
    from omni_edge.runtime.media import read_wav
    from PIL import Image

    torch.set_num_threads(args.threads)
    thinker, talker = load_thinker(args.checkpoint), load_talker(args.checkpoint)
    runs = []
    for _ in range(args.requests + 1):
        start = time.perf_counter()
        picture, samples = Image.open(image).convert("RGB"), read_wav(audio)[0]
        t0 = time.perf_counter()
        image_embeddings(thinker, picture)
        t1 = time.perf_counter()
        audio_embeddings(thinker, samples)
        t2 = time.perf_counter()
        with torch.no_grad():  # generate() embeds the media again: its time minus the two above
            _, reply = generate(thinker, [Media("image", picture), Media("audio", samples)], PROMPT, args.tokens,
                                speech=True, ignore_stop=True)
        t3 = time.perf_counter()
        generate_codes(talker, reply.ids, reply.hidden, CODES)
        t4 = time.perf_counter()
        talker_ms = 1000 * (t4 - t3)
        runs.append({"total_ms": 1000 * (t3 - start) - 1000 * (t2 - t0), "vision_encoder.encode_ms": 1000 * (t1 - t0),
                     "audio_encoder.encode_ms": 1000 * (t2 - t1), "talker_ms": talker_ms,
                     "talker_codes_s": 1000 * CODES / talker_ms})
    return runs[1:]


def worker(args: argparse.Namespace) -> None:
    image, audio = media(args.artifact / "media")
    runs = run_native(args, image, audio) if args.worker == SYSTEMS[0] else run_reference(args, image, audio)
    print(json.dumps({"runs": runs, "peak_rss_mb": peak_rss_mb()}))


def ensure_artifacts(args: argparse.Namespace) -> None:
    if not (args.checkpoint / "model.safetensors").exists():
        omni_edge("make-checkpoint", "--arch", "minicpmo-4.5", "--preset", args.preset, "--out", str(args.checkpoint))
    if not (args.artifact / "plan.talker-onnx.json").exists():
        shutil.rmtree(args.artifact, ignore_errors=True)
        omni_edge("export", "llm", "--checkpoint", str(args.checkpoint), "--out", str(args.artifact), "--buckets", "1024")


def measure(args: argparse.Namespace, system: str) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--worker", system, "--checkpoint", str(args.checkpoint), "--artifact",
           str(args.artifact), "--requests", str(args.requests), "--threads", str(args.threads), "--tokens",
           str(args.tokens)]
    got = run_worker(cmd)
    return {**{k: statistics.median(r[k] for r in got["runs"]) for k in got["runs"][0]}, "peak_rss_mb": got["peak_rss_mb"]}


def _v(r: dict[str, float], key: str) -> str:
    return f"{r[key]:.1f}" if key in r else "-"


def table(results: dict[str, dict[str, float]]) -> list[str]:
    lines = ["| system | end to end ms (thinker) | image encoder: preprocess / graph ms | audio encoder: preprocess / graph ms "
             "| TTFT ms | decode tok/s | talker: ms / codes per s | peak RSS MB |", "|---|---|---|---|---|---|---|---|"]
    for system, r in results.items():
        lines.append(f"| {system} | {r['total_ms']:.1f} | {_v(r, 'vision_encoder.preprocess_ms')} / "
                     f"{_v(r, 'vision_encoder.encode_ms')} | {_v(r, 'audio_encoder.preprocess_ms')} / "
                     f"{_v(r, 'audio_encoder.encode_ms')} | {_v(r, 'ttft_ms')} | {_v(r, 'decode_tok_s')} | "
                     f"{r['talker_ms']:.1f} / {r['talker_codes_s']:.0f} | {r['peak_rss_mb']:.0f} |")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="small", choices=["tiny", "small"])
    p.add_argument("--checkpoint", type=Path, default=None)
    p.add_argument("--artifact", type=Path, default=None)
    p.add_argument("--requests", type=int, default=5, help="per system, after one warm-up request")
    p.add_argument("--tokens", type=int, default=16, help="greedy thinker tokens per request")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    args = p.parse_args()
    args.checkpoint = args.checkpoint or ROOT / "work" / f"bench-m45-{args.preset}"
    args.artifact = args.artifact or ROOT / "work" / f"bench-m45-{args.preset}-art"
    if args.worker:
        worker(args)
        return 0
    ensure_artifacts(args)
    results = {system: measure(args, system) for system in SYSTEMS}
    command = "python benchmarks/minicpmo45.py " + " ".join(sys.argv[1:])
    lines = [f"`{command.strip()}`", "",
             f"{args.checkpoint.name}: a 448x448 image and a {7.1:g} s recording, chat, {args.tokens} greedy thinker "
             f"tokens, then {CODES} talker codes; medians of {args.requests} requests after a warm-up; "
             f"{args.threads} threads.", "", *table(results)]
    print("\n".join(lines))
    out = args.out or ROOT / "benchmarks" / "results" / f"minicpmo45_{args.preset}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": command.strip(), "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
