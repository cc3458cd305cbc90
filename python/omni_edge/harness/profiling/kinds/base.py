"""What the profiling protocol measures for one kind of plan: the interface every kind implements.

A kind (text.py, speech.py, omni.py, multimodal.py, policy.py; `kind_of` picks it from the plan)
owns its streams and workloads, omni-edge-run's command line for a workload, the inputs it pushes
to the device, one request's row from its lines, the metrics summarized over the requests (and
the per-request series summarized over every value), whether the interruption group applies (a
stream of audio to stop), its fields of report.json's workload, the latency/throughput pair a
sustained run follows, what the reliability scenarios count, and the line `omni-edge profile`
ends with.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from omni_edge.harness.devices.base import Device

TERMINAL_KINDS = ("done", "cancelled", "error", "action")  # `act --json` ends with the action in place of "done"

Event = dict[str, Any]
Lines = list[tuple[float, Event]]  # a request's lines with their arrival times (s since the process spawned)


@dataclass(frozen=True)
class Workload:
    name: str
    prompt: str           # the prompt (text, omni) or the text to speak (speech)
    max_new_tokens: int   # text and omni
    max_frames: int = 0   # speech and omni: frames spoken at most (0: the plan's limit)
    media: tuple[tuple[str, str], ...] = ()  # a multimodal plan's ("image" | "audio", path on the target), in order
    observation: str = ""  # a policy plan's OBS.json on the target
    deadline_ms: float = 0.0  # policy: the action is due this long after the capture
    capture_age_ms: float = 0.0  # policy: each request's observation is stamped this long before it starts


def is_first_output(event: Event) -> bool:
    return event.get("kind") in ("token", "pcm", "action")


def p50_line(metrics: dict[str, Any], metric: str) -> str:
    """"ttft p50 12.0 ms (n=20)": a metric's median and count, as the summary line shows it."""
    return f"{metric.replace('_ms', '')} p50 {metrics[metric]['p50']:.1f} ms (n={metrics[metric]['n']})"


class PlanKind:
    """One kind of plan. Subclasses set the class attributes and implement `run_argv`,
    `add_fields` and `metric_names` (or `request_row` itself)."""

    name: ClassVar[str]                          # report.json's "kind"
    streams: ClassVar[tuple[str, ...]]           # the streams every request ends (one terminal line each)
    workloads: ClassVar[dict[str, Workload]]     # --workload short | medium | long
    has_audio: ClassVar[bool] = False            # the interruption group and the report's speech section apply
    series: ClassVar[tuple[tuple[str, str], ...]] = ()  # (metric, row key): summarized over every value of each row
    latency_metric: ClassVar[str] = "ttft_ms"        # what a sustained run compares between its first and last quarter
    throughput_metric: ClassVar[str] = "decode_tok_s"
    first_output_metric: ClassVar[str] = "ttft_ms"   # the report's first latency plot
    count_field: ClassVar[str] = "n_generated_tokens"  # reliability: what a slow consumer must not lose ...
    count_stream: ClassVar[str] = "text"               # ... read from this stream's terminal line
    consumer_delay_ms: ClassVar[int] = 20              # reliability: the slow consumer's wait per event (a slow UI)

    def __init__(self, plan: Path | None = None) -> None:
        self.plan = plan  # None when only a report is rendered

    def workload(self, name: str) -> Workload:
        return self.workloads[name]

    def prepare(self, workload: Workload, device: Device, root: str, scratch: Path) -> Workload:
        """Write the inputs a request reads under `scratch`, push them under the deployment's
        `root` on the device, and return the workload that names them (nothing to do by default)."""
        return workload

    def stream_of(self, event: Event) -> str:
        """The stream a line belongs to: omni lines carry it, the others have one stream."""
        return str(event.get("stream", self.streams[0]))

    def run_argv(self, binary: str, plan: str, workload: Workload, wav: str) -> list[str]:
        """omni-edge-run's command line for one workload (without --repeat/--threads)."""
        raise NotImplementedError

    def prebuffer_argv(self, prebuffer_ms: int | None) -> list[str]:
        return [] if prebuffer_ms is None else ["--prebuffer-ms", str(prebuffer_ms)]

    def request_row(self, lines: Lines, start: float) -> dict[str, Any] | None:
        """One request's measured row, or None unless every stream finished ("done")."""
        terminals = {self.stream_of(e): e for _, e in lines if e.get("kind") in TERMINAL_KINDS}
        if any(terminals.get(s, {}).get("kind") != "done" for s in self.streams):
            return None
        done_t = max(t for t, e in lines if e.get("kind") in TERMINAL_KINDS)
        row: dict[str, Any] = {"wall_ms": (done_t - start) * 1000}
        self.add_fields(row, terminals, lines, start)
        if "total_ms" not in row:
            row["total_ms"] = row.get("audio_total_ms")
        return row

    def add_fields(self, row: dict[str, Any], terminals: dict[str, Event], lines: Lines, start: float) -> None:
        """A finished request's fields from its terminal lines (by stream) and its other lines."""
        raise NotImplementedError

    def metric_names(self) -> list[str]:
        """The row fields summarized per group (p50/p95/n), in the report's order."""
        raise NotImplementedError

    def report_workload(self, workload: Workload) -> dict[str, Any]:
        """The kind's fields of report.json's "workload" (None where a limit does not apply)."""
        return {"max_new_tokens": workload.max_new_tokens, "max_frames": workload.max_frames}

    def headline(self, metrics: dict[str, Any], report: dict[str, Any]) -> str:
        """The summary line's figures of the first concurrency group."""
        raise NotImplementedError

    def summary_line(self, report: dict[str, Any], out: Path) -> str:
        """The line `omni-edge profile` prints at the end."""
        metrics = next(iter(report["groups"].values()))["metrics"]  # the first --concurrency's group
        line = f"{out}/report.json ({self.name}): {self.headline(metrics, report)}"
        if report["sustained"]:
            s = report["sustained"]
            drift = s["last_over_first"][s["throughput_metric"]]
            line += (f"; sustained {s['duration_s']:.0f} s: {s['requests']} requests, last/first quarter "
                     f"{s['throughput_metric']} {drift or 0:.3f}, RSS slope {s['rss_mb']['slope_mb_per_min'] or 0:.2f} MB/min")
        if report["reliability"]:
            r = report["reliability"]
            line += "; reliability " + ", ".join(f"{k} {'pass' if v['passed'] else 'FAIL'}" for k, v in r["scenarios"].items())
        if report.get("serving"):
            t = report["serving"]["transport"]
            shown = t["ttft_ms"] if t["ttft_ms"] is not None else t["first_pcm_ms"]
            line += f"; through the server +{shown or 0:.1f} ms to the first output"
        if report["trace"]:
            line += f"; trace {out}/trace.json ({report['trace']['graph_runs']} graph runs)"
        return f"{line}; report.md and {', '.join(report['plots'])}"

    def exit_status(self, report: dict[str, Any]) -> int:
        """`omni-edge profile`'s exit status: 1 when a reliability scenario failed."""
        return 0 if not report["reliability"] or report["reliability"]["passed"] else 1
