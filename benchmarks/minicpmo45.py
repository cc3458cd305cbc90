#!/usr/bin/env python
"""MiniCPM-o 4.5, the three stages per request: the roadmap's 448x448 red square and a LibriVox
recording (pocketsphinx-testdata), chat, the reply spoken: through the controller on the omni
plan (`export omni --checkpoint`: encoders -> thinker -> talker -> token2wav, all native
stages, streamed), and through the PyTorch reference (its slicing and processors, modules,
transformers' Qwen3 and Llama, the token2wav port window by window). Each system in its own
process, same threads, greedy thinker and talker, the same number of tokens and codes.

Reported per system (medians over the requests after a warm-up one): end to end (request to the
last sample), the image and audio encoders (preprocessing / graph), TTFT, decode rate, the
talker (prefill + codes, codes per second), token2wav (ms, real-time factor of its own time),
first PCM, peak RSS.

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
SYSTEMS = ("controller (omni plan)", "PyTorch reference")
PROMPT = "What do you see and hear?"
CODES = 100  # 4 s of speech: token2wav windows of 25 codes
SEED = 7


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
    from omni_edge.runtime import OmniSession

    session = OmniSession.open(args.artifact / "plan.json", threads=args.threads)
    runs = []
    for _ in range(args.requests + 1):
        start = time.perf_counter()
        got = session.run(PROMPT, chat=True, media=[("image", str(image)), ("audio", str(audio))],
                          max_new_tokens=args.tokens, ignore_stop_tokens=True, max_frames=CODES,
                          speech_sampling={"temperature": 0.0, "seed": SEED})
        total = 1000 * (time.perf_counter() - start)
        stages = {s["model_stage"]: s["last_request"] for s in session.info()["stages"]}
        a, t = got.audio, got.text_metrics
        seconds = a["samples"] / a["sample_rate"]
        runs.append({"total_ms": total, "ttft_ms": t["ttft_ms"], "decode_tok_s": t["decode_tok_s"],
                     "talker_ms": a["prefill_ms"] + a["talker_ms_per_frame"] * a["frames"],
                     "talker_codes_s": 1000 * a["frames"] / (a["prefill_ms"] + a["talker_ms_per_frame"] * a["frames"]),
                     "token2wav_ms": a["vocoder_ms"], "token2wav_rtf": a["vocoder_ms"] / 1000 / seconds,
                     "first_pcm_ms": a["first_pcm_ms"], "audio_s": seconds,
                     **{f"{k}.{m}": v[m] for k, v in stages.items() if k.endswith("_encoder")
                        for m in ("preprocess_ms", "encode_ms")}})
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
    from omni_edge.export.models.minicpmo45.token2wav import CounterDraws, Token2Wav, windows
    from omni_edge.export.models.minicpmo45.token2wav_export import load_voice
    from omni_edge.export.models.minicpmo45.token2wav_files import load_token2wav
    from omni_edge.runtime.media import read_wav
    from PIL import Image

    torch.set_num_threads(args.threads)
    thinker, talker, token2wav = load_thinker(args.checkpoint), load_talker(args.checkpoint), load_token2wav(args.checkpoint)
    voice, _ = load_voice(token2wav.flow, None)
    runs = []
    for _ in range(args.requests + 1):
        start = time.perf_counter()
        picture, samples = Image.open(image).convert("RGB"), read_wav(audio)[0]
        t0 = time.perf_counter()
        image_embeddings(thinker, picture)
        t1 = time.perf_counter()
        audio_embeddings(thinker, samples)
        t2 = time.perf_counter()
        with torch.no_grad():  # generate() embeds the media again: its time is counted once
            _, reply = generate(thinker, [Media("image", picture), Media("audio", samples)], PROMPT, args.tokens,
                                speech=True, ignore_stop=True)
            t3 = time.perf_counter()
            span = reply.ids[:-1]  # as the controller: the last token's own state never came
            codes = generate_codes(talker, span, reply.hidden[: len(span)], CODES).codes
        t4 = time.perf_counter()
        chain = Token2Wav(token2wav.flow, token2wav.hift, 10, CounterDraws(SEED))
        state, pcm, first = chain.start(voice), 0, 0.0
        for window, last in windows(codes):
            out, state = chain.decode(voice, state, window, last)
            pcm += out.numel()
            first = first or time.perf_counter()
        t5 = time.perf_counter()
        seconds = pcm / 24000
        runs.append({"total_ms": 1000 * (t5 - start - (t2 - t0)), "vision_encoder.encode_ms": 1000 * (t1 - t0),
                     "audio_encoder.encode_ms": 1000 * (t2 - t1), "talker_ms": 1000 * (t4 - t3),
                     "talker_codes_s": len(codes) / (t4 - t3), "token2wav_ms": 1000 * (t5 - t4),
                     "token2wav_rtf": (t5 - t4) / seconds, "first_pcm_ms": 1000 * (first - start - (t2 - t0)),
                     "audio_s": seconds})
    return runs[1:]


def worker(args: argparse.Namespace) -> None:
    image, audio = media(args.artifact / "media")
    runs = run_native(args, image, audio) if args.worker == SYSTEMS[0] else run_reference(args, image, audio)
    print(json.dumps({"runs": runs, "peak_rss_mb": peak_rss_mb()}))


def ensure_artifacts(args: argparse.Namespace) -> None:
    if not (args.checkpoint / "assets" / "token2wav" / "flow.pt").exists():  # older checkpoints lack token2wav
        shutil.rmtree(args.checkpoint, ignore_errors=True)
        omni_edge("make-checkpoint", "--arch", "minicpmo-4.5", "--preset", args.preset, "--out", str(args.checkpoint))
    if not (args.artifact / "plan.omni-onnx.json").exists():
        shutil.rmtree(args.artifact, ignore_errors=True)
        omni_edge("export", "omni", "--checkpoint", str(args.checkpoint), "--out", str(args.artifact))


def measure(args: argparse.Namespace, system: str) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--worker", system, "--checkpoint", str(args.checkpoint), "--artifact",
           str(args.artifact), "--requests", str(args.requests), "--threads", str(args.threads), "--tokens",
           str(args.tokens)]
    got = run_worker(cmd)
    return {**{k: statistics.median(r[k] for r in got["runs"]) for k in got["runs"][0]}, "peak_rss_mb": got["peak_rss_mb"]}


def _v(r: dict[str, float], key: str) -> str:
    return f"{r[key]:.1f}" if key in r else "-"


def table(results: dict[str, dict[str, float]]) -> list[str]:
    lines = ["| system | end to end ms | image encoder: preprocess / graph ms | audio encoder: preprocess / graph ms "
             "| TTFT ms | decode tok/s | talker: ms / codes per s | token2wav: ms / RTF | first PCM ms | peak RSS MB |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for system, r in results.items():
        lines.append(f"| {system} | {r['total_ms']:.1f} | {_v(r, 'vision_encoder.preprocess_ms')} / "
                     f"{_v(r, 'vision_encoder.encode_ms')} | {_v(r, 'audio_encoder.preprocess_ms')} / "
                     f"{_v(r, 'audio_encoder.encode_ms')} | {_v(r, 'ttft_ms')} | {_v(r, 'decode_tok_s')} | "
                     f"{r['talker_ms']:.1f} / {r['talker_codes_s']:.0f} | {r['token2wav_ms']:.1f} / "
                     f"{r['token2wav_rtf']:.3f} | {r['first_pcm_ms']:.1f} | {r['peak_rss_mb']:.0f} |")
    ratio = results[SYSTEMS[1]]["total_ms"] / results[SYSTEMS[0]]["total_ms"]
    lines += ["", f"end to end: the reference takes {ratio:.2f}x the controller's time"]
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
             f"tokens spoken as {CODES} greedy talker codes ({(CODES + 3) * 0.04:.2f} s at 24 kHz); medians of "
             f"{args.requests} requests after a warm-up; {args.threads} threads.", "", *table(results)]
    print("\n".join(lines))
    out = args.out or ROOT / "benchmarks" / "results" / f"minicpmo45_{args.preset}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": command.strip(), "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
