"""`omni-edge make-checkpoint` and `omni-edge export llm|tts|policy|omni|vad`: the architectures and
their presets come from the registry (omni_edge.export.registry); each export builds its options
(the target's, declared once in flags.export_target, and its own), and the checkpoint's own
architecture exports it. A refusal (bad options, a checkpoint the command does not take) exits 2
with the reason, before any work."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omni_edge.cli import flags
from omni_edge.cli.console import log_beside, quietly
from omni_edge.export.options import TARGETS
from omni_edge.export.registry import ARCHITECTURES


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("make-checkpoint", help="write a local checkpoint of a real architecture (random/briefly trained)")
    p.add_argument("--arch", default="qwen3", choices=[a.name for a in ARCHITECTURES],
                   help="; ".join(f"{a.name}: {a.summary}" for a in ARCHITECTURES))
    p.add_argument("--preset", default="tiny", choices=sorted({preset for a in ARCHITECTURES for preset in a.presets}),
                   help="; ".join(f"{a.name}: {'|'.join(a.presets)}" for a in ARCHITECTURES))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sliding-window", type=flags.positive, default=None, help="qwen3: every layer sliding-window attention")
    p.add_argument("--train-steps", type=flags.whole(0, 1 << 20), default=None,
                   help="qwen3: override the preset's training steps (0: random weights)")
    p.add_argument("--thinker", type=Path, default=None,
                   help="qwen3-tts: an omni talker reading this Qwen3 checkpoint's hidden states (its text side)")
    p.add_argument("--from-gguf", type=Path, default=None, metavar="MODEL.gguf",
                   help="dequantize a GGUF file (llama, qwen2, qwen3) into a float32 checkpoint directory instead; "
                        "its tokenizer and chat template come from the file's metadata")
    p.set_defaults(func=make_checkpoint)

    p = sub.add_parser("export", help="export a checkpoint into per-stage artifacts")
    export_sub = p.add_subparsers(dest="family", required=True)
    _llm_parser(export_sub)
    _policy_parser(export_sub)
    _tts_parser(export_sub)
    e = export_sub.add_parser("omni", help="an omni plan (thinker -> talker -> vocoder): every stage of an omni checkpoint "
                                           "(--checkpoint), or a thinker plan and a speech plan joined")
    e.add_argument("--checkpoint", type=Path, help="an omni checkpoint (minicpmo-4.5 with assets/token2wav): export all "
                                                   "three stages and the encoders")
    e.add_argument("--voice", type=Path, help="with --checkpoint: the voice prompt's WAV (default: a synthetic voice)")
    e.add_argument("--thinker-plan", type=Path, help="a text LLM plan (export llm)")
    e.add_argument("--speech-plan", type=Path,
                   help="a speech plan whose talker reads the thinker (make-checkpoint --arch qwen3-tts --thinker)")
    e.add_argument("--out", type=Path, required=True, help="directory for plan.json")
    e.add_argument("--target", choices=TARGETS, default="cpu",
                   help="with --checkpoint: qnn-htp compiles the encoders, thinker and talker per SoC (token2wav stays "
                        "on the CPU)")
    e.add_argument("--precision", default="", help="qnn-htp: the thinker's, w8a16 (default), w4a16, a16w16 or fp16 "
                                                   "(the encoders and talker are fp16)")
    flags.soc(e)
    flags.threads(e)
    e.add_argument("--no-validate", action="store_true", help="with --checkpoint: skip validation (it will not qualify)")
    flags.verbose(e)
    e.set_defaults(func=export_omni)
    e = export_sub.add_parser("vad", help="the voice activity detector of realtime sessions (Silero VAD v6 from the "
                                          "silero-vad package), as a validated component; --plan attaches it")
    e.add_argument("--out", type=Path, required=True, help="directory for the vad-onnx component")
    e.add_argument("--plan", type=Path, action="append", default=[],
                   help="a plan to give a voice_activity section naming the component (repeatable)")
    e.set_defaults(func=export_vad)


def _takers(task: str) -> str:
    return ", ".join(a.name for a in ARCHITECTURES if a.task == task)


def _llm_parser(export_sub: Any) -> None:
    e = export_sub.add_parser("llm", help=f"a text LLM ({_takers('llm')}): embedding, prefill, decode, LM head")
    flags.export_target(e, "cpu: fp32 (default), int8 or int4 block-quantized weights (ONNX Runtime MatMulNBits); "
                           "qnn-htp: w8a16 (default), w4a16, a16w16, fp16")
    e.add_argument("--prefill-chunk", type=flags.positive, default=32)
    e.add_argument("--buckets", type=flags.positive_list, default=(512, 1024), help="context buckets, e.g. 512,1024")
    e.add_argument("--kv", choices=["full", "ring"], default="full")
    e.add_argument("--window", type=flags.positive, default=None, help="ring width (default: the checkpoint's sliding window)")
    e.add_argument("--overflow", choices=["refuse", "ring"], default="refuse", help="full KV past the last bucket")
    e.add_argument("--attention", choices=["fused", "masked"], default="fused",
                   help="CPU ONNX graphs of a full cache: ONNX Runtime's fused attention over the valid positions, "
                        "or the masked form over the whole bucket (the HTP's, and a ring's)")
    e.add_argument("--share-weights", action="store_true",
                   help="qnn-htp: also write a twin whose prefill and decode graphs share weights in one context (HTP v73+)")
    e.add_argument("--keep-qdq", action="store_true",
                   help="qnn-htp: keep the quantized source graphs in qdq/ (for `omni-edge aihub compile`)")
    e.add_argument("--image-sizes", type=flags.sizes, default=((448, 448),),
                   help="multimodal checkpoints: image sizes (WxH, comma-separated) to compile a vision graph for "
                        "(one per patch grid; default 448x448)")
    e.set_defaults(func=export_llm)


def _policy_parser(export_sub: Any) -> None:
    e = export_sub.add_parser("policy", help=f"a vision-language-action policy ({_takers('policy')}): vision, prefix, "
                                             "action expert")
    flags.export_target(e, "cpu: fp32; qnn-htp: fp16 (the defaults), or w8a16 for InternVLA-A1 (8-bit decoder weights)", blocks=False,
                        skip_validation=False)
    e.add_argument("--cameras", type=flags.names, default=(),
                   help="camera names in the prefix's order (default: base_0_rgb,left_wrist_0_rgb)")
    e.add_argument("--prompt-tokens", type=flags.whole(1, 4096), default=0, help="text slots of the prefix (default 48)")
    e.add_argument("--action-spec", type=Path, default=None,
                   help='JSON {"names": [...], "units": [...], "dt_ms": ...} declaring the action dimensions')
    e.add_argument("--max-observation-age-ms", type=flags.finite, default=1000.0,
                   help="older observations are refused as stale (0: no limit; default 1000)")
    e.set_defaults(func=export_policy)


def _tts_parser(export_sub: Any) -> None:
    e = export_sub.add_parser("tts", help=f"a speech model ({_takers('tts')}): talker, code predictor, vocoder")
    flags.export_target(e, "cpu: fp32 (default), int8 / int4 (ONNX Runtime MatMulNBits for the talker and code "
                           "predictor); qnn-htp: fp16 (default), or w8a16 / a16w16 / w4a16 (calibrated on the shipped text)")
    e.add_argument("--prefill-chunk", type=flags.positive, default=32)
    e.add_argument("--buckets", type=flags.positive_list, default=(512, 1024), help="talker context buckets (text + frames)")
    e.add_argument("--first-chunk", type=flags.positive, default=1, help="frames in the first vocoder chunk")
    e.add_argument("--chunk", type=flags.positive, default=25,
                   help="frames per vocoder chunk after the first (adaptive: the most a chunk grows to)")
    e.add_argument("--chunk-schedule", choices=["adaptive", "fixed"], default="adaptive",
                   help="adaptive: chunks grow as the audio already sent allows, playback from the first PCM "
                        "(window graphs for every size on the way); fixed: every chunk --chunk frames, a 200 ms "
                        "prebuffer by default")
    # left context >= 1: a chunk's last samples are released from the next chunk's window
    e.add_argument("--left-context", type=flags.positive, default=72, help="frames of left context per vocoder chunk")
    e.add_argument("--vocoder-on-npu", action="store_true",
                   help="qnn-htp: compile the vocoder windows for the HTP too (default: they run on the CPU)")
    e.add_argument("--speaker", default="", help="a Qwen3-TTS release's speaker (CustomVoice), e.g. vivian")
    e.add_argument("--language", default="auto", help="a Qwen3-TTS release's language, e.g. english (default: auto)")
    e.add_argument("--instruct", default="", help="a Qwen3-TTS release's instruction (1.7B), e.g. 'Speak slowly.'")
    e.add_argument("--stream-text", action="store_true",
                   help="a Qwen3-TTS release: only the first text token in the prompt, the rest read one per frame")
    e.add_argument("--validation-frames", type=flags.positive, default=48, help="frames spoken to validate the artifact")
    e.set_defaults(func=export_tts)


def make_checkpoint(args: argparse.Namespace) -> int:
    from omni_edge.export.checkpoint import read_record
    from omni_edge.export.registry import make_checkpoint

    try:
        out = make_checkpoint(args.out, arch=args.arch, preset=args.preset, seed=args.seed, from_gguf=args.from_gguf,
                              sliding_window=args.sliding_window, train_steps=args.train_steps, thinker=args.thinker)
    except ValueError as exc:
        print(f"omni-edge make-checkpoint: {exc}", file=sys.stderr)
        return 2
    if args.from_gguf is not None:
        source = read_record(out)["source"]
        print(f"wrote a {source['architecture']} checkpoint to {out}, dequantized from "
              f"{', '.join(source['dequantized_from']) or 'float tensors'} ({args.from_gguf.name})")
    else:
        print(f"wrote {args.arch} {args.preset} checkpoint to {out}")
    return 0


def _export(args: argparse.Namespace, options: Callable[[], Any], show: Callable[[Any], None]) -> int:
    """Builds the options (refused here, before anything is imported or written), exports with
    third-party logs beside OUT, shows what was written; exit 2 with the reason of a refusal."""
    from omni_edge.export.registry import export_checkpoint

    def refused(exc: ValueError) -> int:
        print(f"omni-edge export {args.family}: {exc}", file=sys.stderr)
        return 2

    try:
        opts = options()
    except ValueError as exc:
        return refused(exc)

    def step() -> int:
        try:
            show(export_checkpoint(args.checkpoint, args.out, opts))
        except ValueError as exc:
            return refused(exc)
        return 0

    return quietly(args, log_beside(args.out), step)


def _show_plans(default: Path | None) -> Callable[[list[Path]], None]:
    def show(plans: list[Path]) -> None:
        for plan in plans:
            print(f"wrote {plan}")
        if default is not None:
            print(f"default plan: {default}")
    return show


def export_llm(args: argparse.Namespace) -> int:
    from omni_edge.export.options import LlmExportOptions

    return _export(args, lambda: LlmExportOptions(
        **flags.target_options(args), prefill_chunk=args.prefill_chunk, buckets=args.buckets, kv=args.kv,
        window=args.window, overflow=args.overflow, attention=args.attention, share_weights=args.share_weights, keep_qdq=args.keep_qdq,
        image_sizes=args.image_sizes), _show_plans(args.out / "plan.json"))


def export_policy(args: argparse.Namespace) -> int:
    from omni_edge.export.options import PolicyExportOptions

    return _export(args, lambda: PolicyExportOptions(
        **flags.target_options(args), cameras=args.cameras, prompt_tokens=args.prompt_tokens,
        action_spec=args.action_spec, max_observation_age_ms=args.max_observation_age_ms), _show_plans(None))


def export_tts(args: argparse.Namespace) -> int:
    from omni_edge.export.options import TtsExportOptions
    from omni_edge.export.speech import StreamShape, Voice

    def show(results: list[tuple[Path, dict[str, float]]]) -> None:
        for component, got in results:
            print(f"wrote {component}" + (f" (validated: {json.dumps(got)})" if got else " (not validated)"))

    return _export(args, lambda: TtsExportOptions(
        **flags.target_options(args), prefill_chunk=args.prefill_chunk, buckets=args.buckets,
        stream=StreamShape(args.first_chunk, args.chunk, args.left_context, adaptive=args.chunk_schedule == "adaptive"),
        validation_frames=args.validation_frames, voice=Voice(args.speaker, args.language, args.instruct, args.stream_text),
        vocoder_on_npu=args.vocoder_on_npu), show)


def export_omni(args: argparse.Namespace) -> int:
    if args.checkpoint is not None:
        if args.thinker_plan is not None or args.speech_plan is not None:
            print("omni-edge export omni: --checkpoint or --thinker-plan/--speech-plan, not both", file=sys.stderr)
            return 2
        return _export_omni_checkpoint(args)
    if args.thinker_plan is None or args.speech_plan is None:
        print("omni-edge export omni: give --checkpoint, or both --thinker-plan and --speech-plan", file=sys.stderr)
        return 2
    from omni_edge.export.omni import write_omni_plan

    try:
        path = write_omni_plan(args.thinker_plan, args.speech_plan, args.out)
    except (ValueError, OSError, KeyError) as exc:
        print(f"omni-edge export omni: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


def export_vad(args: argparse.Namespace) -> int:
    from omni_edge.export.vad import attach
    from omni_edge.export.vad import export_vad as export

    missing = [str(p) for p in args.plan if not p.is_file()]
    if missing:
        print(f"omni-edge export vad: no such plan: {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        component = export(args.out)
        for plan in args.plan:
            attach(plan, component)
    except (ValueError, OSError) as exc:
        print(f"omni-edge export vad: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {component}" + "".join(f"\nattached to {p}" for p in args.plan))
    return 0


def _export_omni_checkpoint(args: argparse.Namespace) -> int:
    """Every stage of an omni checkpoint (its architecture's `export llm`, which writes
    plan.omni-onnx.json beside the thinker's plans); plan.json becomes the omni plan."""
    from omni_edge.export.options import LlmExportOptions

    if args.voice is not None and not args.voice.is_file():
        print(f"omni-edge export omni: --voice {args.voice}: no such file", file=sys.stderr)
        return 2

    def show(plans: list[Path]) -> None:
        omni = next((p for p in plans if p.name.startswith("plan.omni-")), None)  # the first SoC's, on the HTP
        if omni is None:
            raise ValueError(f"{args.checkpoint}: not an omni checkpoint (no three-stage plan: a MiniCPM-o 4.5 "
                             "directory with assets/token2wav/ is)")
        shutil.copy2(omni, args.out / "plan.json")
        _show_plans(args.out / "plan.json")(plans)

    return _export(args, lambda: LlmExportOptions(target=args.target, precision=args.precision, socs=args.socs,
                                                  threads=args.threads, validate=not args.no_validate, voice=args.voice),
                   show)
