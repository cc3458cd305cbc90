"""`omni-edge run`, `speak` and `act`: one request through a plan's native session, in-process
or on a device (--device), under the cancel contract (omni_edge.interrupt): a signal at
any moment cancels every stage's next step, each stream ends with its one terminal event, and
the exit code is 128 + the signal."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from omni_edge.cli import flags
from omni_edge.cli.output import Streams, open_session, print_action, print_audio_summary, print_event, print_line
from omni_edge.interrupt import GUARD, CancelOnSignal


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("run", help="stream a generation through the native controller")
    p.add_argument("--plan", type=Path, required=True)
    prompt = p.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt")
    prompt.add_argument("--prompt-file", type=Path)
    prompt.add_argument("--prompt-ids", type=flags.token_ids, help="exact token ids: 1,2,3")
    p.add_argument("--chat", action="store_true", help="format the prompt as a ChatML user turn")
    p.add_argument("--system", default=None)
    p.add_argument("--image", action=_Media, metavar="IMG", help="a PNG/JPEG before the prompt (repeatable; a "
                   "multimodal plan's vision encoder reads it; media keep the order given)")
    p.add_argument("--audio", action=_Media, metavar="WAV", help="a WAV before the prompt (repeatable; the audio encoder)")
    p.add_argument("--max-new-tokens", type=flags.whole(0, 1 << 30), default=None)
    flags.sampling(p)
    p.add_argument("--stop", action="append", help="a stop string (repeatable)")
    p.add_argument("--ignore-stop-tokens", action="store_true")
    p.add_argument("--json", action="store_true", help="one JSON object per event line")
    flags.session(p)
    p.add_argument("--speak", type=Path, default=None,
                   help="an omni plan (thinker -> talker -> vocoder): also speak the reply into this WAV")
    p.add_argument("--max-frames", type=flags.whole(0, 1 << 20), default=0,
                   help="with --speak: at most this many talker frames (codes)")
    flags.device(p, required=False)
    flags.runtime(p)
    p.set_defaults(func=run)

    p = sub.add_parser("act", help="one observation to one action chunk through a policy plan, natively")
    p.add_argument("--plan", type=Path, required=True)
    p.add_argument("--observation", type=Path, required=True,
                   help='OBS.json: {"timestamp_ms", "images": {camera: file}, "state": [...], "prompt"}')
    p.add_argument("--noise", type=Path, default=None, help="NOISE.npy: float32 (chunk, action_dim), the flow's x_1")
    p.add_argument("--deadline-ms", type=flags.finite, default=0.0,
                   help="the action is due this long after the observation's capture (reported, 0: none)")
    p.add_argument("--json", action="store_true", help="JSON lines; the last is the action (or cancelled/error)")
    flags.session(p)
    p.set_defaults(func=act)

    p = sub.add_parser("speak", help="text to a WAV through a speech plan (talker -> vocoder), streamed natively")
    p.add_argument("--plan", type=Path, required=True)
    text = p.add_mutually_exclusive_group(required=True)
    text.add_argument("--text")
    text.add_argument("--text-ids", type=flags.token_ids, help="exact token ids: 1,2,3")
    p.add_argument("--out", type=Path, required=True, help="the WAV to write (16-bit mono)")
    p.add_argument("--max-frames", type=flags.whole(0, 1 << 20), default=0,
                   help="at most this many 80 ms frames (0: the plan's limit)")
    p.add_argument("--prebuffer-ms", type=float, default=-1.0,
                   help="audio the playback clock queues before it starts playing (0: at the first PCM; "
                        "default: the plan's, 0 with an adaptive chunk schedule, 200 with a fixed one)")
    flags.sampling(p)
    p.add_argument("--json", action="store_true", help="one JSON object per event line; the last has the metrics")
    flags.session(p)
    flags.device(p, required=False)
    flags.runtime(p)
    p.set_defaults(func=speak)


class _Media(argparse.Action):
    """--image / --audio: (kind, path) appended to one list, so the order given is the prompt's."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, value: Any,
                 option: str | None = None) -> None:
        kind = "image" if option == "--image" else "audio"
        if not Path(value).is_file():
            parser.error(f"{option} {value}: no such file")
        namespace.media = [*(getattr(namespace, "media", None) or []), (kind, str(Path(value).resolve()))]


