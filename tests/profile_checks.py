"""What every speech or omni profile report must hold (tests/test_harness.py, tests/test_omni.py)."""

from __future__ import annotations

import json
from pathlib import Path

PNG = b"\x89PNG\r\n\x1a\n"


def check_speech_profile(out: Path, kind: str, runs: int) -> dict:
    """The protocol's speech dimensions with n >= runs, the interruption group, and one terminal
    line per stream in every stopped process's log."""
    report = json.loads((out / "report.json").read_text())
    assert report["kind"] == kind and report["speech"]["prebuffer_ms"] == 200
    metrics = report["groups"]["concurrency-1"]["metrics"]
    for name in ("first_pcm_ms", "playback_start_ms", "rtf", "tail_ms", "talker_ms_per_frame", "vocoder_ms",
                 "chunk_gap_ms"):
        m = metrics[name]
        assert m["n"] >= runs and 0 < m["p50"] <= m["p95"] <= m["max"], (name, m)
    assert metrics["underruns"]["n"] >= runs and metrics["underrun_ms"]["n"] >= runs
    assert metrics["first_pcm_ms"]["p50"] < metrics["playback_start_ms"]["p50"]  # the 200 ms prebuffer is waited for
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
