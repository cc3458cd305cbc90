"""`omni-edge demo`: the README's main job on the built-in default. Makes the default checkpoint
(Qwen3 architecture, tiny preset), exports it for ONNX Runtime and ExecuTorch with validation,
streams a chat reply through the native controller, then speaks it through the default speech
checkpoint's native chain into WORKDIR/reply.wav."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from omni_edge.cli.console import quietly
from omni_edge.cli.run import run, speak

DEFAULT_WORKDIR = Path("work/demo")  # relative to where it runs: the checkout, for setup.sh
TEXT_CHECKPOINT = "qwen3-tiny"  # the qwen3 tiny preset, seed 0 (the directory name is the manifests' checkpoint_id)
# The text export: also the test suite's `tiny_artifact`, which copies this one when its record
# (EXPORT_RECORD: these options, the checkpoint's recipe, the package's Python sources) matches.
TEXT_EXPORT: dict[str, Any] = {"formats": ["onnx", "pte"], "prefill_chunk": 16, "buckets": [128, 256]}
EXPORT_RECORD = "omni_edge_export.json"


def export_record(checkpoint: Path) -> dict[str, Any]:
    """What made the demo's text artifact: a copy is the same export only if all of it matches."""
    import hashlib

    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return {"options": TEXT_EXPORT, "checkpoint": json.loads((checkpoint / "omni_edge_checkpoint.json").read_text()),
            "python_sources": digest.hexdigest()}


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("demo", help="make the default checkpoint, export it and stream a reply (the README's main job)")
    p.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    p.add_argument("--no-speech", action="store_true", help="only the text reply, not its speech")
    p.add_argument("--prompt", default="What does a context manager do in Python?")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--verbose", action="store_true", help="also show third-party warnings and native logs "
                                                          "(default: in WORKDIR/demo.log)")
    p.set_defaults(func=demo)


def demo(args: argparse.Namespace) -> int:
    return quietly(args, args.workdir / "demo.log", lambda: _steps(args))


def _steps(args: argparse.Namespace) -> int:
    from omni_edge.cli import build_parser
    from omni_edge.export.options import LlmExportOptions, TtsExportOptions
    from omni_edge.export.registry import export_checkpoint, make_checkpoint
    from omni_edge.files import write_text_atomic

    work = args.workdir
    checkpoint = work / TEXT_CHECKPOINT
    if not (checkpoint / "model.safetensors").exists():
        print(f"[demo] making the default checkpoint (Qwen3 architecture, tiny preset) in {checkpoint}", file=sys.stderr)
        make_checkpoint(checkpoint, arch="qwen3", preset="tiny")
    artifact = work / "artifact"
    if not (artifact / "plan.json").exists():
        print(f"[demo] exporting it (ONNX Runtime + ExecuTorch, KV buckets 128/256) to {artifact}", file=sys.stderr)
        export_checkpoint(checkpoint, artifact, LlmExportOptions(formats=tuple(TEXT_EXPORT["formats"]),
                                                                 prefill_chunk=TEXT_EXPORT["prefill_chunk"],
                                                                 buckets=tuple(TEXT_EXPORT["buckets"])))
        write_text_atomic(artifact / EXPORT_RECORD, json.dumps(export_record(checkpoint), indent=2) + "\n")
    plan = artifact / "plan.json"
    print(f"[demo] streaming a reply through the native controller ({plan})", file=sys.stderr)
    run_args = build_parser().parse_args(["run", "--plan", str(plan), "--chat", "--prompt", args.prompt,
                                          "--max-new-tokens", str(args.max_new_tokens)])
    run_args.reply = []
    status = run(run_args)
    if status != 0 or args.no_speech:
        return status

    tts_checkpoint, speech = work / "checkpoint-qwen3-tts-tiny", work / "speech"
    if not (tts_checkpoint / "model.safetensors").exists():
        print(f"[demo] making the default speech checkpoint (Qwen3-TTS shape, tiny preset) in {tts_checkpoint}",
              file=sys.stderr)
        make_checkpoint(tts_checkpoint, arch="qwen3-tts", preset="tiny")
    if not (speech / "plan.json").exists():
        print(f"[demo] exporting it (talker, code predictor, vocoder windows) to {speech}", file=sys.stderr)
        export_checkpoint(tts_checkpoint, speech, TtsExportOptions())
    wav = work / "reply.wav"
    text = "".join(run_args.reply).strip() or args.prompt
    print(f"[demo] speaking the reply through the native speech chain to {wav}", file=sys.stderr)
    speak_args = build_parser().parse_args(["speak", "--plan", str(speech / "plan.json"), "--text", text[:400],
                                            "--out", str(wav), "--max-frames", "150"])
    return speak(speak_args)
