#!/usr/bin/env python3
"""SIGINT at random moments of `run` and `speak`, Python and native: counts how each ended and
any breach of the cancel contract (README "Signals, outputs, integrity, privacy").

    scripts/sigint_sweep.py --text-plan ART/plan.onnx.json --speech-plan SPEECH/plan.json [--moments 50]
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
import wave
from collections import Counter
from pathlib import Path

BIN = Path(sys.executable).parent


def breach(rc: int, out: str, wav: Path | None, before: bytes | None) -> str:
    """What broke the contract in one run, or ""."""
    try:
        lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        return f"stdout is not JSON lines ({exc})"
    terminals = [e for e in lines if "finish_reason" in e]
    if len(terminals) != 1 or lines[-1] != terminals[0]:
        return f"{len(terminals)} terminal lines, last {lines[-1:] }"
    kind = terminals[0]["kind"]
    if (rc == 130) != (kind == "cancelled") or kind == "error":
        return f"exit {rc} with a {kind} line"
    if wav is not None:
        streamed = sum(e["n_samples"] for e in lines if e["kind"] == "pcm")
        if streamed == 0 and kind == "cancelled":
            return "" if wav.read_bytes() == before else "a cancel before any audio replaced the WAV"
        with wave.open(str(wav)) as w:
            if w.getnframes() != streamed:
                return f"the WAV holds {w.getnframes()} samples, {streamed} streamed"
    return ""


def sweep(name: str, command: list[str], moments: int, wav: Path | None, seed: int) -> None:
    start = time.monotonic()
    subprocess.run(command, check=True, capture_output=True)
    whole = time.monotonic() - start
    rng = random.Random(seed)
    ends: Counter[str] = Counter()
    breaches = []
    for _ in range(moments):
        at = rng.uniform(0.35 * whole if command[0].endswith("omni-edge") else 0.05, whole)
        before = None
        if wav is not None:
            wav.write_bytes(b"the previous file")
            before = wav.read_bytes()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(at)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=600)
        why = breach(proc.returncode, out, wav, before)
        ends["breach" if why else ("cancelled" if proc.returncode == 130 else "finished first")] += 1
        if why:
            breaches.append(f"{at:.2f}s: {why}")
    print(f"{name}: {moments} SIGINTs over a {whole:.2f} s run: {dict(ends)}")
    for b in breaches:
        print(f"  {b}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--text-plan", type=Path, required=True)
    p.add_argument("--speech-plan", type=Path, required=True)
    p.add_argument("--moments", type=int, default=50)
    args = p.parse_args()
    wav = Path(tempfile.mkdtemp()) / "out.wav"
    text = ["--plan", str(args.text_plan), "--prompt", "Tell me a long story", "--max-new-tokens", "400",
            "--ignore-stop-tokens", "--json"]
    speech = ["--plan", str(args.speech_plan), "--text", "Hello there, this is a longer sentence to speak.",
              "--max-frames", "120", "--out", str(wav), "--json"]
    sweep("native run", [str(BIN / "omni-edge-run"), *text], args.moments, None, 1)
    sweep("native speak", [str(BIN / "omni-edge-run"), "speak", *speech], args.moments, wav, 2)
    sweep("python run", [str(BIN / "omni-edge"), "run", *text], args.moments, None, 3)
    sweep("python speak", [str(BIN / "omni-edge"), "speak", *speech], args.moments, wav, 4)
    return 0


if __name__ == "__main__":
    sys.exit(main())
