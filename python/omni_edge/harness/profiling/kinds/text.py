"""A text plan (its final output text): one stream of tokens.

A request's row: the controller's own TTFT, decode and prefill rates, total and peak RSS from the
terminal line, and what only the reader sees: the arrival gaps between tokens at the pipe.
"""

from __future__ import annotations

import itertools
from typing import Any, ClassVar

from omni_edge.harness.profiling.kinds.base import Event, Lines, PlanKind, Workload, p50_line

PARAGRAPH = ("The module provides a small set of tools for working with text, files and numbers. "
             "Each function documents its arguments, what it returns and which errors it raises. ")

# The text terminal's fields a row keeps (the controller's clock), and the ones summarized.
TEXT_FIELDS = ("ttft_ms", "total_ms", "decode_tok_s", "prefill_tok_s", "n_prompt_tokens", "n_generated_tokens",
               "peak_rss_mb")
TEXT_METRICS = ("ttft_ms", "total_ms", "decode_tok_s", "prefill_tok_s")


def text_argv(binary: str, plan: str, workload: Workload) -> list[str]:
    """The generation part of omni-edge-run's command line (a multimodal workload's media included)."""
    argv = [binary, "--plan", plan, "--prompt", workload.prompt, "--max-new-tokens", str(workload.max_new_tokens),
            "--ignore-stop-tokens"]
    for modality, path in workload.media:
        argv += [f"--{modality}", path]
    return argv


def text_fields(row: dict[str, Any], terminal: Event, lines: Lines) -> None:
    row |= {k: terminal.get(k) for k in TEXT_FIELDS}
    tokens = [t for t, e in lines if e.get("kind") == "token"]
    row["token_intervals_ms"] = [(b - a) * 1000 for a, b in itertools.pairwise(tokens)]


def decode_line(metrics: dict[str, Any]) -> str:
    return f"decode p50 {metrics['decode_tok_s']['p50']:.1f} tok/s"


class Text(PlanKind):
    name = "text"
    streams = ("text",)
    workloads: ClassVar[dict[str, Workload]] = {
        "short": Workload("short", "The module provides", 32),
        "medium": Workload("medium", PARAGRAPH * 3 + "In short,", 96),
        "long": Workload("long", PARAGRAPH * 8 + "To summarize,", 160)}
    series = (("token_interval_ms", "token_intervals_ms"),)

    def run_argv(self, binary: str, plan: str, workload: Workload, wav: str) -> list[str]:
        return [*text_argv(binary, plan, workload), "--json", "--profile"]

    def prebuffer_argv(self, prebuffer_ms: int | None) -> list[str]:
        return []  # no audio

    def add_fields(self, row: dict[str, Any], terminals: dict[str, Event], lines: Lines, start: float) -> None:
        text_fields(row, terminals["text"], lines)

    def metric_names(self) -> list[str]:
        return ["wall_ms", *TEXT_METRICS]

    def report_workload(self, workload: Workload) -> dict[str, Any]:
        return {"max_new_tokens": workload.max_new_tokens, "max_frames": None}

    def headline(self, metrics: dict[str, Any], report: dict[str, Any]) -> str:
        return f"{p50_line(metrics, 'ttft_ms')}, {decode_line(metrics)}"
