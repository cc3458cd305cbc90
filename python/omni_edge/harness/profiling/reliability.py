"""Reliability scenarios of the profiling protocol, each a pass/fail with its evidence.

  slow consumer      the CLI's consumer waits after every event (a player or a UI slower than the
                     model): nothing is lost (same tokens / frames, seq contiguous, one terminal per
                     stream) and memory stays where a full-speed run leaves it.
  cancel storm       processes stopped (SIGTERM) at random moments, from loading to after the end:
                     every stream ends with exactly one terminal line, seq strictly increasing with
                     no duplicate, nothing after a terminal, exit 0 or 143.
  repeated sessions  one process opens, runs and closes N sessions in turn: RSS after each close
                     does not grow (the first sessions climb to where the allocator keeps its
                     pages and are not counted; MALLOC_ARENA_MAX=2 shows the same plateau lower).
  killed worker      SIGKILL mid-request (a crash, the OS's low-memory killer): the harness ends
                     each stream with a terminal error of its own ("worker_killed"), and the next
                     launch on the same deployment loads and answers (nothing of the dead process
                     survives: its state is retired with it).
Admission under concurrency (a second session refused before loading when the pool is full) is
an in-process property: it is checked by the ledger tests, not by launching processes here.
"""

from __future__ import annotations

import random
import statistics
from typing import TYPE_CHECKING, Any

from omni_edge.harness.profiling.kinds import TERMINAL_KINDS, PlanKind, kind_named

if TYPE_CHECKING:
    from omni_edge.harness.profiling.process import ProcessRun
    from omni_edge.harness.profiling.profiler import Profiler

SIGTERM = 15
SIGTERM_EXIT = 128 + SIGTERM
MEMORY_SLACK_MB = 64.0       # a slow run may hold the queued events' payloads, not more
GROWTH_LIMIT_MB = 4.0        # repeated sessions: RSS after the last closes vs after the warm-up ones
WARM_SESSIONS, WINDOW = 10, 20


def stream_faults(run: ProcessRun, kind: PlanKind | str) -> list[str]:
    """What breaks the output contract in one process's lines (empty: none); `kind` or its name."""
    kind = kind_named(kind) if isinstance(kind, str) else kind
    faults: list[str] = []
    last_seq: dict[str, int] = {}
    ended: dict[str, int] = {}
    for _, e in run.lines:
        if e.get("kind") in ("session", "session_closed", "stop", "unparsed"):
            continue
        stream = kind.stream_of(e)
        if stream in ended:
            faults.append(f"{stream}: {e.get('kind')} after its terminal line")
        seq = e.get("seq")
        if isinstance(seq, int) and seq > 0:  # a terminal the CLI wrote itself carries seq 0
            if seq <= last_seq.get(stream, 0):
                faults.append(f"{stream}: seq {seq} after {last_seq[stream]} (stale or duplicate)")
            last_seq[stream] = seq
        if e.get("kind") in TERMINAL_KINDS:
            ended[stream] = ended.get(stream, 0) + 1
    missing = [s for s in kind.streams if ended.get(s, 0) != 1]
    faults += [f"{s}: {ended.get(s, 0)} terminal lines" for s in missing]
    return faults


def _terminal(run: ProcessRun, kind: PlanKind, stream: str) -> dict[str, Any]:
    return next((e for _, e in run.lines if e.get("kind") in TERMINAL_KINDS and kind.stream_of(e) == stream), {})


def slow_consumer(p: Profiler, delay_ms: int) -> dict[str, Any]:
    normal = p.launch("reliability-normal", 0, 1, p.workload)
    slow = p.launch("reliability-slow", 0, 1, p.workload, extra=("--consumer-delay-ms", str(delay_ms)))
    count, stream = p.kind.count_field, p.kind.count_stream  # what a slow consumer must not lose
    got = {name: _terminal(run, p.kind, stream) for name, run in (("normal", normal), ("slow", slow))}
    peaks = {name: float(t.get("peak_rss_mb") or 0) for name, t in got.items()}
    faults = stream_faults(slow, p.kind)
    same = got["slow"].get("kind") == "done" and got["slow"].get(count) == got["normal"].get(count)
    bounded = peaks["slow"] - peaks["normal"] < MEMORY_SLACK_MB
    events = sum(1 for _, e in slow.lines if e.get("kind") in ("token", "pcm"))
    return {"passed": same and bounded and not faults, "delay_ms_per_event": delay_ms, "events": events,
            count: {k: t.get(count) for k, t in got.items()}, "peak_rss_mb": peaks,
            "total_ms": {k: t.get("total_ms") for k, t in got.items()}, "faults": faults,
            "process_s": slow.lines[-1][0] if slow.lines else 0.0}