def run(args: argparse.Namespace) -> int:
    from omni_edge.contracts import ContractError
    from omni_edge.runtime import Session

    guard = GUARD.install()  # main() installed it already; a caller of _run may not have
    try:
        prompt = _read_prompt(args)
    except ValueError as exc:
        print(f"omni-edge run: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "device", None) is not None:
        from omni_edge.harness.deploy.remote_run import run_on_device

        args.prompt = prompt
        return run_on_device(args, "run")
    if getattr(args, "speak", None) is not None:
        return _run_omni(args, prompt, guard)
    streams = Streams(args, ("text",), guard)
    session = open_session(Session, args, streams, "run")
    if session is None:
        return streams.end("run") if guard.cancelled else 1

    def on_event(event: dict[str, Any]) -> bool:
        if not args.json:
            print_event(event, False)
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


def _run_omni(args: argparse.Namespace, prompt: str, guard: CancelOnSignal) -> int:
    """run --speak: the omni plan's text stream on stdout, its audio into the WAV."""
    from omni_edge.contracts import ContractError
    from omni_edge.runtime import OmniSession

    streams = Streams(args, ("text", "audio"), guard)
    session = open_session(OmniSession, args, streams, "run")
    if session is None:
        return streams.end("run") if guard.cancelled else 1

    def on_text(event: dict[str, Any]) -> bool:
        if not args.json:
            print_event(event, False)
        return streams.event("text", event)

    try:
        result = guard.run(session, lambda: session.run(
            prompt, on_text=on_text, on_audio=lambda event, pcm: streams.event("audio", event), wav=args.speak,
            max_frames=args.max_frames, **_text_options(args)))
    except ContractError as exc:
        return streams.end("run", exc)
    if not args.json:
        print_audio_summary(result.audio, args.speak, "audio: ")
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


def _text_options(args: argparse.Namespace) -> dict[str, Any]:
    """The text stream's request options of `run` (Session.run's keywords), plain or with --speak."""
    return dict(chat=args.chat, system_prompt=args.system or "", prompt_ids=args.prompt_ids or (),
                media=getattr(args, "media", None) or (), max_new_tokens=args.max_new_tokens or 0,
                sampling=flags.sampling_of(args), stop_strings=args.stop or (), ignore_stop_tokens=args.ignore_stop_tokens)


def speak(args: argparse.Namespace) -> int:
    from omni_edge.contracts import ContractError
    from omni_edge.runtime import SpeechSession

    if getattr(args, "device", None) is not None:
        from omni_edge.harness.deploy.remote_run import run_on_device

        return run_on_device(args, "speak")
    guard = GUARD.install()
    streams = Streams(args, ("audio",), guard)
    session = open_session(SpeechSession, args, streams, "speak")
    if session is None:
        return streams.end("speak") if guard.cancelled else 1
    try:
        utterance = guard.run(session, lambda: session.speak(
            args.text or "", text_ids=args.text_ids or (), max_frames=args.max_frames, sampling=flags.sampling_of(args),
            prebuffer_ms=args.prebuffer_ms, wav=args.out, on_event=lambda event, pcm: streams.event("audio", event)))
    except ContractError as exc:
        return streams.end("speak", exc)
    if not args.json:
        print_audio_summary(utterance.metrics, args.out)
    return streams.end("speak")


def act(args: argparse.Namespace) -> int:
    """One observation to one action chunk; --json: the last line is the action (or the terminal
    cancelled/error event)."""
    from omni_edge.contracts import ContractError
    from omni_edge.runtime import PolicySession
    from omni_edge.runtime.observation import read_observation

    guard = GUARD.install()
    try:
        observation, prompt = read_observation(args.observation, args.noise)
    except ValueError as exc:
        print(f"omni-edge act: {exc}", file=sys.stderr)
        return 2
    streams = Streams(args, ("action",), guard)
    session = open_session(PolicySession, args, streams, "act")
    if session is None:
        return streams.end("act") if guard.cancelled else 1
    try:
        result = guard.run(session, lambda: session.act(observation, prompt, deadline_ms=args.deadline_ms,
                                                         on_event=lambda e: guard.keep_going()))
    except ContractError as exc:
        return streams.end("act", exc)
    if args.json:
        print_line(json.dumps(result))
    elif result.get("kind") == "action":
        print_action(result)
    else:
        print(f"omni-edge act: {result.get('kind')}: {result.get('error') or result.get('finish_reason')}", file=sys.stderr)
    if result.get("kind") == "action":
        return 0
    return guard.exit_code if guard.cancelled else 1
