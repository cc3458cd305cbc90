"""What every speech or omni profile report must hold (tests/harness/test_harness.py, tests/export/test_omni.py)."""

from __future__ import annotations

import json
from pathlib import Path

PNG = b"\x89PNG\r\n\x1a\n"


def check_speech_profile(out: Path, kind: str, runs: int) -> dict:
    """The protocol's speech dimensions with n >= runs, the interruption group, and one terminal
    line per stream in every stopped process's log."""
    report = json.loads((out / "report.json").read_text())
    # The exported plans' adaptive chunk schedule: no prebuffer unless the request names one.
    assert report["kind"] == kind and report["speech"]["prebuffer_ms"] == 0
    assert report["speech"]["chunk_schedule"] == "adaptive"
    metrics = report["groups"]["concurrency-1"]["metrics"]
    for name in ("first_pcm_ms", "playback_start_ms", "rtf", "tail_ms", "talker_ms_per_frame", "vocoder_ms",
                 "chunk_gap_ms"):
        m = metrics[name]
        assert m["n"] >= runs and 0 < m["p50"] <= m["p95"] <= m["max"], (name, m)
    assert metrics["underruns"]["n"] >= runs and metrics["underrun_ms"]["n"] >= runs
    assert metrics["first_pcm_ms"]["p50"] == metrics["playback_start_ms"]["p50"]  # playback from the first PCM
    assert metrics["lead_min_ms"]["n"] >= runs
    stop = report["speech"]["interruption"]
    assert stop["runs"] == runs and stop["stopped"] >= runs // 2, stop
    assert stop["metrics"]["stop_to_terminal_ms"]["n"] == stop["stopped"] and stop["metrics"]["pcm_after_stop"]["max"] <= 1
    streams = {"speech": ["audio"], "omni": ["text", "audio"]}[kind]
    for log in sorted((out / "raw" / "logs").glob("interruption-*.stdout.jsonl")):
        events = [json.loads(line)["event"] for line in log.read_text().splitlines()]
        ends = [e.get("stream", streams[0]) for e in events if e.get("kind") in ("done", "cancelled", "error")]
        assert sorted(ends) == sorted(streams), (log.name, ends)
    assert "pcm_arrival.png" in report["plots"] and (out / "pcm_arrival.png").read_bytes()[:8] == PNG
    md = (out / "report.md").read_text()
    assert "## Speech" in md and "| concurrency-1 | first_pcm_ms |" in md
    return report


def check_chrome_trace(path: Path) -> dict:
    """The Chrome trace event format as Perfetto's JSON importer reads it: an object with a
    traceEvents list of complete ("X": name, cat, ts and dur in microseconds, pid, tid, args) and
    metadata ("M": process_name / thread_name) events; every thread with spans is named, and the
    spans of one thread nest (a slice track cannot hold partly overlapping slices)."""
    data = json.loads(path.read_text())
    assert isinstance(data, dict) and isinstance(data["traceEvents"], list) and data["displayTimeUnit"] == "ms"
    named: set[int] = set()
    per_thread: dict[int, list[tuple[float, float, str]]] = {}
    for e in data["traceEvents"]:
        assert isinstance(e["name"], str) and e["name"] and type(e["pid"]) is int and type(e["tid"]) is int, e
        assert e["ph"] in ("X", "M"), e
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name") and isinstance(e["args"]["name"], str), e
            if e["name"] == "thread_name":
                named.add(e["tid"])
            continue
        assert isinstance(e["cat"], str) and isinstance(e["args"], dict), e
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)) and e["ts"] >= 0 <= e["dur"], e
        per_thread.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    assert per_thread and set(per_thread) <= named, (set(per_thread), named)
    for tid, spans in per_thread.items():
        stack: list[tuple[float, float, str]] = []
        for start, end, name in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1][1] <= start + 1e-3:
                stack.pop()
            assert not stack or end <= stack[-1][1] + 1e-3, (tid, name, start, end, stack[-1])
            stack.append((start, end, name))
    return data
