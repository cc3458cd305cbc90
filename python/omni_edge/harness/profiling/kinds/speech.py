"""A speech plan (its final output audio): one stream of PCM.

A speech request's audio stream is `pcm` lines then one terminal line whose fields come from the
controller's own playback clock (started when the declared prebuffer is queued): first playable
PCM, playback start, deficits (underruns) and their duration, RTF, the tail after the input ended,
the talker's time per frame and the vocoder's time. The harness adds what only the reader sees:
the arrival gaps between chunks at the pipe, and the audio delivered against the playback clock
along the request (the plot).
"""

from __future__ import annotations

import itertools
from typing import Any, ClassVar

from omni_edge.harness.profiling.kinds.base import Event, Lines, PlanKind, Workload, p50_line

SPOKEN = ("Good morning. The train to the coast leaves at nine from platform four, and the next one an hour "
          "later. Tickets are sold at the counter and on board. ")

# The audio terminal's fields a row keeps (the controller's clock), and the ones summarized.
SPEECH_FIELDS = ("first_pcm_ms", "playback_start_ms", "rtf", "underruns", "underrun_ms", "lead_min_ms", "tail_ms",
                 "total_ms", "audio_ms", "talker_ms_per_frame", "vocoder_ms", "prebuffer_ms", "chunk_schedule")
SPEECH_METRICS = ("first_pcm_ms", "playback_start_ms", "rtf", "underruns", "underrun_ms", "lead_min_ms", "tail_ms",
                  "talker_ms_per_frame", "vocoder_ms")


def frames_argv(workload: Workload) -> list[str]:
    return ["--max-frames", str(workload.max_frames)] if workload.max_frames else []


def audio_fields(row: dict[str, Any], terminal: Event, lines: Lines, start: float) -> None:
    """The audio terminal's fields (its total as audio_total_ms), the gaps between PCM chunks at
    the pipe and the audio delivered along the request."""
    row |= {f"audio_{k}" if k == "total_ms" else k: terminal.get(k) for k in SPEECH_FIELDS}
    pcm = [(t, e) for t, e in lines if e.get("kind") == "pcm"]
    rate = float(terminal.get("sample_rate") or 1)
    row["chunk_gaps_ms"] = [(b - a) * 1000 for (a, _), (b, _) in itertools.pairwise(pcm)]
    # Audio delivered (ms) against the harness's clock (ms since the request started).
    delivered, arrivals = 0.0, []
    for t, e in pcm:
        delivered += 1000.0 * float(e.get("n_samples", 0)) / rate
        arrivals.append([round((t - start) * 1000, 3), round(delivered, 3)])
    row["pcm_arrivals"] = arrivals


def audio_line(metrics: dict[str, Any], report: dict[str, Any]) -> str:
    """RTF, underruns and the interruption's stop -> end, as the summary line shows them."""
    stop = report["speech"]["interruption"]["metrics"]["stop_to_terminal_ms"]
    return (f"RTF p50 {metrics['rtf']['p50']:.3f}, underruns p95 {metrics['underruns']['p95']:.0f}, "
            f"stop -> end p50 {stop['p50'] or 0:.1f} ms")


class Speech(PlanKind):
    name = "speech"
    streams = ("audio",)
    workloads: ClassVar[dict[str, Workload]] = {
        "short": Workload("short", "Good morning.", 0, 24),
        "medium": Workload("medium", SPOKEN, 0, 64),
        "long": Workload("long", SPOKEN * 3, 0, 160)}
    has_audio = True
    series = (("chunk_gap_ms", "chunk_gaps_ms"),)
    latency_metric, throughput_metric = "first_pcm_ms", "rtf"
    first_output_metric = "first_pcm_ms"
    count_field, count_stream = "frames", "audio"
    consumer_delay_ms = 300  # a player at a fraction of real time

    def run_argv(self, binary: str, plan: str, workload: Workload, wav: str) -> list[str]:
        # speak does not reserve by default; the profile compares RSS with the ledger's budget
        argv = [binary, "speak", "--plan", plan, "--text", workload.prompt, "--out", wav, "--memory-pools", "auto"]
        return [*argv, *frames_argv(workload), "--json", "--profile"]

    def add_fields(self, row: dict[str, Any], terminals: dict[str, Event], lines: Lines, start: float) -> None:
        audio_fields(row, terminals["audio"], lines, start)

    def metric_names(self) -> list[str]:
        return ["wall_ms", *SPEECH_METRICS, "audio_total_ms"]

    def report_workload(self, workload: Workload) -> dict[str, Any]:
        return {"max_new_tokens": None, "max_frames": workload.max_frames}

    def headline(self, metrics: dict[str, Any], report: dict[str, Any]) -> str:
        return f"{p50_line(metrics, 'first_pcm_ms')}, {audio_line(metrics, report)}"
