"""`omni-edge`: the one command line of the project; each subcommand lives with its module."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omni_edge import __version__
from omni_edge.runtime.interrupt import GUARD, CancelOnSignal
from omni_edge.runtime.request import GREEDY_BELOW

if TYPE_CHECKING:
    from omni_edge.contracts import ContractError

# run and speak keep the cancel contract (omni_edge.runtime.interrupt) from main()'s first line on.
_GUARD = GUARD  # installed by omni_edge/__init__.py when this is `omni-edge run|speak`


def _conformance(args: argparse.Namespace) -> int:
    from omni_edge.harness.conformance import expand, run_fixtures

    impls = ["python", "native"] if args.impl == "both" else [args.impl]
    failed = total = 0
    for check in run_fixtures(expand(args.fixtures), impls):
        total += 1
        failed += not check.ok
        if not check.ok or not args.quiet:
            print(check.line())
    print(f"{total - failed}/{total} checks passed ({', '.join(impls)})", file=sys.stderr)
    return 1 if failed or total == 0 else 0


def _verify(args: argparse.Namespace) -> int:
    from omni_edge.contracts import ContractError
    from omni_edge.harness.verify_targets import VerifyTargetError, resolve
    from omni_edge.runtime import implementations

    if (args.artifact / "bundle.json").is_file():
        return _verify_bundle(args.artifact)
    try:
        targets = resolve(args.artifact)
    except VerifyTargetError as exc:
        print(f"{exc}")
        return 1
    qualified: dict[Path, bool] = {}
    for component in targets.components:
        shown = args.artifact if targets.components == [args.artifact] else component
        qualified[component] = True
        for name in ["python", "native"] if args.impl == "both" else [args.impl]:
            try:
                verified = implementations.get(name).read_manifest(component)
            except ContractError as exc:
                print(f"[{name}] {shown}: REFUSED {exc.code}: {exc.message}")
                qualified[component] = False
                continue
            art = verified.manifest.artifact
            status = "qualified" if verified.qualified else "NOT qualified"
            extra = f"; not in the manifest: {', '.join(verified.extra_files)}" if verified.extra_files else ""
            print(f"[{name}] {shown}: {len(verified.manifest.files)} files re-hashed, reports re-checked: {status} "
                  f"({verified.manifest.component}, {art.precision}, {art.shape_bucket}){extra}")
            if args.json:
                print(json.dumps(verified.manifest.to_dict(), indent=2))
            qualified[component] &= verified.qualified
    for plan in targets.plans:
        bad = [c.name for c in plan.components if not qualified[c]]
        names = ", ".join(c.name for c in plan.components)
        print(f"{plan.plan}: {'every component qualified' if not bad else 'NOT qualified: ' + ', '.join(bad)} ({names})")
    return 0 if all(qualified.values()) else 1


def _verify_bundle(root: Path) -> int:
    from omni_edge.harness.bundle import BundleError, verify_bundle

    try:
        report = verify_bundle(root)
    except BundleError as exc:
        print(f"{root}: REFUSED {exc}")
        return 1
    print(f"{root}: bundle for {report['target']} ({report['abi']}): {report['files']} files re-hashed, binaries are {report['abi']}")
    print(json.dumps(report))
    return 0


def _make_checkpoint(args: argparse.Namespace) -> int:
    from omni_edge.export.checkpoints import make_checkpoint

    try:
        out = make_checkpoint(args.out, arch=args.arch, preset=args.preset, seed=args.seed,
                              sliding_window=args.sliding_window, train_steps=args.train_steps, thinker=args.thinker)
    except ValueError as exc:
        print(f"omni-edge make-checkpoint: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.arch} {args.preset} checkpoint to {out}")
    return 0


def _quietly(args: argparse.Namespace, log: Path, step: Any) -> int:
    """Runs `step()` with third-party warnings and native logs in `log` (on screen with --verbose)."""
    from omni_edge.console import third_party_to_log

    with third_party_to_log(log, verbose=args.verbose):
        status: int = step()
    if not args.verbose and log.is_file() and log.stat().st_size:
        print(f"third-party warnings and logs: {log} (--verbose shows them here)", file=sys.stderr)
    return status


def _export_tts(args: argparse.Namespace) -> int:
    from omni_edge.export.qwen3_tts import StreamShape, Voice
    from omni_edge.export.tts import TtsExportOptions

    if min(args.first_chunk, args.chunk, args.prefill_chunk, args.left_context) < 1:
        # left context >= 1: a chunk's last samples are released from the next chunk's window
        print("omni-edge export tts: chunk sizes and the left context must be at least 1", file=sys.stderr)
        return 2
    formats = ("onnx", "pte") if args.format == "both" else (args.format,)
    if args.target == "qnn-htp" and not args.soc:
        print("omni-edge export tts: --target qnn-htp needs --soc (e.g. sm8650,x-elite)", file=sys.stderr)
        return 2
    opts = TtsExportOptions(prefill_chunk=args.prefill_chunk, buckets=args.buckets, validate=not args.no_validate,
                            threads=args.threads, stream=StreamShape(args.first_chunk, args.chunk, args.left_context,
                                               adaptive=args.chunk_schedule == "adaptive"),
                            validation_frames=args.validation_frames,
                            formats=formats,
                            voice=Voice(args.speaker, args.language, args.instruct, args.stream_text),
                            precision=(args.precision or "fp32") if args.target == "cpu" else "fp32",
                            block_size=args.block_size)
    return _quietly(args, _log_beside(args.out), lambda: _export_tts_with(args, opts))


def _log_beside(out: Path) -> Path:
    return out.parent / f"{out.name}.export.log"


def _export_tts_with(args: argparse.Namespace, opts: Any) -> int:
    from omni_edge.export.tts import export_tts

    try:
        if args.target == "qnn-htp":
            from omni_edge.export.tts_qnn import export_tts_qnn

            results = export_tts_qnn(args.checkpoint, args.out, opts, tuple(args.soc.split(",")), args.precision or "fp16",
                                     vocoder_on_npu=args.vocoder_on_npu)
        else:
            results = export_tts(args.checkpoint, args.out, opts)
    except ValueError as exc:
        print(f"omni-edge export tts: {exc}", file=sys.stderr)
        return 2
    for component, got in results:
        print(f"wrote {component}" + (f" (validated: {json.dumps(got)})" if got else " (not validated)"))
    return 0


def _export_omni(args: argparse.Namespace) -> int:
    from omni_edge.export.omni import write_omni_plan

    try:
        path = write_omni_plan(args.thinker_plan, args.speech_plan, args.out)
    except (ValueError, OSError, KeyError) as exc:
        print(f"omni-edge export omni: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError("expected positive integers")
    return values


def _sizes(text: str) -> tuple[tuple[int, int], ...]:
    """"448x448,300x200" -> ((448, 448), (300, 200))."""
    sizes = []
    for item in text.split(","):
        w, sep, h = item.strip().partition("x")
        if not sep or not w.isdigit() or not h.isdigit() or int(w) < 1 or int(h) < 1:
            raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT sizes, got {item!r}")
        sizes.append((int(w), int(h)))
    return tuple(sizes)


def _export_llm(args: argparse.Namespace) -> int:
    from omni_edge.export.llm import LlmExportOptions

    formats = ("onnx", "pte") if args.format == "both" else (args.format,)
    opts = LlmExportOptions(formats=formats, prefill_chunk=args.prefill_chunk, buckets=args.buckets, kv=args.kv,
                            window=args.window, overflow=args.overflow, validate=not args.no_validate, threads=args.threads,
                            target=args.target, precision=args.precision, block_size=args.block_size,
                            socs=tuple(args.soc.split(",")), share_weights=args.share_weights,
                            keep_qdq=args.keep_qdq, image_sizes=args.image_sizes)
    return _quietly(args, _log_beside(args.out), lambda: _export_llm_with(args, opts))


def _export_llm_with(args: argparse.Namespace, opts: Any) -> int:
    from omni_edge.export.llm import export_llm

    return _wrote_plans("llm", lambda: export_llm(args.checkpoint, args.out, opts), args.out / "plan.json")


def _wrote_plans(family: str, export: Callable[[], list[Path]], default: Path | None = None) -> int:
    """Runs an export, names the plans it wrote (and the default one); exit 2 with the reason it refused."""
    try:
        plans = export()
    except ValueError as exc:
        print(f"omni-edge export {family}: {exc}", file=sys.stderr)
        return 2
    for plan in plans:
        print(f"wrote {plan}")
    if default is not None:
        print(f"default plan: {default}")
    return 0


def _export_policy(args: argparse.Namespace) -> int:
    from omni_edge.export.pi0_export import PolicyExportOptions, export_policy

    formats = ("onnx", "pte") if args.format == "both" else (args.format,)
    opts = PolicyExportOptions(formats=formats, target=args.target, cameras=tuple(args.cameras or ()),
                               prompt_tokens=args.prompt_tokens, action_spec=args.action_spec,
                               max_observation_age_ms=args.max_observation_age_ms, threads=args.threads,
                               socs=tuple(args.soc.split(",")), precision=args.precision)
    return _quietly(args, _log_beside(args.out),
                    lambda: _wrote_plans("policy", lambda: export_policy(args.checkpoint, args.out, opts)))


def _act(args: argparse.Namespace) -> int:
    """One observation to one action chunk; --json: the last line is the action (or the terminal
    cancelled/error event)."""
    from omni_edge.contracts import ContractError
    from omni_edge.runtime import PolicySession
    from omni_edge.runtime.observation import read_observation

    guard = _GUARD.install()
    try:
        observation, prompt = read_observation(args.observation, args.noise)
    except ValueError as exc:
        print(f"omni-edge act: {exc}", file=sys.stderr)
        return 2
    streams = _Streams(args, ("action",), guard)
    session = _open(PolicySession, args, streams, "act")
    if session is None:
        return streams.end("act") if guard.cancelled else 1
    try:
        result = guard.run(session, lambda: session.act(observation, prompt, deadline_ms=args.deadline_ms,
                                                         on_event=lambda e: guard.keep_going()))
    except ContractError as exc:
        return streams.end("act", exc)
    if args.json:
        print(json.dumps(result), flush=True)
    elif result.get("kind") == "action":
        _print_action(result)
    else:
        print(f"omni-edge act: {result.get('kind')}: {result.get('error') or result.get('finish_reason')}", file=sys.stderr)
    if result.get("kind") == "action":
        return 0
    return guard.exit_code if guard.cancelled else 1


def _print_action(a: dict[str, Any]) -> None:
    t, age = a["timings"], a["observation_age_ms"]
    print(f"action chunk: {a['chunk_size']} steps x {a['action_dim']} ({', '.join(a['action_names'][:4])}"
          f"{', ...' if a['action_dim'] > 4 else ''}; {a['action_units'][0]}), every {a['dt_ms']:g} ms")
    for k, row in enumerate(a["actions"][:3]):
        print(f"  t0+{k * a['dt_ms']:g} ms: " + " ".join(f"{v:+.4f}" for v in row[:8]) + (" ..." if len(row) > 8 else ""))
    late = ""
    if a["deadline_ms"]:
        late = f"; deadline {a['deadline_ms']:g} ms {'MISSED by' if a['deadline_missed'] else 'met with'} " \
               f"{abs(a['lateness_ms']):.1f} ms"
    print(f"observation age {age['at_start']:.1f} ms at start, {age['at_emission']:.1f} ms at emission{late}", file=sys.stderr)
    print(f"preprocess {t['preprocess_ms']:.1f} ms, vision {t['vision_ms']:.1f} ms, prefix {t['prefix_ms']:.1f} ms, "
          f"{len(t['step_ms'])} steps {t['denoise_ms']:.1f} ms, total {t.get('total_ms', 0):.1f} ms", file=sys.stderr)


def _print_event(event: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(event, ensure_ascii=False), flush=True)
    elif event["kind"] == "token":
        print(event["text"], end="", flush=True)
    else:
        error = f", error: {event['error']}" if event.get("error") else ""
        print(f"\n[{event['kind']}: {event['finish_reason']}] prompt {event['n_prompt_tokens']} tok, generated "
              f"{event['n_generated_tokens']} tok, TTFT {event['ttft_ms']:.1f} ms, prefill {event['prefill_tok_s']:.1f} tok/s, "
              f"decode {event['decode_tok_s']:.2f} tok/s, peak RSS {event['peak_rss_mb']:.0f} MB{error}", file=sys.stderr)


def _whole(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: a whole number in [lo, hi] (never wrapped into range by the native side)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"takes a whole number from {lo} to {hi}, not {text}")
        return value
    return parse


def _finite(text: str) -> float:
    """An argparse type: a finite number (nan and inf are refused naming the flag)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"'{text}' is not a finite number")
    return value