def cancel_storm(p: Profiler, runs: int, horizon_s: float, delay_ms: int, seed: int = 1) -> dict[str, Any]:
    """Stops land anywhere from loading to just after the end; the slow consumer stretches the
    request so that most land mid-stream."""
    rng = random.Random(seed)
    endings: dict[str, int] = {}
    faults: list[str] = []
    for i in range(runs):
        run = p.launch("reliability-storm", i, 1, p.workload, stop_after_spawn_s=rng.uniform(0.0, horizon_s),
                       extra=("--consumer-delay-ms", str(delay_ms)))
        if run.returncode == -SIGTERM and not run.outputs():  # stopped before main() ran: nothing to end
            endings["stopped before main"] = endings.get("stopped before main", 0) + 1
            continue
        for f in stream_faults(run, p.kind):
            faults.append(f"run {i}: {f}")
        if run.returncode not in (0, SIGTERM_EXIT):
            faults.append(f"run {i}: exit {run.returncode}")
        for _, e in run.lines:
            if e.get("kind") in TERMINAL_KINDS:
                endings[str(e["kind"])] = endings.get(str(e["kind"]), 0) + 1
    return {"passed": not faults, "runs": runs, "stopped_within_s": round(horizon_s, 3), "endings": endings,
            "faults": faults[:20]}


def repeated_sessions(p: Profiler, sessions: int) -> dict[str, Any]:
    """RSS after each close settles where the allocator keeps its pages (the first sessions climb
    to it); a leak keeps climbing. Growth: the median of the last 20 closes against the median of
    the 20 after the warm-up."""
    run = p.launch("reliability-sessions", 0, 1, p.workload, extra=("--sessions", str(sessions)))
    closes = [e for _, e in run.lines if e.get("kind") == "session_closed"]
    loads = [float(e["load_ms"]) for _, e in run.lines if e.get("kind") == "session"]
    # The heap in use when the platform reports it (a leak grows it, an allocator's kept pages do
    # not); RSS otherwise, and always shown.
    measure = "heap_in_use_mb" if closes and all(float(e.get("heap_in_use_mb", -1)) >= 0 for e in closes) else "rss_mb"
    enough = len(closes) == sessions and sessions >= WARM_SESSIONS + 2 * WINDOW

    def spread(key: str) -> dict[str, float | None]:
        values = [float(e[key]) for e in closes if key in e]
        settled, last = values[WARM_SESSIONS:WARM_SESSIONS + WINDOW], values[-WINDOW:]
        return {"first": values[0] if values else None, "settled_median": statistics.median(settled) if settled else None,
                "last_median": statistics.median(last) if last else None, "max": max(values, default=None)}

    after = {key: spread(key) for key in ("rss_mb", "heap_in_use_mb")}
    settled_v, last_v = after[measure]["settled_median"], after[measure]["last_median"]
    growth = last_v - settled_v if enough and settled_v is not None and last_v is not None else None
    return {"passed": growth is not None and growth < GROWTH_LIMIT_MB,
            "sessions": len(closes), "measured": measure, "after_close": after,
            "growth_mb": growth, "limit_mb": GROWTH_LIMIT_MB,
            "load_ms": {"first": loads[0] if loads else None, "median": statistics.median(loads) if loads else None},
            "faults": stream_faults_per_request(run, p.kind, sessions)
            + ([] if enough else [f"needs at least {WARM_SESSIONS + 2 * WINDOW} sessions"])}


def stream_faults_per_request(run: ProcessRun, kind: PlanKind, expected: int) -> list[str]:
    requests = run.requests(len(kind.streams))
    faults = [] if len(requests) == expected else [f"{len(requests)} requests answered, {expected} expected"]
    return faults + [f"request {i}: not done" for i, r in enumerate(requests)
                     if any(e.get("kind") != "done" for _, e in r if e.get("kind") in TERMINAL_KINDS)]


def killed_worker(p: Profiler, delay_ms: int) -> dict[str, Any]:
    """SIGKILL 0.1 s after the first output of a request the slow consumer keeps going."""
    run = p.launch("reliability-killed", 0, 1, p.workload, stop_after_first_output_s=0.1, hard_stop=True,
                   expect_failure=True, extra=("--consumer-delay-ms", str(delay_ms)))
    seen = {p.kind.stream_of(e) for _, e in run.lines if e.get("kind") in TERMINAL_KINDS}
    # What the harness reports for a worker that died without ending its streams.
    reported = {s: ({"kind": "error", "reason": "worker_killed", "returncode": run.returncode} if s not in seen
                    else _terminal(run, p.kind, s)) for s in p.kind.streams}
    after = p.launch("reliability-after-kill", 0, 1, p.workload)
    recovered = all(_terminal(after, p.kind, s).get("kind") == "done" for s in p.kind.streams)
    killed = run.returncode is not None and run.returncode in (-9, 128 + 9)
    return {"passed": killed and recovered, "returncode": run.returncode, "terminal_reported": reported,
            "ended_before_the_kill": sorted(seen), "next_launch_done": recovered}


def run_reliability(p: Profiler, *, sessions: int = 100) -> dict[str, Any]:
    """Every scenario, on the profile's workload."""
    delay_ms = p.kind.consumer_delay_ms  # per event: a player at a fraction of real time, a slow UI
    slow = slow_consumer(p, delay_ms)
    scenarios = {
        "slow_consumer": slow,
        "cancel_storm": cancel_storm(p, p.runs, horizon_s=1.2 * float(slow["process_s"]), delay_ms=delay_ms),
        "repeated_sessions": repeated_sessions(p, sessions),
        "killed_worker": killed_worker(p, delay_ms),
    }
    return {"passed": all(s["passed"] for s in scenarios.values()), "scenarios": scenarios,
            "not_run_here": {"admission_under_concurrency": "in-process: the ledger tests check that a second session "
                                                            "is refused before loading when the pool is full"}}
