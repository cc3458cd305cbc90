"""An omni plan (final outputs text and audio: thinker -> talker -> vocoder): both streams in one
request, each measured as in text.py and speech.py; its handoff is the thinker's first token to
the first PCM.
"""

from __future__ import annotations

from typing import Any, ClassVar

from omni_edge.harness.profiling.kinds.base import Event, Lines, PlanKind, Workload, p50_line
from omni_edge.harness.profiling.kinds.speech import SPEECH_METRICS, audio_fields, audio_line, frames_argv
from omni_edge.harness.profiling.kinds.text import PARAGRAPH, TEXT_METRICS, decode_line, text_argv, text_fields


class Omni(PlanKind):
    name = "omni"
    streams = ("text", "audio")
    workloads: ClassVar[dict[str, Workload]] = {
        "short": Workload("short", "Say good morning.", 16, 24),
        "medium": Workload("medium", PARAGRAPH + "Say it in a sentence.", 48, 64),
        "long": Workload("long", PARAGRAPH * 3 + "Say it in a few sentences.", 96, 160)}
    has_audio = True
    series = (("token_interval_ms", "token_intervals_ms"), ("chunk_gap_ms", "chunk_gaps_ms"))

    def run_argv(self, binary: str, plan: str, workload: Workload, wav: str) -> list[str]:
        return [*text_argv(binary, plan, workload), "--speak", wav, *frames_argv(workload), "--json", "--profile"]

    def add_fields(self, row: dict[str, Any], terminals: dict[str, Event], lines: Lines, start: float) -> None:
        text_fields(row, terminals["text"], lines)
        audio = terminals["audio"]
        audio_fields(row, audio, lines, start)
        if audio.get("first_pcm_ms") is not None and row.get("ttft_ms") is not None:
            row["handoff_ms"] = float(audio["first_pcm_ms"]) - float(row["ttft_ms"])

    def metric_names(self) -> list[str]:
        return ["wall_ms", *TEXT_METRICS, *SPEECH_METRICS, "handoff_ms"]

    def headline(self, metrics: dict[str, Any], report: dict[str, Any]) -> str:
        return f"{p50_line(metrics, 'ttft_ms')}, {audio_line(metrics, report)}, {decode_line(metrics)}"