def _add_sampling(p: argparse.ArgumentParser) -> None:
    """The sampling flags of run and speak; any one given replaces the plan's sampling (_sampling)."""
    p.add_argument("--temperature", type=_finite, default=None, help=f"below {GREEDY_BELOW:g}: greedy")
    p.add_argument("--top-k", type=_whole(0, 1 << 30), default=None)
    p.add_argument("--top-p", type=_finite, default=None)
    p.add_argument("--min-p", type=_finite, default=None)
    p.add_argument("--repetition-penalty", type=_finite, default=None)
    p.add_argument("--seed", type=_whole(0, (1 << 64) - 1), default=None)


def _sampling(args: argparse.Namespace) -> dict[str, Any] | None:
    fields = {"temperature": args.temperature, "top_k": args.top_k, "top_p": args.top_p, "min_p": args.min_p,
              "repetition_penalty": args.repetition_penalty, "seed": args.seed}
    chosen = {k: v for k, v in fields.items() if v is not None}
    return chosen or None


def _aihub(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from omni_edge.harness import aihub

    try:
        requests = aihub.build_requests(args.kind, args.artifact, args.device, iterations=args.iterations)
        if args.dry_run:
            for request in requests:
                print(json.dumps(asdict(request)))
            return 0
        evidence = aihub.submit(requests, aihub.client())
    except aihub.AihubError as exc:
        print(f"omni-edge aihub: {exc}", file=sys.stderr)
        return 2
    print(f"AI Hub results in {evidence}")
    return 0


def _print_audio_summary(m: dict[str, Any], wav: Path, label: str = "") -> None:
    """One stderr line for a spoken utterance: its end, length, and the playback clock's numbers."""
    print(f"[{label}{m['finish_reason']}] {m['frames']} frames, {m['samples']} samples ({m['audio_ms'] / 1000:.2f} s at "
          f"{m['sample_rate']} Hz) -> {wav}; first PCM {m['first_pcm_ms']:.1f} ms, playback from "
          f"{m['playback_start_ms']:.1f} ms ({m.get('chunk_schedule', 'fixed')} chunks, prebuffer "
          f"{m.get('prebuffer_ms', 0):.0f} ms), RTF {m['rtf']:.3f}, {m['underruns']} underruns "
          f"({m['underrun_ms']:.1f} ms), least lead {m.get('lead_min_ms', -1):.0f} ms", file=sys.stderr)


class _Streams:
    """The JSON lines of a run: each stream's events as they come, and at the end one terminal
    line for every stream whose own never came (the load failed or was cancelled, the request
    failed), so that --json output always ends each stream with its terminal event."""

    def __init__(self, args: argparse.Namespace, names: Sequence[str], guard: CancelOnSignal) -> None:
        self.args, self.names, self.guard = args, names, guard
        self.terminals: dict[str, dict[str, Any]] = {}

    def event(self, stream: str, event: dict[str, Any]) -> bool:
        if "finish_reason" in event:
            self.terminals[stream] = event
        if self.args.json:
            tagged = {"stream": stream, **event} if len(self.names) > 1 else event
            print(json.dumps(tagged, ensure_ascii=False), flush=True)
        return self.guard.keep_going()

    def _line(self, stream: str, line: dict[str, Any]) -> str:
        return json.dumps({"stream": stream, **line} if len(self.names) > 1 else line)

    def guard_weights(self) -> None:
        """A weights file truncated under its mapping mid-run ends every stream with an error
        line and exit 1 instead of a SIGBUS crash (base/mapped_files.h)."""
        from omni_edge import _native

        line = {"kind": "error", "finish_reason": "error", "seq": 0, "reason": "weights_changed",
                "error": "a mapped weights file changed during the run"}
        _native.report_mapped_file_faults("".join(self._line(s, line) + "\n" for s in self.names) if self.args.json else "")

    def end(self, command: str, error: ContractError | None = None) -> int:
        """Ends the streams that did not end; the exit code (128 + signal when cancelled)."""
        kind = "error" if error is not None else "cancelled"
        for stream in self.names:
            if stream in self.terminals or not self.args.json:
                continue
            line: dict[str, Any] = {"kind": kind, "finish_reason": kind, "seq": 0}
            if error is not None:
                line.update(reason=error.code, error=error.message)
            print(self._line(stream, line), flush=True)
        if error is not None:
            print(f"omni-edge {command}: {error.code}: {error.message}", file=sys.stderr)
            return 1
        kinds = {t.get("kind") for t in self.terminals.values()}
        if self.guard.cancelled and (not self.terminals or "cancelled" in kinds):
            return self.guard.exit_code
        return 1 if "error" in kinds else 0


def _open(kind: Any, args: argparse.Namespace, streams: _Streams, command: str) -> Any:
    """The plan's session, or None after ending the streams (a failed or cancelled load)."""
    from omni_edge.contracts import ContractError

    try:
        session = kind.open(args.plan, allow_unqualified=args.allow_unqualified, threads=args.threads)
    except ContractError as exc:
        streams.end(command, exc)
        return None
    if streams.guard.cancelled:  # the signal came while loading: nothing ran
        return None
    streams.guard_weights()
    if getattr(args, "info", False):
        print(json.dumps({"placements": session.placements()}, indent=1), file=sys.stderr)
    return session


def _text_options(args: argparse.Namespace) -> dict[str, Any]:
    """The text stream's request options of `run` (Session.run's keywords), plain or with --speak."""
    return dict(chat=args.chat, system_prompt=args.system or "", prompt_ids=args.prompt_ids or (),
                media=getattr(args, "media", None) or (), max_new_tokens=args.max_new_tokens or 0,
                sampling=_sampling(args), stop_strings=args.stop or (), ignore_stop_tokens=args.ignore_stop_tokens)


class _Media(argparse.Action):
    """--image / --audio: (kind, path) appended to one list, so the order given is the prompt's."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, value: Any,
                 option: str | None = None) -> None:
        kind = "image" if option == "--image" else "audio"
        if not Path(value).is_file():
            parser.error(f"{option} {value}: no such file")
        namespace.media = [*(getattr(namespace, "media", None) or []), (kind, str(Path(value).resolve()))]


def _run_omni(args: argparse.Namespace, prompt: str, guard: CancelOnSignal) -> int:
    """run --speak: the omni plan's text stream on stdout, its audio into the WAV."""
    from omni_edge.contracts import ContractError
    from omni_edge.runtime import OmniSession

    streams = _Streams(args, ("text", "audio"), guard)
    session = _open(OmniSession, args, streams, "run")
    if session is None:
        return streams.end("run") if guard.cancelled else 1

    def on_text(event: dict[str, Any]) -> bool:
        if not args.json:
            _print_event(event, False)
        return streams.event("text", event)

    try:
        result = guard.run(session, lambda: session.run(
            prompt, on_text=on_text, on_audio=lambda event, pcm: streams.event("audio", event), wav=args.speak,
            max_frames=args.max_frames, **_text_options(args)))
    except ContractError as exc:
        return streams.end("run", exc)
    if not args.json:
        _print_audio_summary(result.audio, args.speak, "audio: ")
    return streams.end("run")


def _read_prompt(args: argparse.Namespace) -> str:
    """--prompt, or --prompt-file as UTF-8 text without NUL bytes (as omni-edge-run reads it)."""
    if args.prompt is not None or args.prompt_file is None:
        return str(args.prompt or "")
    path: Path = args.prompt_file
    if path.is_dir():
        raise ValueError(f"--prompt-file {path}: is a directory")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"--prompt-file {path}: cannot read it: {exc.strerror}") from None
    if (nul := data.find(b"\0")) >= 0:
        raise ValueError(f"--prompt-file {path}: holds a NUL byte at offset {nul}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"--prompt-file {path}: is not UTF-8 text (byte {exc.start})") from None


def _run(args: argparse.Namespace) -> int:
    from omni_edge.contracts import ContractError
    from omni_edge.runtime import Session

    guard = _GUARD.install()  # main() installed it already; a caller of _run may not have
    try:
        prompt = _read_prompt(args)
    except ValueError as exc:
        print(f"omni-edge run: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "device", None) is not None:
        from omni_edge.harness.remote_run import run_on_device

        args.prompt = prompt
        return run_on_device(args, "run")
    if getattr(args, "speak", None) is not None:
        return _run_omni(args, prompt, guard)
    streams = _Streams(args, ("text",), guard)
    session = _open(Session, args, streams, "run")
    if session is None:
        return streams.end("run") if guard.cancelled else 1

    def on_event(event: dict[str, Any]) -> bool:
        if not args.json:
            _print_event(event, False)
        if event["kind"] == "token" and getattr(args, "reply", None) is not None:
            args.reply.append(event["text"])
        return streams.event("text", event)

    try:
        guard.run(session, lambda: session.run(
            prompt, on_event=on_event, **_text_options(args)))
    except ContractError as exc:
        return streams.end("run", exc)
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as other CLIs do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return streams.end("run")


def _speak(args: argparse.Namespace) -> int:
    from omni_edge.contracts import ContractError
    from omni_edge.runtime import SpeechSession

    if getattr(args, "device", None) is not None:
        from omni_edge.harness.remote_run import run_on_device

        return run_on_device(args, "speak")
    guard = _GUARD.install()
    streams = _Streams(args, ("audio",), guard)
    session = _open(SpeechSession, args, streams, "speak")
    if session is None:
        return streams.end("speak") if guard.cancelled else 1
    try:
        utterance = guard.run(session, lambda: session.speak(
            args.text or "", text_ids=args.text_ids or (), max_frames=args.max_frames, sampling=_sampling(args),
            prebuffer_ms=args.prebuffer_ms, wav=args.out, on_event=lambda event, pcm: streams.event("audio", event)))
    except ContractError as exc:
        return streams.end("speak", exc)
    if not args.json:
        _print_audio_summary(utterance.metrics, args.out)
    return streams.end("speak")


def _demo(args: argparse.Namespace) -> int:
    return _quietly(args, args.workdir / "demo.log", lambda: _demo_steps(args))


def _demo_steps(args: argparse.Namespace) -> int:
    from omni_edge.export.checkpoints import make_checkpoint, make_tts_checkpoint
    from omni_edge.export.llm import LlmExportOptions, export_llm
    from omni_edge.export.tts import TtsExportOptions, export_tts

    work = args.workdir
    checkpoint = work / "checkpoint-qwen3-tiny"
    if not (checkpoint / "model.safetensors").exists():
        print(f"[demo] making the default checkpoint (Qwen3 architecture, tiny preset) in {checkpoint}", file=sys.stderr)
        make_checkpoint(checkpoint, preset="tiny")
    artifact = work / "artifact"
    if not (artifact / "plan.json").exists():
        print(f"[demo] exporting it (ONNX Runtime + ExecuTorch, KV buckets 256/512) to {artifact}", file=sys.stderr)
        export_llm(checkpoint, artifact, LlmExportOptions(formats=("onnx", "pte"), prefill_chunk=32, buckets=(256, 512)))
    plan = artifact / "plan.json"
    print(f"[demo] streaming a reply through the native controller ({plan})", file=sys.stderr)
    run_args = build_parser().parse_args(["run", "--plan", str(plan), "--chat", "--prompt", args.prompt,
                                          "--max-new-tokens", str(args.max_new_tokens)])
    run_args.reply = []
    status = _run(run_args)
    if status != 0 or args.no_speech:
        return status

    tts_checkpoint, speech = work / "checkpoint-qwen3-tts-tiny", work / "speech"
    if not (tts_checkpoint / "model.safetensors").exists():
        print(f"[demo] making the default speech checkpoint (Qwen3-TTS shape, tiny preset) in {tts_checkpoint}",
              file=sys.stderr)
        make_tts_checkpoint(tts_checkpoint, preset="tiny")
    if not (speech / "plan.json").exists():
        print(f"[demo] exporting it (talker, code predictor, vocoder windows) to {speech}", file=sys.stderr)
        export_tts(tts_checkpoint, speech, TtsExportOptions())
    wav = work / "reply.wav"
    text = "".join(run_args.reply).strip() or args.prompt
    print(f"[demo] speaking the reply through the native speech chain to {wav}", file=sys.stderr)
    speak_args = build_parser().parse_args(["speak", "--plan", str(speech / "plan.json"), "--text", text[:400],
                                            "--out", str(wav), "--max-frames", "150"])
    return _speak(speak_args)


def build_parser() -> argparse.ArgumentParser:
    from omni_edge.harness.remote_run import add_device_arguments

    parser = argparse.ArgumentParser(prog="omni-edge", description="On-device Omni-style multi-stage model serving.")
    parser.add_argument("--version", action="version", version=f"omni-edge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("conformance", help="run stage-contract fixtures against the Python and native implementations")
    p.add_argument("fixtures", nargs="+", type=Path, help="fixture JSON files or directories of them")
    p.add_argument("--impl", choices=["python", "native", "both"], default="both")
    p.add_argument("--quiet", action="store_true", help="print failed checks only")
    p.set_defaults(func=_conformance)

    p = sub.add_parser("verify", help="re-hash artifacts and re-check their reports: what export or bundle wrote")
    p.add_argument("artifact", type=Path, help="a component directory, a plan, an export directory (every component "
                                               "and plan in it) or a bundle directory (with bundle.json)")
    p.add_argument("--impl", choices=["python", "native", "both"], default="both")
    p.add_argument("--json", action="store_true", help="also print the manifest")
    p.set_defaults(func=_verify)

    p = sub.add_parser("make-checkpoint", help="write a local checkpoint of a real architecture (random/briefly trained)")
    p.add_argument("--arch", default="qwen3", choices=["qwen3", "qwen3-tts", "qwen2.5-omni", "pi0"],
                   help="qwen2.5-omni: a Qwen2.5-Omni thinker (vision and audio encoders, M-RoPE decoder)")
    p.add_argument("--preset", default="tiny", choices=["tiny", "small", "bench"],
                   help="qwen3: tiny|small|bench; qwen3-tts, qwen2.5-omni: tiny|small")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sliding-window", type=int, default=None, help="make every layer sliding-window attention")
    p.add_argument("--train-steps", type=int, default=None, help="override the preset's training steps (0: random weights)")
    p.add_argument("--thinker", type=Path, default=None,
                   help="qwen3-tts: an omni talker reading this Qwen3 checkpoint's hidden states (its text side)")
    p.set_defaults(func=_make_checkpoint)

    p = sub.add_parser("export", help="export a checkpoint into per-stage artifacts")
    export_sub = p.add_subparsers(dest="family", required=True)
    e = export_sub.add_parser("llm", help="a text LLM (Qwen3): embedding, prefill, decode, LM head")
    e.add_argument("--checkpoint", type=Path, required=True)
    e.add_argument("--out", type=Path, required=True)
    e.add_argument("--format", choices=["onnx", "pte", "both"], default="onnx")
    e.add_argument("--prefill-chunk", type=int, default=32)
    e.add_argument("--buckets", type=_int_list, default=(512, 1024), help="context buckets, e.g. 512,1024")
    e.add_argument("--kv", choices=["full", "ring"], default="full")
    e.add_argument("--window", type=int, default=None, help="ring width (default: the checkpoint's sliding window)")
    e.add_argument("--overflow", choices=["refuse", "ring"], default="refuse", help="full KV past the last bucket")
    e.add_argument("--no-validate", action="store_true", help="skip validation (the artifact will not qualify)")
    e.add_argument("--threads", type=int, default=0)
    e.add_argument("--target", choices=["cpu", "qnn-htp"], default="cpu",
                   help="qnn-htp: quantized graphs compiled into QNN context binaries, validated on the HTP backend")
    e.add_argument("--precision", choices=["fp32", "int8", "int4", "w8a16", "w4a16", "a16w16", "fp16"], default="",
                   help="cpu: fp32 (default), int8 or int4 block-quantized weights (ONNX Runtime MatMulNBits); "
                        "qnn-htp: w8a16 (default), w4a16, a16w16, fp16")
    e.add_argument("--block-size", type=int, default=32, help="cpu int8/int4: weights per quantization block (default 32)")
    e.add_argument("--soc", default="sm8750", help="sm8750, sm8650, x-elite, sa8775p, qcs6490 (comma-separated for several)")
    e.add_argument("--share-weights", action="store_true",
                   help="qnn-htp: also write a twin whose prefill and decode graphs share weights in one context (HTP v73+)")
    e.add_argument("--keep-qdq", action="store_true",
                   help="qnn-htp: keep the quantized source graphs in qdq/ (for `omni-edge aihub compile`)")
    e.add_argument("--image-sizes", type=_sizes, default=((448, 448),),
                   help="multimodal checkpoints: image sizes (WxH, comma-separated) to compile a vision graph for "
                        "(one per patch grid; default 448x448)")
    e.add_argument("--verbose", action="store_true",
                   help="also show third-party warnings and native logs (default: in OUT.export.log beside OUT)")
    e.set_defaults(func=_export_llm)

    e = export_sub.add_parser("policy", help="a π0 vision-language-action policy: vision, prefix, action expert")
    e.add_argument("--checkpoint", type=Path, required=True)
    e.add_argument("--out", type=Path, required=True)
    e.add_argument("--format", choices=["onnx", "pte", "both"], default="onnx")
    e.add_argument("--target", choices=["cpu", "qnn-htp"], default="cpu")
    e.add_argument("--cameras", type=lambda t: [c for c in t.split(",") if c], default=None,
                   help="camera names in the prefix's order (default: base_0_rgb,left_wrist_0_rgb)")
    e.add_argument("--prompt-tokens", type=_whole(1, 4096), default=0, help="text slots of the prefix (default 48)")
    e.add_argument("--action-spec", type=Path, default=None,
                   help='JSON {"names": [...], "units": [...], "dt_ms": ...} declaring the action dimensions')
    e.add_argument("--max-observation-age-ms", type=_finite, default=1000.0,
                   help="older observations are refused as stale (0: no limit; default 1000)")
    e.add_argument("--soc", default="sm8750", help="qnn-htp: sm8750, sm8650, x-elite, sa8775p, qcs6490 (comma-separated)")
    e.add_argument("--precision", choices=["fp16"], default="", help="qnn-htp: fp16 (the default)")
    e.add_argument("--threads", type=int, default=0)
    e.add_argument("--verbose", action="store_true",
                   help="also show third-party warnings and native logs (default: in OUT.export.log beside OUT)")
    e.set_defaults(func=_export_policy)

    e = export_sub.add_parser("tts", help="a Qwen3-TTS-shaped speech model: talker, code predictor, vocoder")
    e.add_argument("--checkpoint", type=Path, required=True)
    e.add_argument("--out", type=Path, required=True)
    e.add_argument("--prefill-chunk", type=int, default=32)
    e.add_argument("--buckets", type=_int_list, default=(512, 1024), help="talker context buckets (text + frames)")
    e.add_argument("--first-chunk", type=int, default=1, help="frames in the first vocoder chunk")
    e.add_argument("--chunk", type=int, default=25,
                   help="frames per vocoder chunk after the first (adaptive: the most a chunk grows to)")
    e.add_argument("--chunk-schedule", choices=["adaptive", "fixed"], default="adaptive",
                   help="adaptive: chunks grow as the audio already sent allows, playback from the first PCM "
                        "(window graphs for every size on the way); fixed: every chunk --chunk frames, a 200 ms "
                        "prebuffer by default")
    e.add_argument("--left-context", type=int, default=72, help="frames of left context per vocoder chunk")
    e.add_argument("--format", choices=["onnx", "pte", "both"], default="onnx",
                   help="ONNX Runtime graphs, an ExecuTorch program (XNNPACK), or both")
    e.add_argument("--target", choices=["cpu", "qnn-htp"], default="cpu",
                   help="qnn-htp: QNN context binaries per SoC, every graph on the NPU")
    e.add_argument("--precision", default="",
                   help="cpu: fp32 (default), int8 / int4 (ONNX Runtime MatMulNBits for the talker and code "
                        "predictor); qnn-htp: fp16 (default), or w8a16 / a16w16 / w4a16 (calibrated on the shipped text)")
    e.add_argument("--block-size", type=int, default=32, help="cpu int8/int4: weights per quantization block")
    e.add_argument("--soc", default="", help="qnn-htp: comma-separated SoCs, e.g. sm8650,x-elite")
    e.add_argument("--vocoder-on-npu", action="store_true",
                   help="qnn-htp: compile the vocoder windows for the HTP too (default: they run on the CPU)")
    e.add_argument("--speaker", default="", help="a Qwen3-TTS release's speaker (CustomVoice), e.g. vivian")
    e.add_argument("--language", default="auto", help="a Qwen3-TTS release's language, e.g. english (default: auto)")
    e.add_argument("--instruct", default="", help="a Qwen3-TTS release's instruction (1.7B), e.g. 'Speak slowly.'")
    e.add_argument("--stream-text", action="store_true",
                   help="a Qwen3-TTS release: only the first text token in the prompt, the rest read one per frame")
    e.add_argument("--no-validate", action="store_true")
    e.add_argument("--validation-frames", type=int, default=48, help="frames spoken to validate the artifact")
    e.add_argument("--threads", type=int, default=0)
    e.add_argument("--verbose", action="store_true",
                   help="also show third-party warnings and native logs (default: in OUT.export.log beside OUT)")
    e.set_defaults(func=_export_tts)

    e = export_sub.add_parser("omni", help="join a thinker plan and a speech plan into one omni plan (thinker -> talker -> vocoder)")
    e.add_argument("--thinker-plan", type=Path, required=True, help="a text LLM plan (export llm)")
    e.add_argument("--speech-plan", type=Path, required=True,
                   help="a speech plan whose talker reads the thinker (make-checkpoint --arch qwen3-tts --thinker)")
    e.add_argument("--out", type=Path, required=True, help="directory for plan.json (artifacts are referenced)")
    e.set_defaults(func=_export_omni)

    p = sub.add_parser("aihub", help="compile or profile a QNN component on Qualcomm AI Hub's hosted devices")
    p.add_argument("kind", choices=["compile", "profile"])
    p.add_argument("--artifact", type=Path, required=True, help="a QNN component directory (thinker-qnn-<soc>-<precision>)")
    p.add_argument("--device", required=True, help='an AI Hub device name, e.g. "Samsung Galaxy S25"')
    p.add_argument("--iterations", type=int, default=20, help="profile: runs per graph on the device")
    p.add_argument("--dry-run", action="store_true", help="print the requests as JSON lines and submit nothing")
    p.set_defaults(func=_aihub)

    p = sub.add_parser("run", help="stream a generation through the native controller")
    p.add_argument("--plan", type=Path, required=True)
    prompt = p.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt")
    prompt.add_argument("--prompt-file", type=Path)
    prompt.add_argument("--prompt-ids", type=lambda t: [int(v) for v in t.split(",")], help="exact token ids: 1,2,3")
    p.add_argument("--chat", action="store_true", help="format the prompt as a ChatML user turn")
    p.add_argument("--system", default=None)
    p.add_argument("--image", action=_Media, metavar="IMG", help="a PNG/JPEG before the prompt (repeatable; a "
                   "multimodal plan's vision encoder reads it; media keep the order given)")
    p.add_argument("--audio", action=_Media, metavar="WAV", help="a WAV before the prompt (repeatable; the audio encoder)")
    p.add_argument("--max-new-tokens", type=_whole(0, 1 << 30), default=None)
    _add_sampling(p)
    p.add_argument("--stop", action="append", help="a stop string (repeatable)")
    p.add_argument("--ignore-stop-tokens", action="store_true")
    p.add_argument("--json", action="store_true", help="one JSON object per event line")
    p.add_argument("--threads", type=_whole(0, 1024), default=0, help="0: every core (more are capped to the cores)")
    p.add_argument("--allow-unqualified", action="store_true")
    p.add_argument("--info", action="store_true", help="print where each graph runs")
    p.add_argument("--speak", type=Path, default=None,
                   help="an omni plan (thinker -> talker -> vocoder): also speak the reply into this WAV")
    p.add_argument("--max-frames", type=_whole(0, 1 << 20), default=0, help="with --speak: at most this many 80 ms frames")
    add_device_arguments(p)
    p.set_defaults(func=_run)

    p = sub.add_parser("act", help="one observation to one action chunk through a policy plan, natively")
    p.add_argument("--plan", type=Path, required=True)
    p.add_argument("--observation", type=Path, required=True,
                   help='OBS.json: {"timestamp_ms", "images": {camera: file}, "state": [...], "prompt"}')
    p.add_argument("--noise", type=Path, default=None, help="NOISE.npy: float32 (chunk, action_dim), the flow's x_1")
    p.add_argument("--deadline-ms", type=_finite, default=0.0,
                   help="the action is due this long after the observation's capture (reported, 0: none)")
    p.add_argument("--json", action="store_true", help="JSON lines; the last is the action (or cancelled/error)")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--allow-unqualified", action="store_true")
    p.add_argument("--info", action="store_true", help="print where each graph runs")
    p.set_defaults(func=_act)

    p = sub.add_parser("speak", help="text to a WAV through a speech plan (talker -> vocoder), streamed natively")
    p.add_argument("--plan", type=Path, required=True)
    text = p.add_mutually_exclusive_group(required=True)
    text.add_argument("--text")
    text.add_argument("--text-ids", type=lambda t: [int(v) for v in t.split(",")], help="exact token ids: 1,2,3")
    p.add_argument("--out", type=Path, required=True, help="the WAV to write (16-bit mono)")
    p.add_argument("--max-frames", type=_whole(0, 1 << 20), default=0, help="at most this many 80 ms frames (0: the plan's limit)")
    p.add_argument("--prebuffer-ms", type=float, default=-1.0,
                   help="audio the playback clock queues before it starts playing (0: at the first PCM; "
                        "default: the plan's, 0 with an adaptive chunk schedule, 200 with a fixed one)")
    _add_sampling(p)
    p.add_argument("--json", action="store_true", help="one JSON object per event line; the last has the metrics")
    p.add_argument("--threads", type=_whole(0, 1024), default=0, help="0: every core (more are capped to the cores)")
    p.add_argument("--allow-unqualified", action="store_true")
    p.add_argument("--info", action="store_true", help="print where each graph runs")
    add_device_arguments(p)
    p.set_defaults(func=_speak)

    from omni_edge.harness.commands import add_parsers

    add_parsers(sub)

    p = sub.add_parser("demo", help="make the default checkpoint, export it and stream a reply (the README's main job)")
    p.add_argument("--workdir", type=Path, default=Path("work/demo"))
    p.add_argument("--no-speech", action="store_true", help="only the text reply, not its speech")
    p.add_argument("--prompt", default="What does a context manager do in Python?")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--verbose", action="store_true", help="also show third-party warnings and native logs "
                                                          "(default: in WORKDIR/demo.log)")
    p.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    guarded = list(sys.argv[1:] if argv is None else argv)[:1] in (["run"], ["speak"])
    if guarded:
        _GUARD.install()  # before the imports and the load: a signal from here on cancels cleanly
    args = build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
    finally:
        if guarded and argv is None:  # the process ends here: keep the contract through its shutdown
            sys.stdout.flush()
            _GUARD.ignore_until_exit()
    return result


if __name__ == "__main__":
    sys.exit(main())
