"""One launched omni-edge-run as the profiler sees it (its lines with arrival times, memory
samples, exit) and the summary every measured series gets (p50/p95, mean, min, max, n)."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from omni_edge.harness.devices.base import MemorySample
from omni_edge.harness.profiling.kinds import TERMINAL_KINDS


@dataclass
class ProcessRun:
    """One launched omni-edge-run: its lines with arrival times, memory samples and exit."""

    group: str
    index: int
    spawn_t: float = 0.0
    lines: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    memory: list[MemorySample] = field(default_factory=list)
    returncode: int | None = None
    stderr: str = ""
    timed_out: bool = False
    memory_error: str = ""

    def outputs(self) -> list[dict[str, Any]]:
        """The process's own lines (not the harness's "stop" mark)."""
        return [e for _, e in self.lines if e.get("kind") != "stop"]

    def session(self) -> tuple[float, dict[str, Any]] | None:
        return next(((t, e) for t, e in self.lines if e.get("kind") == "session"), None)

    def requests(self, n_streams: int = 1) -> list[list[tuple[float, dict[str, Any]]]]:
        """Lines split per request (each ends once every stream had its terminal event)."""
        out: list[list[tuple[float, dict[str, Any]]]] = []
        current: list[tuple[float, dict[str, Any]]] = []
        ended = 0
        for t, e in self.lines:
            if e.get("kind") in ("session", "session_closed"):
                continue
            current.append((t, e))
            ended += e.get("kind") in TERMINAL_KINDS
            if ended == n_streams:
                out.append(current)
                current, ended = [], 0
        return out

    def placement(self) -> list[dict[str, Any]]:
        """The placements of `omni-edge-run --info` (its session info, one JSON line on stderr)."""
        for line in self.stderr.splitlines():
            if line.startswith("{") and '"placements"' in line:
                try:
                    return list(json.loads(line)["placements"])
                except (ValueError, KeyError):
                    return []
        return []


def summarize(values: list[float]) -> dict[str, float | int | None]:
    """p50/p95 (nearest-rank on sorted samples), mean, min, max and the sample count."""
    if not values:
        return {"n": 0, "p50": None, "p95": None, "mean": None, "min": None, "max": None}
    s = sorted(values)

    def rank(q: float) -> float:
        return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]

    return {"n": len(s), "p50": rank(0.50), "p95": rank(0.95), "mean": statistics.fmean(s), "min": s[0], "max": s[-1]}

