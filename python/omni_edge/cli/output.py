"""What run, speak and act print: each stream's JSON lines as they come and one terminal line for
every stream whose own never came (so --json output always ends each stream with its terminal
event), or the text and the one-line summaries a person reads."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omni_edge.interrupt import CancelOnSignal

if TYPE_CHECKING:
    from omni_edge.contracts import ContractError


def print_line(text: str) -> None:
    """One event line in one write: with PYTHONUNBUFFERED, print() writes the text and its newline
    in two, and the fault lines a truncated weights file makes another thread write could land
    between them (base/platform/mapped_files.h)."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


class Streams:
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
            print_line(json.dumps(tagged, ensure_ascii=False))
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
            print_line(self._line(stream, line))
        if error is not None:
            print(f"omni-edge {command}: {error.code}: {error.message}", file=sys.stderr)
            return 1
        kinds = {t.get("kind") for t in self.terminals.values()}
        if self.guard.cancelled and (not self.terminals or "cancelled" in kinds):
            return self.guard.exit_code
        return 1 if "error" in kinds else 0


def open_session(kind: Any, args: argparse.Namespace, streams: Streams, command: str) -> Any:
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


def print_action(a: dict[str, Any]) -> None:
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
    # π0 computes a prefix; InternVLA-A1 encodes its history's frames (Cosmos) and a context.
    parts = f"prefix {t['prefix_ms']:.1f} ms" if "prefix_ms" in t else \
        f"frames {t['frame_ms']:.1f} ms, context {t['context_ms']:.1f} ms"
    mode = f" ({a['action_mode']} actions)" if "action_mode" in a else ""
    print(f"preprocess {t['preprocess_ms']:.1f} ms, vision {t['vision_ms']:.1f} ms, {parts}, "
          f"{len(t['step_ms'])} steps {t['denoise_ms']:.1f} ms, total {t.get('total_ms', 0):.1f} ms{mode}", file=sys.stderr)


def print_event(event: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_line(json.dumps(event, ensure_ascii=False))
    elif event["kind"] == "token":
        print(event["text"], end="", flush=True)
    else:
        error = f", error: {event['error']}" if event.get("error") else ""
        print(f"\n[{event['kind']}: {event['finish_reason']}] prompt {event['n_prompt_tokens']} tok, generated "
              f"{event['n_generated_tokens']} tok, TTFT {event['ttft_ms']:.1f} ms, prefill {event['prefill_tok_s']:.1f} tok/s, "
              f"decode {event['decode_tok_s']:.2f} tok/s, peak RSS {event['peak_rss_mb']:.0f} MB{error}", file=sys.stderr)


def print_audio_summary(m: dict[str, Any], wav: Path, label: str = "") -> None:
    """One stderr line for a spoken utterance: its end, length, and the playback clock's numbers."""
    print(f"[{label}{m['finish_reason']}] {m['frames']} frames, {m['samples']} samples ({m['audio_ms'] / 1000:.2f} s at "
          f"{m['sample_rate']} Hz) -> {wav}; first PCM {m['first_pcm_ms']:.1f} ms, playback from "
          f"{m['playback_start_ms']:.1f} ms ({m.get('chunk_schedule', 'fixed')} chunks, prebuffer "
          f"{m.get('prebuffer_ms', 0):.0f} ms), RTF {m['rtf']:.3f}, {m['underruns']} underruns "
          f"({m['underrun_ms']:.1f} ms), least lead {m.get('lead_min_ms', -1):.0f} ms", file=sys.stderr)
